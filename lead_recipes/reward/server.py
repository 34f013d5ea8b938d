"""`lead-recipes serve`: the remote reward server, speaking OpenRLHF's remote-RM protocol (`POST /get_reward`,
`GET /health`, `GET /stats`). A malformed request gets a 4xx naming what is wrong; a bad sample (an ungradable label
too) gets reward 0 and its status, never a 4xx/5xx; concurrency is bounded; an optional shared token; SIGTERM
finishes in-flight requests and exits 0. It holds no state between requests except statistics.
See docs/grading.md#lead-recipes-serve-remote-reward-server.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import errno
import hmac
import json
import logging
import os
import socket
import sys
import time
from typing import Any

from aiohttp import web

from lead_recipes.grading.labels import gold_answer, label_problem
from lead_recipes.grading.options import add_options, grader_kwargs
from lead_recipes.grading.pool.grader import STATUSES, Grade, Grader
from lead_recipes.help_format import ArgumentParser
from lead_recipes.reward.logs import REWARD_LOG_KEYS, reward_extra_logs
from lead_recipes.reward.request import RequestError, format_texts, parse_request, sample_texts
from lead_recipes.reward.reward_func import safe_is_repetitive

log = logging.getLogger("lead_recipes.reward.server")
TOKEN_ENV = "LEAD_RECIPES_SERVE_TOKEN"


def _error(status: int, message: str, **headers: str) -> web.Response:
    return web.json_response({"error": message}, status=status, headers=headers or None)


def _percentile(sorted_vals: list[float], q: float) -> float:
    if not sorted_vals:
        return 0.0
    i = min(len(sorted_vals) - 1, max(0, round(q * (len(sorted_vals) - 1))))
    return sorted_vals[i]


class RewardServer:
    """State of one server: the grader, limits, statistics. `app()` builds the aiohttp application."""

    def __init__(
        self,
        grader: Grader,
        *,
        token: str | None = None,
        max_concurrency: int = 512,
        max_queue: int = 8192,
        max_samples: int = 4096,
        job_id: str | None = None,
    ):
        self.grader = grader
        self.job_id = job_id or None
        self.token = token or None
        self.max_queue = max_queue
        self.max_samples = max_samples
        self.sem = asyncio.Semaphore(max_concurrency)
        self.ready = False
        self.started = time.time()
        self.requests = collections.Counter()  # by HTTP status code
        self.samples = collections.Counter()  # by grade status
        self.latencies: collections.deque[float] = collections.deque(maxlen=100_000)
        self.waiting = 0
        self.inflight = 0
        self.label_errors, self.last_label_error, self.logged_label_errors = 0, None, set()

    # -------------------------------------------------------------- app
    def app(self, max_request_bytes: int) -> web.Application:
        self.max_request_bytes = max_request_bytes
        app = web.Application(client_max_size=max_request_bytes, middlewares=[self._middleware])
        app.router.add_post("/get_reward", self.get_reward)
        app.router.add_get("/health", self.health)
        app.router.add_get("/stats", self.stats)
        app.on_startup.append(self._on_startup)
        app.on_cleanup.append(self._on_cleanup)
        return app

    async def _on_startup(self, app: web.Application) -> None:
        asyncio.get_running_loop().create_task(self._warm_up())

    async def _warm_up(self) -> None:
        g = await asyncio.to_thread(self.grader.start().grade, "x+1", given_answer="1+x")  # reaches a worker
        self.ready = g.status == "correct"
        if not self.ready:
            log.error("grader warm-up failed: %s", g)

    async def _on_cleanup(self, app: web.Application) -> None:
        await asyncio.to_thread(self.grader.close)

    @web.middleware
    async def _middleware(self, request: web.Request, handler):
        t0 = time.perf_counter()
        resp: web.StreamResponse | None = None
        try:
            if self.token and request.path != "/health":
                # OpenRLHF's client cannot send headers, so `?token=T` in --reward.remote_url works too.
                got = request.headers.get("Authorization", "")
                want = f"Bearer {self.token}".encode()
                if not (
                    hmac.compare_digest(got.encode(), want)
                    or hmac.compare_digest(request.query.get("token", "").encode(), self.token.encode())
                ):
                    resp = _error(
                        401,
                        "missing or wrong token (send `Authorization: Bearer <token>`, or put "
                        "`?token=<token>` in the URL)",
                    )
                    return resp
            try:
                resp = await handler(request)
            except web.HTTPException as e:  # 404/405/413 from aiohttp itself: same JSON error shape
                resp = _error(e.status, e.reason or "error")
            except Exception as e:  # last resort; graded samples never get here
                log.exception("internal error")
                resp = _error(500, f"internal error: {type(e).__name__}")
            return resp
        finally:
            if request.path == "/get_reward":
                self.requests[resp.status if resp is not None else 499] += 1
                self.latencies.append(time.perf_counter() - t0)

    # -------------------------------------------------------------- routes
    async def health(self, request: web.Request) -> web.Response:
        body = {
            "status": "ok" if self.ready else "starting",
            "workers": self.grader.workers,
            "timeout_s": self.grader.timeout_s,
            "extraction": self.grader.extraction,
            "rel_tol": self.grader.rel_tol,
            "problem_precision": self.grader.problem_precision,
        }
        if self.job_id:  # which batch job owns this server: a job polling its port must not accept another's
            body["job_id"] = self.job_id
        return web.json_response(body, status=200 if self.ready else 503)

    async def stats(self, request: web.Request) -> web.Response:
        lat = sorted(self.latencies)
        g = self.grader.stats()
        return web.json_response(
            {
                "uptime_s": time.time() - self.started,
                "requests": sum(self.requests.values()),
                "responses_by_code": {str(k): v for k, v in sorted(self.requests.items())},
                "samples_by_status": {s: self.samples.get(s, 0) for s in STATUSES},
                "latency_s": {
                    "p50": _percentile(lat, 0.5),
                    "p90": _percentile(lat, 0.9),
                    "p99": _percentile(lat, 0.99),
                    "window": len(lat),
                },
                "label_errors": self.label_errors,  # samples graded `error` for an ungradable label
                "last_label_error": self.last_label_error,
                "worker_restarts": g["worker_restarts"],
                "inflight": self.inflight,
                "queued": self.waiting,
                "grader": g,
            }
        )

    async def get_reward(self, request: web.Request) -> web.Response:
        # A form or text body (curl -d without a header) is a client mistake, told as such; no header at all is
        # taken as JSON, as OpenRLHF's and our clients always send one.
        if "Content-Type" in request.headers and request.content_type != "application/json":
            return _error(
                415,
                f"Content-Type must be application/json, got {request.content_type!r} "
                "(curl: -H 'Content-Type: application/json')",
            )
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _error(413, f"request body over {self.max_request_bytes} bytes (--serve.max_request_mb)")
        try:
            body = json.loads(raw.decode("utf-8", "replace"))  # invalid UTF-8 → U+FFFD: the sample is still graded
        except (json.JSONDecodeError, RecursionError) as e:
            return _error(400, f"body is not valid JSON: {e}")
        try:
            req = parse_request(body)
        except RequestError as e:
            return _error(422, str(e))
        n = len(req.responses if req.responses is not None else req.query)
        if n > self.max_samples:
            return _error(413, f"{n} samples in one request; the limit is {self.max_samples} (--serve.max_samples)")
        if self.waiting >= self.max_queue:
            return _error(503, "server overloaded, retry", **{"Retry-After": "1"})
        self.waiting += 1
        try:
            await self.sem.acquire()
        finally:
            self.waiting -= 1
        self.inflight += 1
        # an ungradable label is its sample's `error` (the grading guard counts it), named in `errors` and the log:
        # OpenRLHF's client retries any non-2xx response 5 times and then drops the sample's reward
        problems = {i: label_problem(x) for i, x in enumerate(req.labels or [])}
        problems = {i: why for i, why in problems.items() if why}
        for why in problems.values():
            self._label_error(why)
        errors = {str(i): f"labels[{i}]: {why}" for i, why in problems.items()}
        try:
            rewards, logs = await self._grade(
                sample_texts(req), format_texts(req), req.prompts, req.labels or [], skip=set(problems)
            )
        finally:
            self.inflight -= 1
            self.sem.release()
        return web.json_response(
            {
                "rewards": rewards,
                "scores": list(rewards),
                "extra_logs": {k: [d[k] for d in logs] for k in REWARD_LOG_KEYS},
                "errors": errors,
            }
        )

    def _label_error(self, why: str) -> None:
        """Count it for GET /stats; log each distinct reason once (a dataset repeats the same mistake)."""
        self.label_errors, self.last_label_error = self.label_errors + 1, why
        if why not in self.logged_label_errors and len(self.logged_label_errors) < 100:
            self.logged_label_errors.add(why)
            log.error("ungradable label, graded `error`: %s", why)

    async def _grade(
        self, texts: list[str], queries: list[str], prompts: list[str] | None, labels: list[Any], skip: set[int]
    ) -> tuple[list[float], list[dict[str, float]]]:
        """Grade the response texts (`queries`: what the format flags read); the samples in `skip` (ungradable
        labels) are graded `error` without a grader call; a valid label's L1 target is echoed."""
        n = len(texts)
        prompts = prompts or [""] * n
        graded = [i for i in range(n) if i not in skip]
        futures = [
            asyncio.wait_for(
                asyncio.wrap_future(self.grader.submit(gold_answer(labels[i]), texts[i], problem=prompts[i])),
                self.grader.result_timeout_s,
            )
            for i in graded
        ]
        grades = [Grade(False, "error", None, 0.0)] * n
        for i, r in zip(graded, await asyncio.gather(*futures, return_exceptions=True)):
            grades[i] = r if isinstance(r, Grade) else Grade(False, "error", None, 0.0)
        logs = []
        for g, t, label, query in zip(grades, texts, labels, queries):
            self.samples[g.status] += 1
            logs.append(reward_extra_logs(g, safe_is_repetitive(t), label, query, t))
        return [1.0 if g.correct else 0.0 for g in grades], logs


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="lead-recipes serve", description="the remote reward server (OpenRLHF's remote-RM protocol)"
    )
    s = p.add_argument_group("serve")
    s.add_argument(
        "--serve.host",
        dest="serve.host",
        default="127.0.0.1",
        help="bind address (default 127.0.0.1; 0.0.0.0 for a cluster)",
    )
    s.add_argument("--serve.port", dest="serve.port", type=int, default=5000, help="TCP port (0: any free one)")
    s.add_argument(
        "--serve.token",
        dest="serve.token",
        default=None,
        help=f"shared token (default: env {TOKEN_ENV}; none = no auth)",
    )
    s.add_argument(
        "--serve.max_concurrency",
        dest="serve.max_concurrency",
        type=int,
        default=512,
        help="requests graded at once; more wait",
    )
    s.add_argument(
        "--serve.max_queue",
        dest="serve.max_queue",
        type=int,
        default=8192,
        help="requests allowed to wait; beyond this 503 + Retry-After",
    )
    s.add_argument(
        "--serve.max_request_mb",
        dest="serve.max_request_mb",
        type=float,
        default=16.0,
        help="request body limit in MiB (413 above)",
    )
    s.add_argument(
        "--serve.max_samples", dest="serve.max_samples", type=int, default=4096, help="samples per request (413 above)"
    )
    s.add_argument(
        "--serve.shutdown_timeout_s",
        dest="serve.shutdown_timeout_s",
        type=float,
        default=30.0,
        help="on SIGTERM/SIGINT, how long in-flight requests may take to finish",
    )
    s.add_argument(
        "--serve.job_id",
        dest="serve.job_id",
        default=None,
        help="batch job this server belongs to, reported by GET /health (slurm/train.sbatch sets it; default: none)",
    )
    add_options(
        p.add_argument_group("grade"),
        ("timeout_s", "workers", "extraction", "rel_tol", "problem_precision_enable"),
    )
    return p


LOOPBACK = {"127.0.0.1", "::1", "localhost"}


def _listen(host: str, port: int) -> list[socket.socket]:
    """Bound sockets for every address of `host` (as asyncio's create_server binds them), so that a port in use is
    known before the grader pool starts and the ready line is printed only for a port this server holds."""
    socks: list[socket.socket] = []
    try:
        for family, kind, proto, _, addr in socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        ):
            if any(s.family == family and s.getsockname()[:2] == addr[:2] for s in socks):
                continue
            sock = socket.socket(family, kind, proto)
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(addr)
    except OSError:
        for sock in socks:
            sock.close()
        raise
    return socks


def remote_url_flag(host: str, port: int, token: str | None, token_from_env: bool) -> str:
    """The flag to hand OpenRLHF (or `lead-recipes train`) for this server. A wildcard host becomes this machine's
    name; a token from the environment is shown as the variable, so the server's log never holds the secret."""
    if host in ("0.0.0.0", "::", ""):
        host = socket.gethostname()
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port}/get_reward"
    if token:
        url += f"?token=${TOKEN_ENV}" if token_from_env else f"?token={token}"
    return f"--reward.remote_url {url}"


def exposure_warning(host: str, token: str | None) -> str | None:
    """One line when the server listens beyond loopback with no token: anyone who reaches the port may use it."""
    if token or host in LOOPBACK:
        return None
    return (
        f"lead-recipes serve: warning: listening on {host} without a token; anyone who can reach this port can "
        f"use the grader (set --serve.token or ${TOKEN_ENV})"
    )


def main(argv: list[str]) -> int:
    args = vars(build_parser().parse_args(argv))
    host, port = args["serve.host"], args["serve.port"]
    token = args["serve.token"] or os.environ.get(TOKEN_ENV) or None
    warning = exposure_warning(host, token)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    try:
        socks = _listen(host, port)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            why = f"port {port} is already in use on {host}; pick another with --serve.port (or stop what holds it)"
        else:
            why = f"cannot listen on {host}:{port}: {e.strerror or e} (check --serve.host and --serve.port)"
        print(f"lead-recipes serve: {why}", file=sys.stderr, flush=True)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    grader = Grader(**grader_kwargs(args))

    async def make_app() -> web.Application:
        server = RewardServer(
            grader,
            token=token,
            max_concurrency=args["serve.max_concurrency"],
            max_queue=args["serve.max_queue"],
            max_samples=args["serve.max_samples"],
            job_id=args["serve.job_id"],
        )
        return server.app(int(args["serve.max_request_mb"] * 2**20))

    flag = remote_url_flag(host, socks[0].getsockname()[1], token, token_from_env=not args["serve.token"])
    ready = (
        f"lead-recipes serve: ready (auth {'on' if token else 'off'}; extraction {grader.extraction}; "
        f"GET /health, /stats); for OpenRLHF or lead-recipes train: {flag}"
    )
    # run_app calls `print` once its sites listen (the ready line never precedes the port), and turns SIGTERM/SIGINT
    # into a graceful stop: close the listener, wait for in-flight handlers up to shutdown_timeout, run on_cleanup
    # (closes the grader pool), return normally → exit 0.
    web.run_app(
        make_app(),
        sock=socks,
        print=lambda _banner: print(ready, flush=True),
        access_log=None,
        shutdown_timeout=args["serve.shutdown_timeout_s"],
        handle_signals=True,
    )
    print("lead-recipes serve: stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
