"""Math answer grading: final-answer extraction plus math-verify equivalence, run in worker processes with hard
timeouts.

What it does:
- `extract_final_answer`: the last complete `\\boxed{...}` / `\\fbox{...}` (nested braces), searched after the last
  `</think>` when the response has one. No final answer → `None` (graded `no_answer`, never a crash).
- `Grader`: math-verify 0.9.0 (`verify(gold, pred)` order; gold parsed once per worker and cached) inside a
  lazily-created pebble process pool (spawn context, safe inside vLLM / Ray actors and threads). Each item gets a
  soft per-item alarm in the worker's main thread and every chunk a hard pebble timeout that starts when the chunk
  starts in the worker; a worker that hangs or dies is killed and replaced, and its unfinished items are re-run one
  by one, so no item is ever lost. Items travel in chunks (one pickle round trip for many answers), identical
  (gold, answer) pairs are graded once, and verdicts are cached.
- Cheap exact paths that cannot contradict math-verify: plain integers (≤ 15 digits, compared as integers) and
  identical normalised strings (property-tested against math-verify in tests/test_grading.py).

What it does not do: it never passes model text to `eval`, `sympify` or `parse_expr` — predictions go only through
math-verify's LaTeX extraction (`LatexExtractionConfig`; its `ExprExtractionConfig` uses `parse_expr` and is not
used). It does not look for answers outside `\\boxed{}`/`\\fbox{}`.
"""
from __future__ import annotations

import atexit
import collections
import concurrent.futures as cf
import math
import multiprocessing
import os
import re
import threading
import time
from dataclasses import dataclass
from typing import Any, Sequence

STATUSES = ("correct", "wrong", "no_answer", "timeout", "error")
REWARD_LOG_KEYS = ("correct", "repetitive", "status_correct", "status_wrong", "status_no_answer", "status_timeout",
                   "status_error", "grade_latency_s")

MAX_RESPONSE_CHARS = 8_000_000   # larger responses are graded `error` without being searched
MAX_ANSWER_CHARS = 4_000         # extracted answers / golds longer than this are not sent to sympy (`error`)
_SCAN_LIMIT = 4 * MAX_ANSWER_CHARS  # brace matching gives up this far after `\boxed{`
_MAX_BOX_TRIES = 64              # unclosed `\boxed{` occurrences tried, newest first
_GRACE_S = 0.5                   # hard timeout = soft timeout + this
_CHUNK_BUDGET_S = 0.05           # a worker stops starting new items of a chunk after this long
_HEAVY_CHARS = 256               # gold + answer longer than this: graded alone, in the heavy lane


@dataclass(frozen=True)
class Grade:
    correct: bool
    status: str
    extracted: str | None
    latency_s: float


# ---------------------------------------------------------------------------------------------------- extraction
_BOX_RE = re.compile(r"\\(?:boxed|fbox)")
_BRACE_RE = re.compile(r"(?<!\\)[{}]")


def _to_text(x: Any) -> str | None:
    """Model text or a label of any JSON type → str (invalid UTF-8 and lone surrogates become U+FFFD)."""
    if x is None:
        return None
    if isinstance(x, bytes):
        x = x.decode("utf-8", "replace")
    elif isinstance(x, bool):
        x = str(x)
    elif isinstance(x, (int, float)):
        x = repr(x) if isinstance(x, float) and not x.is_integer() else str(int(x)) if isinstance(x, float) else str(x)
    elif isinstance(x, (list, tuple)):
        x = ", ".join(t for t in (_to_text(v) for v in x) if t is not None)
    elif not isinstance(x, str):
        x = str(x)
    try:
        x.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates (e.g. from JSON "\ud800"): replace rather than crash later
        x = x.encode("utf-8", "replace").decode("utf-8")
    return x


def _box_content(text: str, start: int) -> str | None:
    """Content of the `\\boxed` command whose name ends at `start`: `{...}` with nested braces, or `\\boxed 5`."""
    n = len(text)
    i = start
    while i < n and text[i] in " \t":
        i += 1
    if i >= n:
        return None
    if text[i] != "{":
        if i == start:  # `\boxedx` is another command, not `\boxed x`
            return None
        m = re.match(r"[^\s$]+", text[i:i + MAX_ANSWER_CHARS + 1])
        return m.group(0) if m else None
    depth = 0
    for m in _BRACE_RE.finditer(text, i, min(n, i + _SCAN_LIMIT)):
        depth += 1 if m.group(0) == "{" else -1
        if depth == 0:
            return text[i + 1:m.start()]
    return None


def extract_final_answer(text: str) -> str | None:
    """Last complete `\\boxed{}`/`\\fbox{}` content (nested braces) after the last `</think>` if there is one;
    an unclosed last box falls back to the previous complete one. None when there is no non-empty final answer."""
    text = _to_text(text)
    if not text:
        return None
    cut = text.rfind("</think>")
    if cut >= 0:
        text = text[cut + len("</think>"):]
    end = len(text)
    for _ in range(_MAX_BOX_TRIES):
        pos = max(text.rfind("\\boxed", 0, end), text.rfind("\\fbox", 0, end))
        if pos < 0:
            return None
        m = _BOX_RE.match(text, pos)
        if m is not None:
            content = _box_content(text, m.end())
            if content is not None:
                content = content.strip()
                return content or None
        end = pos
    return None


_WRAPPERS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"), ("**", "**"))


def normalize_answer(ans: str) -> str:
    """Whitespace, surrounding `$`/`\\(\\)`/`\\[\\]` and markdown bold stripped; nothing semantic."""
    s = ans.strip()
    changed = True
    while changed and s:
        changed = False
        for a, b in _WRAPPERS:
            if len(s) > len(a) + len(b) and s.startswith(a) and s.endswith(b):
                s = s[len(a):-len(b)].strip()
                changed = True
    return s


# ---------------------------------------------------------------------------------------------------- fast paths
_INT_RE = re.compile(r"-?[0-9]{1,15}")
_SAFE_IDENTICAL_RE = re.compile(r"[0-9A-Za-z\\{}()\[\]^_+\-*/.,:;|<>=!' ]+")


def _balanced(s: str) -> bool:
    depth = 0
    for m in _BRACE_RE.finditer(s):
        depth += 1 if m.group(0) == "{" else -1
        if depth < 0:
            return False
    return depth == 0


_DEC_RE = re.compile(r"(-?)([0-9]{1,12})(?:\.([0-9]{1,8}))?")
_FRAC_RE = re.compile(r"(-?)\\[dt]?frac\{(-?[0-9]{1,9})\}\{([0-9]{1,9})\}|(-?)([0-9]{1,9})/([0-9]{1,9})")


def _rational(s: str):
    """A plain decimal or integer fraction literal (`-12`, `3.25`, `\\frac{3}{8}`, `\\dfrac{-1}{2}`, `7/4`) as an exact
    Fraction, or None for anything else."""
    from fractions import Fraction
    m = _DEC_RE.fullmatch(s)
    if m:
        v = Fraction(int(m.group(2)) * 10 ** len(m.group(3) or "") + int(m.group(3) or 0), 10 ** len(m.group(3) or ""))
        return -v if m.group(1) else v
    m = _FRAC_RE.fullmatch(s)
    if m:
        sign, num, den = (m.group(1), m.group(2), m.group(3)) if m.group(2) is not None else m.group(4, 5, 6)
        if int(den) == 0:
            return None
        v = Fraction(int(num), int(den))
        return -v if sign else v
    return None


def fast_verdict(gold: str, pred: str) -> bool | None:
    """A verdict math-verify is known to give, without calling it, or None. Integers of ≤ 15 digits compare as
    integers; plain decimal/fraction literals compare as exact rationals — equal → True, different by more than 1e-4
    absolute and 1e-6 relative → False (verify's paths for two numbers are exact equality, 6-decimal rounding and
    simplify of the difference), anything in between → None; identical brace-balanced strings from a plain LaTeX
    alphabet are equal (verify's string fallback compares them equal even when sympy cannot parse them).
    Property-tested against math-verify in tests/test_grading.py."""
    if _INT_RE.fullmatch(gold) and _INT_RE.fullmatch(pred):
        return int(gold) == int(pred)
    if gold == pred and _SAFE_IDENTICAL_RE.fullmatch(gold) and _balanced(gold):
        return True
    if len(gold) <= 40 and len(pred) <= 40:
        a, b = _rational(gold), _rational(pred)
        if a is not None and b is not None:
            if a == b:
                return True
            diff = abs(a - b)
            if diff > 1e-4 and diff > 1e-6 * max(abs(a), abs(b)):
                return False
    return None


_POW_CHAIN_RE = re.compile(r"\d+(?:\s*\^\s*\{?\s*\(?\s*\d+)+")
_BIG_FACTORIAL_RE = re.compile(r"\d{6,}\s*\)?\s*!")
_EXPLOSIVE_DIGITS = 1e6


def explosive(ans: str) -> bool:
    """True when `ans` holds an integer power tower or factorial with more than ~10^6 digits (`9^{9^{9^9}}`,
    `2^{10^{7}}`, `(10^{6})!`). sympy would build that integer in C, where no signal interrupts it; math-verify
    cannot finish either (its verdict is a timeout, i.e. False), so we answer `timeout` without starting it."""
    if _BIG_FACTORIAL_RE.search(ans):
        return True
    for m in _POW_CHAIN_RE.finditer(ans):
        nums = [int(x) for x in re.findall(r"\d+", m.group(0)[:200])]
        log10_v = 0.0                  # log10 of the tower's value, evaluated from the top exponent down
        for i, n in enumerate(reversed(nums)):
            if i == 0:
                log10_v = math.log10(n) if n > 0 else 0.0
                continue
            if n <= 1:
                log10_v = 0.0
                continue
            if log10_v > 300:          # the exponent alone has > 300 digits: the value is astronomically large
                return True
            log10_v = 10 ** log10_v * math.log10(n)
        if log10_v > _EXPLOSIVE_DIGITS:
            return True
    return False


# ---------------------------------------------------------------------------------------------------- worker side
# Everything below runs in the worker processes (spawned: they import this module, never the caller's state).
_GOLD_CACHE: "collections.OrderedDict[str, Any]" = collections.OrderedDict()
_GOLD_CACHE_SIZE = 4096


class _ItemTimeout(BaseException):
    """Raised by the worker's SIGALRM handler; BaseException so math-verify's `except Exception` cannot eat it."""


def _on_alarm(signum, frame):
    raise _ItemTimeout()


def _worker_init(memory_limit_mb: int | None) -> None:
    import logging
    if memory_limit_mb:
        import resource
        lim = memory_limit_mb * 2 ** 20
        try:
            resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
        except (ValueError, OSError):
            pass
    logging.getLogger("math_verify").setLevel(logging.ERROR)  # "timeout disabled" warning: we time out ourselves
    _parse("1")  # import and warm math-verify / latex2sympy before the first timed item


_LATEX_CONFIG: list | None = None


def _parse(ans: str):
    """math-verify's parse of `\\boxed{ans}` with only the LaTeX extractor: its ExprExtractionConfig calls sympy's
    parse_expr on the text, which we never do on model output. Timeouts are ours (see `_worker_chunk`)."""
    global _LATEX_CONFIG
    from math_verify import LatexExtractionConfig, parse
    if _LATEX_CONFIG is None:
        _LATEX_CONFIG = [LatexExtractionConfig()]
    return parse("\\boxed{" + ans + "}", extraction_config=_LATEX_CONFIG, parsing_timeout=None)


_PROBE_POINTS = ((1.1370718, 0.6180339, 2.7182818, 1.4142135), (2.3025850, 1.7320508, 0.5772156, 3.1415926))
_DOMAIN_FLAGS = ("is_integer", "is_rational", "is_irrational", "is_algebraic", "is_transcendental", "is_negative",
                 "is_nonpositive", "is_zero", "is_imaginary")


def _certainly_unequal(g: list, p: list) -> bool:
    """True when math-verify's `verify(g, p)` is certainly False, so its `simplify` (tens of ms per wrong answer)
    can be skipped: both parses are [real-valued expression, string] with different strings, and `gold - pred`
    evaluates (30 digits) to a clearly non-zero real number (> 1e-4 absolute and 1e-6 relative) — for constants
    directly, with free symbols (real, at most 4, no integer/sign assumptions) at one of two fixed probe points, which
    proves the difference is not identically zero. verify's True paths for two such expressions are structural
    equality, 6-decimal rounding, `(a-b).evalf() == 0` and `simplify(a-b) == 0`; none can then hold. Symbols
    (verify's special symbol matching), relations, sets, tuples, matrices, percentages (9% == 9 in verify), sums,
    products, integrals, limits, derivatives, piecewise and anything non-real or non-finite are left to verify. Property-tested against verify in tests/test_grading.py."""
    import sympy
    from sympy.matrices.expressions import MatrixExpr
    if len(g) != 2 or len(p) != 2 or not isinstance(g[1], str) or not isinstance(p[1], str):
        return False
    if g[1].strip() == p[1].strip():
        return False
    a, b = g[0], p[0]
    for e in (a, b):
        # Sums/products/integrals/limits/derivatives/piecewise: their value at a non-integer probe need not match
        # what verify's `doit`/`simplify` make of them, so they are left to verify.
        if (not isinstance(e, sympy.Expr) or isinstance(e, (MatrixExpr, sympy.Symbol))
                or e.has(sympy.UnevaluatedExpr, sympy.Sum, sympy.Product, sympy.Integral, sympy.Limit,
                         sympy.Derivative, sympy.Piecewise)):
            return False
    syms = sorted(a.free_symbols | b.free_symbols, key=str)
    if len(syms) > 4 or any(not isinstance(x, sympy.Symbol) or x.is_real is not True
                            or any(getattr(x, f) for f in _DOMAIN_FLAGS) for x in syms):
        return False
    for point in (_PROBE_POINTS if syms else _PROBE_POINTS[:1]):
        sub = {x: sympy.Float(v, 30) for x, v in zip(syms, point)}
        vals = []
        for e in (a, b):
            try:
                v = complex(sympy.N(e.subs(sub) if sub else e, 30))
            except (TypeError, ValueError, ArithmeticError, AttributeError):
                return False
            if abs(v.imag) > 1e-12 or not math.isfinite(v.real):
                vals = []
                break
            vals.append(v.real)
        if vals:
            diff = abs(vals[0] - vals[1])
            if diff > 1e-4 and diff > 1e-6 * max(abs(vals[0]), abs(vals[1])):
                return True
    return False


def _judge(gold: str, pred: str) -> bool:
    from math_verify import verify
    g = _GOLD_CACHE.get(gold)
    if g is None:
        g = _parse(gold)
        _GOLD_CACHE[gold] = g
        if len(_GOLD_CACHE) > _GOLD_CACHE_SIZE:
            _GOLD_CACHE.popitem(last=False)
    else:
        _GOLD_CACHE.move_to_end(gold)
    p = _parse(pred)
    if _certainly_unequal(g, p):
        return False
    return bool(verify(g, p, timeout_seconds=None))


def _worker_chunk(pairs: list[tuple[str, str]], item_timeout_s: float, budget_s: float) -> list[tuple[str, bool]]:
    """Grade (gold, pred) pairs in order; stop starting new ones after `budget_s` (the caller re-queues the rest).
    Returns (status, correct) per graded pair."""
    import signal
    signal.signal(signal.SIGALRM, _on_alarm)
    start = time.monotonic()
    out: list[tuple[str, bool]] = []
    for gold, pred in pairs:
        if out and time.monotonic() - start > budget_s:
            break
        try:
            try:
                signal.setitimer(signal.ITIMER_REAL, item_timeout_s)
                ok = _judge(gold, pred)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            res = ("correct" if ok else "wrong", ok)
        except _ItemTimeout:
            res = ("timeout", False)
            _clear_sympy_cache()
        except (Exception, RecursionError, MemoryError):  # noqa: BLE001 - a bad sample must not kill the chunk
            res = ("error", False)
        out.append(res)
    return out


def _clear_sympy_cache() -> None:
    """After an interrupted computation, drop sympy's caches (they may hold the huge half-built expression)."""
    try:
        from sympy.core.cache import clear_cache
        clear_cache()
    except Exception:  # noqa: BLE001
        pass


# ---------------------------------------------------------------------------------------------------- parent side
class _Job:
    """One distinct (gold, pred) pair waiting for a worker verdict; every caller asking for it shares `future`."""
    __slots__ = ("key", "future", "solo", "crashes")

    def __init__(self, key: tuple[str, str]):
        self.key = key
        self.future: cf.Future = cf.Future()
        # Heavy jobs (long answers, or re-runs after their chunk failed) go alone and through at most workers - 1
        # workers at a time, so a stream of sympy bombs can never occupy every worker.
        self.solo = len(key[0]) + len(key[1]) > _HEAVY_CHARS
        self.crashes = 0


def _default_workers() -> int:
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:
        n = os.cpu_count() or 1
    return max(1, min(n, 8))


class Grader:
    """Grades final answers against golds with math-verify in a pebble process pool (see module docstring).

    Thread-safe; `grade`/`grade_many`/`equivalent_many` block, `submit` returns a concurrent.futures.Future[Grade]
    (for asyncio: `asyncio.wrap_future`). `timeout_s` is the per-answer limit counted from when the work starts in
    a worker: soft (SIGALRM in the worker) at `timeout_s`, hard (process killed and replaced) at `timeout_s` + 0.5 s.
    """

    def __init__(self, timeout_s: float = 5.0, workers: int | None = None, *, chunk_size: int = 64,
                 memory_limit_mb: int | None = 4096, cache_size: int = 200_000, start_method: str = "spawn",
                 result_timeout_s: float = 600.0):
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        self.timeout_s = float(timeout_s)
        self.workers = int(workers) if workers else _default_workers()
        self.chunk_size = max(1, int(chunk_size))
        self.memory_limit_mb = memory_limit_mb
        self.start_method = start_method
        self.result_timeout_s = result_timeout_s
        self._cache: "collections.OrderedDict[tuple[str, str], bool]" = collections.OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.RLock()
        self._pool = None
        self._pending: collections.deque[_Job] = collections.deque()   # normal jobs, chunked
        self._heavy: collections.deque[_Job] = collections.deque()     # solo jobs, at most workers - 1 at once
        self._heavy_inflight = 0
        self._jobs: dict[tuple[str, str], _Job] = {}  # pending or in flight, by key (shared by equal requests)
        self._live: dict[int, _Job] = {}              # every unanswered job, so close() can answer them all
        self._inflight = 0
        self._closed = False
        self.chunk_failures = 0        # chunks lost to a hard timeout or a dead worker (their items were re-run)
        self._seen_pids: set[int] = set()
        self.counts = collections.Counter()

    # ------------------------------------------------------------------ public API
    def grade(self, gold: Any, response: str | None = None, *, given_answer: str | None = None) -> Grade:
        return self._wait(self.submit(gold, response, given_answer=given_answer))

    def grade_many(self, items: Sequence[tuple[Any, str | None, str | None]]) -> list[Grade]:
        futures = [self.submit(g, r, given_answer=a) for g, r, a in items]
        return [self._wait(f) for f in futures]

    def equivalent_many(self, pairs: Sequence[tuple[str, str]]) -> list[bool]:
        """Answer-vs-answer equivalence (first element plays gold), e.g. to cluster Cons@k votes."""
        futures = [self.submit(a, given_answer=b) for a, b in pairs]
        return [self._wait(f).correct for f in futures]

    def _wait(self, fut: cf.Future) -> Grade:
        """A safety net only (per-answer limits are enforced in the workers): never block a caller for ever."""
        try:
            return fut.result(timeout=self.result_timeout_s)
        except cf.TimeoutError:
            return Grade(False, "error", None, self.result_timeout_s)

    def submit(self, gold: Any, response: str | None = None, *, given_answer: str | None = None) -> cf.Future:
        t0 = time.perf_counter()
        out: cf.Future = cf.Future()
        try:
            gold_s = _to_text(gold)
            if gold_s is not None and ("\\boxed" in gold_s or "\\fbox" in gold_s):
                gold_s = extract_final_answer(gold_s) or gold_s      # golds stored as `\boxed{...}`
            if given_answer is not None:
                extracted = _to_text(given_answer)
            else:
                text = _to_text(response) or ""
                if len(text) > MAX_RESPONSE_CHARS:
                    return self._done(out, "error", None, t0)
                extracted = extract_final_answer(text)
            if extracted is not None:
                extracted = normalize_answer(extracted) or None
            if extracted is None:
                return self._done(out, "no_answer", None, t0)
            gold_n = normalize_answer(gold_s) if gold_s is not None else ""
            if not gold_n or len(gold_n) > MAX_ANSWER_CHARS or len(extracted) > MAX_ANSWER_CHARS:
                return self._done(out, "error", extracted, t0)
            key = (gold_n, extracted)
            verdict = fast_verdict(gold_n, extracted)
            if verdict is None and extracted != gold_n and explosive(extracted):
                return self._done(out, "timeout", extracted, t0)
            if verdict is None:
                with self._lock:
                    verdict = self._cache.get(key)
                    if verdict is not None:
                        self._cache.move_to_end(key)
            if verdict is not None:
                return self._done(out, "correct" if verdict else "wrong", extracted, t0)
            job = self._enqueue(key)
        except Exception:  # noqa: BLE001 - grading never raises into the trainer
            return self._done(out, "error", None, t0)

        def finish(f: cf.Future, extracted=extracted) -> None:
            try:
                status = f.result()
            except Exception:  # noqa: BLE001
                status = "error"
            self._done(out, status, extracted, t0)

        job.future.add_done_callback(finish)
        return out

    def stats(self) -> dict:
        self.worker_pids()
        with self._lock:
            return {"counts": {s: self.counts.get(s, 0) for s in STATUSES}, "worker_restarts": self.worker_restarts,
                    "chunk_failures": self.chunk_failures,
                    "pending": len(self._pending) + len(self._heavy), "inflight_chunks": self._inflight,
                    "cache_entries": len(self._cache),
                    "workers": self.workers, "pool_started": self._pool is not None,
                    "worker_pids": self.worker_pids()}

    def worker_pids(self) -> list[int]:
        """PIDs of the live worker processes (read from pebble's pool manager; [] if unavailable)."""
        try:
            pids = sorted(self._pool._pool_manager.worker_manager.workers)
        except (AttributeError, RuntimeError):
            return []
        self._seen_pids.update(pids)
        return pids

    @property
    def worker_restarts(self) -> int:
        """Worker processes replaced so far (killed after a hard timeout, crashed, OOM, SIGKILLed), counted from the
        distinct worker PIDs seen (sampled on every dispatch and every stats() call)."""
        return max(0, len(self._seen_pids) - self.workers)

    def clear_cache(self) -> None:
        """Forget cached verdicts (benchmarks; a long-running server keeps them)."""
        with self._lock:
            self._cache.clear()

    def start(self, wait_s: float = 120.0) -> "Grader":
        """Start the worker pool now (otherwise the first graded answer starts it) and wait until the workers have
        imported math-verify and graded one answer each (at most `wait_s`)."""
        with self._lock:
            pool = self._ensure_pool()
        futures = [pool.schedule(_worker_chunk, args=([("x+1", "1+x")], self.timeout_s, _CHUNK_BUDGET_S),
                                 timeout=wait_s) for _ in range(self.workers)]
        for f in futures:
            try:
                f.result()
            except Exception:  # noqa: BLE001 - a worker that fails here is replaced; grading itself reports it
                pass
        return self

    def close(self) -> None:
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
            jobs = list(self._live.values())
            self._live.clear()
            self._jobs.clear()
            self._pending.clear()
            self._heavy.clear()
        if pool is not None:
            pool.stop()
            pool.join(timeout=5)
        for job in jobs:
            if not job.future.done():
                job.future.set_result("error")

    def __enter__(self) -> "Grader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ internals
    def _done(self, out: cf.Future, status: str, extracted: str | None, t0: float) -> cf.Future:
        with self._lock:
            self.counts[status] += 1
        out.set_result(Grade(status == "correct", status, extracted, time.perf_counter() - t0))
        return out

    def _ensure_pool(self):
        if self._closed:
            raise RuntimeError("Grader is closed")
        if self._pool is None:
            from pebble import ProcessPool
            self._pool = ProcessPool(max_workers=self.workers, initializer=_worker_init,
                                     initargs=(self.memory_limit_mb,),
                                     context=multiprocessing.get_context(self.start_method))
        return self._pool

    def _enqueue(self, key: tuple[str, str]) -> _Job:
        with self._lock:
            job = self._jobs.get(key) if self._cache_size else None
            if job is None:
                job = _Job(key)
                if self._cache_size:  # cache off (benchmarks): every request is verified on its own
                    self._jobs[key] = job
                self._live[id(job)] = job
                (self._heavy if job.solo else self._pending).append(job)
        self._pump()
        return job

    def _pump(self) -> None:
        """Send queued jobs to the pool, keeping at most workers + 1 chunks in flight: heavy jobs one by one through
        at most max(1, workers - 1) slots, normal jobs in chunks spread over the free workers."""
        while True:
            with self._lock:
                if self._closed or self._inflight >= self.workers + 1:
                    return
                if self._heavy and self._heavy_inflight < max(1, self.workers - 1):
                    chunk, heavy = [self._heavy.popleft()], True
                elif self._pending:
                    # Spread what is queued over the free worker slots, so a burst of 50 uses both workers.
                    size = min(self.chunk_size, -(-len(self._pending) // max(1, self.workers - self._inflight)))
                    chunk, heavy = [self._pending.popleft()], False
                    while self._pending and len(chunk) < size:
                        chunk.append(self._pending.popleft())
                else:
                    return
                self._inflight += 1
                self._heavy_inflight += heavy
                pool = self._pool if self._pool is not None else self._ensure_pool()
            # Schedule outside our lock: pebble's queue has its own, and graders' callers must not wait on it.
            self.worker_pids()                    # notice replaced workers (restart statistics)
            hard = self.timeout_s + _GRACE_S + (_CHUNK_BUDGET_S if len(chunk) > 1 else 0.0)
            try:
                fut = pool.schedule(_worker_chunk, args=([j.key for j in chunk], self.timeout_s, _CHUNK_BUDGET_S),
                                    timeout=hard)
            except Exception as exc:  # noqa: BLE001 - pool unusable: drop it; the chunk fails into the retry path
                fut = cf.Future()
                fut.set_exception(exc)
                with self._lock:
                    if self._pool is pool:
                        self._pool = None
            fut.add_done_callback(lambda f, chunk=chunk, heavy=heavy: self._on_chunk_done(chunk, f, heavy))

    def _on_chunk_done(self, chunk: list[_Job], fut, heavy: bool) -> None:
        from pebble import ProcessExpired
        finished: list[tuple[_Job, str]] = []
        requeue: list[_Job] = []
        try:
            results = fut.result()
            for job, (status, _) in zip(chunk, results):
                finished.append((job, status))
            requeue = chunk[len(results):]          # worker ran out of chunk budget: send the rest again
        except (cf.TimeoutError, ProcessExpired, Exception) as exc:  # noqa: BLE001
            hard_kill = isinstance(exc, (cf.TimeoutError, ProcessExpired))
            with self._lock:
                if hard_kill:
                    self.chunk_failures += 1
            if len(chunk) > 1:
                for job in chunk:
                    job.solo = True
                requeue = chunk
            else:
                job = chunk[0]
                if isinstance(exc, cf.TimeoutError):
                    finished.append((job, "timeout"))
                elif job.crashes < 1:                # a crash may be a neighbour's SIGKILL/OOM: one retry
                    job.crashes += 1
                    requeue = chunk
                else:
                    finished.append((job, "error"))
        with self._lock:
            self._inflight -= 1
            self._heavy_inflight -= heavy
            if self._closed:                      # the pool was stopped under it: answer, never re-queue
                finished += [(job, "error") for job in requeue]
                requeue = []
            for job, status in finished:
                self._live.pop(id(job), None)
                if self._jobs.get(job.key) is job:
                    del self._jobs[job.key]
                if status in ("correct", "wrong") and self._cache_size:
                    self._cache[job.key] = status == "correct"
                    if len(self._cache) > self._cache_size:
                        self._cache.popitem(last=False)
            for job in reversed(requeue):
                (self._heavy if job.solo else self._pending).appendleft(job)
        for job, status in finished:
            if not job.future.done():           # close() may already have answered it
                job.future.set_result(status)
        self._pump()


_SHARED: Grader | None = None
_SHARED_LOCK = threading.Lock()


def get_grader() -> Grader:
    """This process's shared Grader (created on first use; its pool starts with the first graded answer).
    Env: LEAD_RECIPES_GRADE_TIMEOUT_S (default 5), LEAD_RECIPES_GRADE_WORKERS (default: usable CPUs, at most 8)."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None or _SHARED._closed:
            workers = os.environ.get("LEAD_RECIPES_GRADE_WORKERS")
            _SHARED = Grader(timeout_s=float(os.environ.get("LEAD_RECIPES_GRADE_TIMEOUT_S", "5")),
                             workers=int(workers) if workers else None)
            atexit.register(_SHARED.close)
        return _SHARED


def reward_extra_logs(grade: Grade, repetitive: bool) -> dict[str, float]:
    """`extra_logs` for one sample: exactly REWARD_LOG_KEYS, in order, plain floats (status one-hot)."""
    logs = {"correct": 1.0 if grade.correct else 0.0, "repetitive": 1.0 if repetitive else 0.0}
    for s in STATUSES:
        logs[f"status_{s}"] = 1.0 if grade.status == s else 0.0
    logs["grade_latency_s"] = float(grade.latency_s) if grade.latency_s == grade.latency_s else 0.0
    return logs
