"""OpenRLHF reward function that forwards to one or more `lead-recipes serve` servers ($LEAD_RECIPES_REWARD_URLS)
and rides out their restarts: fail-over, backoff within one outage deadline per process, and reward 0 with
`status_error` instead of an exception or None. It does not grade.
See docs/training.md#reward-servers-restarts-do-not-end-the-run.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import os
import random
import threading
import time
import urllib.error
import urllib.request
from typing import Sequence

from lead_recipes.reward.logs import REWARD_LOG_KEYS, error_logs, reward_result

URLS_ENV, WAIT_ENV, TIMEOUT_ENV, TOKEN_ENV = (
    "LEAD_RECIPES_REWARD_URLS",
    "LEAD_RECIPES_REWARD_WAIT_S",
    "LEAD_RECIPES_REWARD_TIMEOUT_S",
    "LEAD_RECIPES_SERVE_TOKEN",
)
BACKOFF_FIRST_S, BACKOFF_MAX_S = 0.5, 30.0
DEFAULT_WAIT_S, DEFAULT_TIMEOUT_S = 600.0, 180.0

PROBE_EVERY_S, PROBE_TIMEOUT_S = 5.0, 30.0  # during a spent outage, one call per 5 s still tries the servers

log = logging.getLogger("lead_recipes.reward.remote_reward")
_rotation = itertools.count()
_rotation_lock = threading.Lock()
# One outage deadline per process: OpenRLHF calls reward_func once per sample (asyncio.to_thread), so a
# per-call budget made every sample of a step wait the full $LEAD_RECIPES_REWARD_WAIT_S during an outage.
_outage = {"deadline": None, "next_probe": 0.0}
_warned: set[str] = set()  # URLs warned about in their current outage
_refused: set[str] = set()  # URLs whose refusal was logged
_sample_errors: set[str] = set()  # reasons of samples graded `error` by a server (`errors`), logged once each
_outage_lock = threading.Lock()


class Retryable(Exception):
    """This server cannot answer now (down, restarting, overloaded): try another, then back off."""


class Refused(Exception):
    """The server answered, but not with rewards (4xx, malformed): retrying would get the same answer."""


def server_urls(environ=None) -> list[str]:
    environ = os.environ if environ is None else environ
    return [u.strip() for u in environ.get(URLS_ENV, "").split(",") if u.strip()]


def _shown(url: str) -> str:
    return url.split("?", 1)[0]  # never log a ?token=


def backoff_delays(first: float = BACKOFF_FIRST_S, cap: float = BACKOFF_MAX_S):
    """0.5, 1, 2, 4, ... capped: the wait after each full round of failed servers (before jitter)."""
    delay = first
    while True:
        yield delay
        delay = min(cap, delay * 2)


def post_once(url: str, payload: bytes, n: int, timeout: float) -> dict:
    """One POST; the parsed response when it holds n finite rewards and the extra_logs keys, else Refused/Retryable."""
    headers = {"Content-Type": "application/json"}
    token = os.environ.get(TOKEN_ENV)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=payload, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # the user's own servers
            body = response.read()
    except urllib.error.HTTPError as exc:
        if exc.code >= 500 or exc.code == 429:
            raise Retryable(f"HTTP {exc.code}") from None
        raise Refused(f"HTTP {exc.code}: {exc.read()[:200].decode('utf-8', 'replace')}") from None
    except (urllib.error.URLError, OSError) as exc:  # refused, reset, DNS, timeout (socket.timeout is an OSError)
        raise Retryable(f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}") from None
    try:
        out = json.loads(body)
        rewards = [float(r) for r in out["rewards"]]
        logs = out.get("extra_logs") or {}
        if len(rewards) != n or not all(math.isfinite(r) for r in rewards) or tuple(logs) != REWARD_LOG_KEYS:
            raise ValueError(f"{len(rewards)} rewards for {n} samples, extra_logs keys {list(logs)}")
        logs = {k: [float(v) for v in logs[k]] for k in REWARD_LOG_KEYS}
        if any(len(v) != n or not all(math.isfinite(x) for x in v) for v in logs.values()):
            raise ValueError("extra_logs lists do not hold n finite values")
    except (ValueError, KeyError, TypeError) as exc:
        raise Refused(f"malformed response: {exc}") from None
    for why in (out.get("errors") or {}).values() if isinstance(out.get("errors"), dict) else ():
        _note_sample_error(url, str(why))
    return {"rewards": rewards, "extra_logs": logs}


def _note_sample_error(url: str, why: str) -> None:
    """Log a sample the server graded `error` with its reason (an ungradable label), once per reason."""
    reason = why.split(": ", 1)[-1]  # without the request's `labels[i]: `
    with _outage_lock:
        if reason in _sample_errors or len(_sample_errors) >= 100:
            return
        _sample_errors.add(reason)
    log.error("reward server %s graded a sample `error`: %s", _shown(url), why)


class OutageFailFast(TimeoutError):
    """The process's outage deadline has passed and no server has answered since: fail at once."""


def _outage_deadline(start: float) -> float:
    """The outage's shared deadline, started at `start` by the first failure."""
    with _outage_lock:
        if _outage["deadline"] is None:
            _outage["deadline"] = start
        return _outage["deadline"]


def _answered(url: str) -> None:
    with _outage_lock:
        _outage["deadline"] = None
        _warned.discard(url)


def _note(url: str, exc: Exception, wait_s: float) -> None:
    """Log a server's failure once per URL (a Retryable per outage, a Refused once)."""
    with _outage_lock:
        seen = _refused if isinstance(exc, Refused) else _warned
        if url in seen:
            return
        seen.add(url)
    if isinstance(exc, Refused):
        log.error("reward server %s refused (%s); trying the others", _shown(url), exc)
    else:
        log.warning(
            "reward server %s did not answer (%s); trying the others, then retrying until the outage has lasted %.0f s",
            _shown(url),
            exc,
            wait_s,
        )


def fetch(
    urls: Sequence[str], payload: bytes, n: int, wait_s: float, timeout: float, sleep=time.sleep, clock=time.monotonic
) -> dict:
    """The first valid response from `urls` (rotating start, fail-over, backoff; module docstring). Raises Refused
    (every server refused), TimeoutError (the outage outlasted `wait_s`) or OutageFailFast, with the last reason."""
    with _rotation_lock:
        start = next(_rotation) % len(urls)
    order = list(urls[start:]) + list(urls[:start])
    with _outage_lock:
        spent = _outage["deadline"] is not None and clock() >= _outage["deadline"]
        if spent and clock() < _outage["next_probe"]:
            raise OutageFailFast(
                f"no reward server has answered since the outage passed {wait_s:.0f} s "
                f"({WAIT_ENV}); failing at once until one does"
            )
        if spent:
            _outage["next_probe"] = clock() + PROBE_EVERY_S
    deadline = clock() + wait_s
    delays = backoff_delays()
    last = "no attempt"
    while True:
        for url in list(order):
            try:
                out = post_once(
                    url,
                    payload,
                    n,
                    min(timeout, PROBE_TIMEOUT_S) if spent else max(1.0, min(timeout, deadline - clock())),
                )
            except Retryable as exc:
                last = f"{_shown(url)}: {exc}"
                deadline = _outage_deadline(clock() + wait_s)
                _note(url, exc, wait_s)
                continue
            except Refused as exc:  # misconfigured server: the others may still grade this sample
                last = f"{_shown(url)}: {exc}"
                order.remove(url)
                _note(url, exc, wait_s)
                continue
            _answered(url)
            return out
        if not order:
            raise Refused(last)
        pause = next(delays) * random.uniform(0.5, 1.0)
        if spent or clock() + pause > deadline:  # a probe of a spent outage makes one round only
            with _outage_lock:  # the outage is spent now for every call: they fail at once until a probe answers
                now = clock()
                if _outage["deadline"] is not None and not spent:  # None: a server answered meanwhile
                    _outage["deadline"] = min(now, _outage["deadline"])
                    _outage["next_probe"] = now + PROBE_EVERY_S
            raise TimeoutError(f"no reward server answered within {wait_s:.0f} s ({WAIT_ENV}); last: {last}")
        sleep(pause)


def _failed(n: int, labels, queries) -> dict:
    """Every sample graded `error`, its L1 target and format flags still taken from its label and query."""
    return reward_result([0.0] * n, {k: [d[k] for d in error_logs(n, labels, queries)] for k in REWARD_LOG_KEYS})


def reward_func(queries, prompts, labels, **kwargs) -> dict:
    """OpenRLHF's reward hook (module docstring). Never raises, never returns None."""
    try:
        n = len(queries)
        urls = server_urls()
        if not urls:
            raise Refused(f"${URLS_ENV} is empty: no reward server to forward to")
        if n == 0:
            return reward_result([], {k: [] for k in REWARD_LOG_KEYS})
        payload = json.dumps(
            {"query": list(queries), "prompts": list(prompts or [""] * n), "labels": list(labels or [None] * n)}
        ).encode()
        out = fetch(
            urls,
            payload,
            n,
            float(os.environ.get(WAIT_ENV, DEFAULT_WAIT_S)),
            float(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT_S)),
        )
        return reward_result(out["rewards"], out["extra_logs"])
    except OutageFailFast:  # logged when the outage's deadline passed, not once per sample
        return _failed(len(queries) if isinstance(queries, (list, tuple)) else 1, labels, queries)
    except Exception as exc:  # noqa: BLE001 - OpenRLHF turns an exception into reward None and a crash later
        log.error("reward: graded as error: %s", exc)
        return _failed(len(queries) if isinstance(queries, (list, tuple)) else 1, labels, queries)
