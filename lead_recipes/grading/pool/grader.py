"""Math answer grading: the public API (`Grader`, `Grade`, `get_grader`, `STATUSES`) and the parent side of
the worker pool: extraction, form rewrites and exact paths in this process, math-verify 0.9.0 in a lazily created
spawn pool with hard timeouts, re-runs of a dead worker's items and a heavy lane. No math-verify or sympy in this
process; model text never reaches `eval`, `sympify` or `parse_expr`. See docs/grading.md#how-an-answer-is-graded.
"""

from __future__ import annotations

import atexit
import collections
import concurrent.futures as cf
import multiprocessing
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Sequence

from lead_recipes.grading.equivalence.compare import prepare
from lead_recipes.grading.equivalence.precision import Precision, stated_precision
from lead_recipes.grading.extraction.answers import (
    MAX_ANSWER_CHARS,
    check_extraction,
    explosive,
    extract_final_answer,
    normalize_answer,
    to_text,
)
from lead_recipes.grading.extraction.pairing import gold_text
from lead_recipes.grading.options import OPTIONS, grader_kwargs_from_env
from lead_recipes.grading.pool.worker import worker_chunk, worker_init

STATUSES = ("correct", "wrong", "no_answer", "timeout", "error")

MAX_RESPONSE_CHARS = 8_000_000  # larger responses are graded `error` without being searched
_GRACE_S = 0.5  # hard timeout = soft timeout + this
_CHUNK_BUDGET_S = 0.05  # a worker stops starting new items of a chunk after this long
_HEAVY_CHARS = 256  # gold + answer longer than this: graded alone, in the heavy lane


@dataclass(frozen=True)
class Grade:
    correct: bool
    status: str
    extracted: str | None
    latency_s: float


# ---------------------------------------------------------------------------------------------------- parent side
class _Job:
    """One distinct (gold, pred, precision) item waiting for a worker verdict; every caller asking for it shares
    `future`."""

    __slots__ = ("key", "future", "solo", "crashes")

    def __init__(self, key: tuple[str, str, Precision]):
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
    `extraction` is the default policy for responses (`boxed` or `final_answer`); `grade`, `grade_many` and
    `submit` take `extraction=` to override it per call. `rel_tol` is the relative precision within which a decimal
    approximates a value whose expansion does not end (`\\frac13`, `\\pi`) besides the digits it writes, when the
    problem states none; `problem=` (per call, or the 4th element of a `grade_many` item) is the problem text, whose
    stated precision ("to the nearest hundredth") then applies unless `problem_precision=False`
    (`lead_recipes.grading.equivalence.precision`), and whose echo after an answer ends the response.
    """

    def __init__(
        self,
        timeout_s: float = OPTIONS["timeout_s"].default,
        workers: int | None = OPTIONS["workers"].default,
        *,
        chunk_size: int = 64,
        memory_limit_mb: int | None = 4096,
        cache_size: int = 200_000,
        result_timeout_s: float = 600.0,
        extraction: str = OPTIONS["extraction"].default,
        rel_tol: float = OPTIONS["rel_tol"].default,
        problem_precision: bool = OPTIONS["problem_precision_enable"].default,
    ):
        OPTIONS["timeout_s"].check(timeout_s)
        OPTIONS["rel_tol"].check(rel_tol)
        if workers is not None:  # None: the default, usable CPUs (at most 8)
            OPTIONS["workers"].check(workers)
        self.rel_tol = float(rel_tol)
        self.problem_precision = bool(problem_precision)
        self.extraction = check_extraction(extraction)
        self.timeout_s = float(timeout_s)
        self.workers = _default_workers() if workers is None else int(workers)
        self.chunk_size = max(1, int(chunk_size))
        self.memory_limit_mb = memory_limit_mb
        self.result_timeout_s = result_timeout_s
        self._cache: "collections.OrderedDict[tuple[str, str, Precision], bool]" = collections.OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.RLock()
        self._pool = None
        self._pending: collections.deque[_Job] = collections.deque()  # normal jobs, chunked
        self._heavy: collections.deque[_Job] = collections.deque()  # solo jobs, at most workers - 1 at once
        self._heavy_inflight = 0
        self._jobs: dict[tuple[str, str, Precision], _Job] = {}  # pending or in flight, by key (shared)
        self._live: dict[int, _Job] = {}  # every unanswered job, so close() can answer them all
        self._inflight = 0
        self._closed = False
        self.chunk_failures = 0  # chunks lost to a hard timeout or a dead worker (their items were re-run)
        self._seen_pids: set[int] = set()
        self.counts = collections.Counter()

    # ------------------------------------------------------------------ public API
    def grade(
        self,
        gold: Any,
        response: str | None = None,
        *,
        given_answer: str | None = None,
        extraction: str | None = None,
        problem: str | None = None,
    ) -> Grade:
        return self._wait(
            self.submit(gold, response, given_answer=given_answer, extraction=extraction, problem=problem)
        )

    def grade_many(self, items: Sequence[tuple], *, extraction: str | None = None) -> list[Grade]:
        """Items are (gold, response, given_answer) or (gold, response, given_answer, problem)."""
        futures = [
            self.submit(g, r, given_answer=a, extraction=extraction, problem=rest[0] if rest else None)
            for g, r, a, *rest in items
        ]
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

    def submit(
        self,
        gold: Any,
        response: str | None = None,
        *,
        given_answer: str | None = None,
        extraction: str | None = None,
        problem: str | None = None,
    ) -> cf.Future:
        policy = self.extraction if extraction is None else check_extraction(extraction)  # bad name: ValueError
        t0 = time.perf_counter()
        out: cf.Future = cf.Future()
        try:
            gold_s = to_text(gold)
            if gold_s is not None and ("\\boxed" in gold_s or "\\fbox" in gold_s):
                gold_s = gold_text(gold_s)  # golds stored as `\boxed{...}`, several boxes joined
            if given_answer is not None:
                extracted = to_text(given_answer)
            else:
                text = to_text(response) or ""
                if len(text) > MAX_RESPONSE_CHARS:
                    return self._done(out, "error", None, t0)
                extracted = extract_final_answer(text, policy, gold_s, to_text(problem))
            if extracted is not None:
                extracted = normalize_answer(extracted) or None
            if extracted is None:
                return self._done(out, "no_answer", None, t0)
            gold_n = normalize_answer(gold_s) if gold_s is not None else ""
            if not gold_n or len(gold_n) > MAX_ANSWER_CHARS or len(extracted) > MAX_ANSWER_CHARS:
                return self._done(out, "error", extracted, t0)
            # `10 weeks` vs `10`, `1 1/2`, `T(4)=9, T(5)=2` vs `9, 2`, `0.3333` vs `\frac13`, integers, ...
            stated = stated_precision(to_text(problem)) if self.problem_precision else None
            precision = stated or ("rel", self.rel_tol)
            pair, verdict = prepare(gold_n, extracted, precision)
            key = (*pair, precision)
            if verdict is None and key[1] != key[0] and explosive(key[1]):
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
            return {
                "counts": {s: self.counts.get(s, 0) for s in STATUSES},
                "worker_restarts": self.worker_restarts,
                "chunk_failures": self.chunk_failures,
                "pending": len(self._pending) + len(self._heavy),
                "inflight_chunks": self._inflight,
                "cache_entries": len(self._cache),
                "workers": self.workers,
                "pool_started": self._pool is not None,
                "worker_pids": self.worker_pids(),
            }

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
        futures = [
            pool.schedule(
                worker_chunk,
                args=([("x+1", "1+x", ("rel", self.rel_tol))], self.timeout_s, _CHUNK_BUDGET_S),
                timeout=wait_s,
            )
            for _ in range(self.workers)
        ]
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

            self._pool = ProcessPool(
                max_workers=self.workers,
                initializer=worker_init,
                initargs=(self.memory_limit_mb,),
                context=multiprocessing.get_context("spawn"),  # a fork of a threaded parent can deadlock
            )
        return self._pool

    def _enqueue(self, key: tuple[str, str, Precision]) -> _Job:
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
            self.worker_pids()  # notice replaced workers (restart statistics)
            hard = self.timeout_s + _GRACE_S + (_CHUNK_BUDGET_S if len(chunk) > 1 else 0.0)
            try:
                fut = pool.schedule(
                    worker_chunk, args=([j.key for j in chunk], self.timeout_s, _CHUNK_BUDGET_S), timeout=hard
                )
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
            requeue = chunk[len(results) :]  # worker ran out of chunk budget: send the rest again
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
                elif job.crashes < 1:  # a crash may be a neighbour's SIGKILL/OOM: one retry
                    job.crashes += 1
                    requeue = chunk
                else:
                    finished.append((job, "error"))
        with self._lock:
            self._inflight -= 1
            self._heavy_inflight -= heavy
            if self._closed:  # the pool was stopped under it: answer, never re-queue
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
            if not job.future.done():  # close() may already have answered it
                job.future.set_result(status)
        self._pump()


_SHARED: Grader | None = None
_SHARED_LOCK = threading.Lock()


def get_grader() -> Grader:
    """This process's shared Grader (created on first use; its pool starts with the first graded answer), set by
    the environment variables of `lead_recipes.grading.options.OPTIONS` (LEAD_RECIPES_GRADE_TIMEOUT_S, _WORKERS,
    _REL_TOL, _PROBLEM_PRECISION (`1` or `0`), LEAD_RECIPES_EXTRACTION): unset or blank, the option's default; a
    bad value is a ValueError naming the variable."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None or _SHARED._closed:
            _SHARED = Grader(**grader_kwargs_from_env())
            atexit.register(_SHARED.close)
        return _SHARED
