"""Reward-server load benchmark (not a test). Loopback only, bounded loops, every process started here is stopped.
1. load: 8,192 single-sample requests at concurrency 256 against `lead-recipes serve` and the anchor, a
   constant-reward aiohttp server (the HTTP ceiling), same run, same client and corpus;
2. soak: 20,000 requests at concurrency 512, 5% hostile samples, one grader worker SIGKILLed mid-run.
Corpus, hostile samples, client modes and runs: docs/benchmarks.md#reward-server.

    .venv/bin/python benchmarks/bench_server.py [--load.requests 8192] [--load.concurrency 256]
        [--soak.requests 20000] [--soak.concurrency 512] [--soak.timeout_s 2] [--client.mode pooled]"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
TEMPLATE = (
    "<|im_start|>user\n{problem}\nPlease reason step by step, and put your final answer within \\boxed{{}}."
    "<|im_end|>\n<|im_start|>assistant\n<think>\n"
)


# ------------------------------------------------------------------------------------------------ corpus
def _variant(ans: str) -> str:
    if ans.lstrip("-").isdigit():
        return ans + ".0"
    if "\\frac" in ans:
        return ans.replace("\\frac", "\\dfrac")
    return " " + ans.replace(",", ", ") + " "


def build_corpus(n_prompts: int, per_prompt: int, seed: int = 0) -> list[tuple[bytes, float]]:
    """(request body, expected reward) per request, prompts grouped as OpenRLHF sends them."""
    rng = random.Random(seed)
    rows = [json.loads(line) for line in (SHARED / "train" / "math_full.jsonl").open()]
    rows = [r for r in rows if r["answer"] and len(r["answer"]) < 60]
    probs = rng.sample(rows, n_prompts)
    filler_pool = [r["solution"] for r in rows[:3000]]
    out = []
    for r in probs:
        prompt = TEMPLATE.format(problem=r["problem"])
        for _ in range(per_prompt):
            n_chars = rng.randint(1000, 4000) * 4  # ~4 characters per token
            parts, size = [], 0
            while size < n_chars:
                s = rng.choice(filler_pool)
                parts.append(s)
                size += len(s) + 2
            think = "\n\n".join(parts)[:n_chars]
            u = rng.random()
            if u < 0.55:
                ans, exp = r["answer"], 1.0
            elif u < 0.70:
                ans, exp = _variant(r["answer"]), 1.0
            else:
                ans, exp = rng.choice(rows)["answer"], None  # wrong unless it happens to be equivalent
            resp = f"{think}\n</think>\n\n{r['solution'][:600]}\n\nThe final answer is $\\boxed{{{ans}}}$.<|im_end|>"
            body = {"query": [prompt + resp], "prompts": [prompt], "labels": [r["answer"]]}
            out.append((json.dumps(body).encode(), exp if exp is not None else (1.0 if ans == r["answer"] else 0.0)))
    return out


def hostile_body(i: int, rng: random.Random) -> bytes:
    k = i % 10
    if k == 0:
        q = f"\\boxed{{{rng.randint(2, 9)}^{{{rng.randint(2, 9)}^{{{rng.randint(2, 9)}^{{{rng.randint(50, 99)}}}}}}}}}"
    elif k == 1:  # a 300-400-term sum inside a tuple: no shortcut applies, sympy runs into the timeout
        q = "\\boxed{(1, " + "+".join(f"x^{{{j}}}" for j in range(rng.randint(300, 400))) + ")}"
        return json.dumps({"query": [q], "prompts": [""], "labels": ["(1, x)"]}).encode()
    elif k == 2:
        q = "think " * 170_000 + "\\boxed{1}"
    elif k == 3:
        return b'{"query": ["\xff\xfe\xfd junk \\\\boxed{1}"], "prompts": [""], "labels": ["1"]}'
    elif k == 4:
        q = "\\boxed{" + "{" * 50_000 + "1" + "}" * 50_000 + "}"
    elif k == 5:
        q = "\\boxed{__import__('os').system('touch /tmp/lead_recipes_bench_pwned')}"
    elif k == 6:
        return json.dumps({"query": ["\\boxed{1}"], "prompts": [""], "labels": [None]}).encode()
    elif k == 7:
        return json.dumps({"query": [12345], "prompts": [None], "labels": [{"a": 1}]}).encode()
    elif k == 8:
        q = "(lambda: __import__('os').system('touch /tmp/lead_recipes_bench_pwned'))() no box"
    else:
        q = "\\boxed{" + "\\frac{1}{" * 300 + "2" + "}" * 300 + "}"
    return json.dumps({"query": [q], "prompts": [""], "labels": ["1"]}).encode()


# ------------------------------------------------------------------------------------------------ client process
async def _client(url: str, bodies: list[bytes], concurrency: int, mode: str, progress_path: str | None) -> dict:
    import aiohttp

    lat = [None] * len(bodies)
    codes = [None] * len(bodies)
    rewards = [None] * len(bodies)
    errors: list[str] = []
    next_i = 0
    done = 0
    timeout = aiohttp.ClientTimeout(total=180)
    hdr = {"Content-Type": "application/json"}
    shared = (
        aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=concurrency))
        if mode == "pooled"
        else None
    )

    async def post(session, i):
        t = time.perf_counter()
        async with session.post(url, data=bodies[i], headers=hdr) as r:
            body = await r.read()
            lat[i] = time.perf_counter() - t
            codes[i] = r.status
            if r.status == 200:
                rewards[i] = json.loads(body)["rewards"][0]

    async def worker():
        nonlocal next_i, done
        while next_i < len(bodies):
            i = next_i
            next_i += 1
            try:
                if shared is not None:
                    await post(shared, i)
                else:
                    async with aiohttp.ClientSession(timeout=timeout) as s:
                        await post(s, i)
            except Exception as e:  # noqa: BLE001 - a lost request, counted
                errors.append(f"{type(e).__name__}: {e}"[:200])
            done += 1
            if progress_path and done % 500 == 0:
                Path(progress_path).write_text(str(done))

    t0 = time.perf_counter()
    await asyncio.gather(*[worker() for _ in range(concurrency)])
    wall = time.perf_counter() - t0
    if shared is not None:
        await shared.close()
    return {"wall_s": wall, "lat": lat, "codes": codes, "rewards": rewards, "errors": errors}


def client_main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    bodies = [b.encode("latin-1") for b in json.loads(Path(spec["bodies"]).read_text())]
    res = asyncio.run(_client(spec["url"], bodies, spec["concurrency"], spec["mode"], spec.get("progress")))
    Path(spec["out"]).write_text(json.dumps(res))
    return 0


# ------------------------------------------------------------------------------------------------ servers
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def anchor_server_main(port: int) -> int:
    from aiohttp import web

    async def handler(request):
        d = await request.json()
        n = len(d["query"])
        return web.json_response({"rewards": [1.0] * n, "scores": [1.0] * n, "extra_logs": {"dummy_scores": [1.0] * n}})

    app = web.Application(client_max_size=16 * 2**20)
    app.router.add_post("/get_reward", handler)
    app.router.add_get("/health", lambda r: web.json_response({"status": "ok"}))
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)
    return 0


def start_server(cmd: list[str], port: int) -> subprocess.Popen:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {cmd}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("server not healthy")


def stop(proc: subprocess.Popen) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        return -9


def rss_tree_mb(pid: int) -> float:
    pids = [pid] + [
        int(x)
        for x in subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout.split()
    ]
    total = 0
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def run_client(
    url: str, bodies: list[bytes], concurrency: int, mode: str, tmp: Path, progress: Path | None = None
) -> subprocess.Popen:
    (tmp / "bodies.json").write_text(json.dumps([b.decode("latin-1") for b in bodies]))
    spec = {
        "url": url,
        "bodies": str(tmp / "bodies.json"),
        "concurrency": concurrency,
        "mode": mode,
        "out": str(tmp / "client_out.json"),
        "progress": str(progress) if progress else None,
    }
    (tmp / "spec.json").write_text(json.dumps(spec))
    return subprocess.Popen([sys.executable, __file__, "--client", str(tmp / "spec.json")], cwd=ROOT)


def summarize(res: dict, expected: list[float] | None = None) -> dict:
    lat = sorted(x for x in res["lat"] if x is not None)
    codes = res["codes"]
    n = len(codes)
    q = lambda p: lat[min(len(lat) - 1, int(p * (len(lat) - 1)))] * 1000 if lat else float("nan")  # noqa: E731
    out = {
        "n": n,
        "wall_s": res["wall_s"],
        "req_s": n / res["wall_s"],
        "p50_ms": q(0.5),
        "p90_ms": q(0.9),
        "p99_ms": q(0.99),
        "lost": sum(c is None for c in codes),
        "non2xx": sum(c is not None and c != 200 for c in codes),
        "client_errors": res["errors"][:3],
    }
    if expected is not None:
        out["reward_mismatch"] = sum(r is not None and r != e for r, e in zip(res["rewards"], expected))
    return out


# ------------------------------------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--load.requests", dest="load_requests", type=int, default=8192)
    ap.add_argument("--load.concurrency", dest="load_concurrency", type=int, default=256)
    ap.add_argument(
        "--load.warmup_requests",
        dest="warmup_requests",
        type=int,
        default=1024,
        help="untimed requests on other prompts before the measured run",
    )
    ap.add_argument("--soak.requests", dest="soak_requests", type=int, default=20000)
    ap.add_argument("--soak.concurrency", dest="soak_concurrency", type=int, default=512)
    ap.add_argument("--soak.timeout_s", dest="soak_timeout", type=float, default=2.0)
    ap.add_argument("--soak.enable", dest="soak_enable", type=int, choices=(0, 1), default=1)
    ap.add_argument("--client.mode", dest="mode", choices=("pooled", "openrlhf"), default="pooled")
    ap.add_argument("--grade.workers", dest="workers", type=int, default=2)
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="bench_server_"))
    py = sys.executable
    n_warm = args.warmup_requests // 8
    corpus = build_corpus(args.load_requests // 8 + n_warm, 8)
    warm = [b for b, _ in corpus[: n_warm * 8]]  # other prompts than the measured ones
    corpus = corpus[n_warm * 8 :]
    bodies = [b for b, _ in corpus]
    expected = [e for _, e in corpus]
    avg_chars = statistics.mean(len(json.loads(b)["query"][0]) for b in bodies[:512])
    print(
        f"# corpus: {len(bodies)} requests, mean query {avg_chars:,.0f} chars; client mode {args.mode}; "
        f"machine: {os.cpu_count()} CPUs, shared with other jobs",
        file=sys.stderr,
        flush=True,
    )
    rows = []

    # 1) anchor: constant-reward server, same client and corpus
    port = _free_port()
    srv = start_server([py, __file__, "--anchor-server", str(port)], port)
    cl = run_client(f"http://127.0.0.1:{port}/get_reward", bodies, args.load_concurrency, args.mode, tmp)
    cl.wait()
    stop(srv)
    a = summarize(json.loads((tmp / "client_out.json").read_text()))
    rows.append(("load", "anchor: constant-reward aiohttp server", a))
    print(f"# anchor {a}", file=sys.stderr, flush=True)

    # 2) ours under load
    port = _free_port()
    srv = start_server(
        [py, "-m", "lead_recipes.cli", "serve", "--serve.port", str(port), "--grade.workers", str(args.workers)], port
    )
    if warm:  # untimed: math-verify's parser (antlr) builds its prediction tables lazily, per worker process
        run_client(f"http://127.0.0.1:{port}/get_reward", warm, 64, "pooled", tmp).wait()
    cl = run_client(f"http://127.0.0.1:{port}/get_reward", bodies, args.load_concurrency, args.mode, tmp)
    peak = 0.0
    while cl.poll() is None:
        peak = max(peak, rss_tree_mb(srv.pid))
        time.sleep(0.25)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=10) as r:
        st = json.loads(r.read())
    rc = stop(srv)
    o = summarize(json.loads((tmp / "client_out.json").read_text()), expected)
    o.update(peak_rss_mb=peak, exit_code=rc, statuses=st["samples_by_status"])
    rows.append(("load", "lead-recipes serve", o))
    print(f"# ours {o}", file=sys.stderr, flush=True)

    # 3) soak with hostile samples and a SIGKILLed worker
    if args.soak_enable:
        rng = random.Random(1)
        soak = []
        for i in range(args.soak_requests):
            soak.append(hostile_body(i, rng) if rng.random() < 0.05 else bodies[i % len(bodies)])
        marker = Path("/tmp/lead_recipes_bench_pwned")
        marker.unlink(missing_ok=True)
        port = _free_port()
        srv = start_server(
            [
                py,
                "-m",
                "lead_recipes.cli",
                "serve",
                "--serve.port",
                str(port),
                "--grade.workers",
                str(args.workers),
                "--grade.timeout_s",
                str(args.soak_timeout),
            ],
            port,
        )
        prog = tmp / "progress"
        prog.write_text("0")
        cl = run_client(f"http://127.0.0.1:{port}/get_reward", soak, args.soak_concurrency, args.mode, tmp, prog)
        peak, killed = 0.0, None
        while cl.poll() is None:
            peak = max(peak, rss_tree_mb(srv.pid))
            if killed is None and int(prog.read_text() or 0) >= 0.4 * args.soak_requests:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=30) as r:
                    pids = json.loads(r.read())["grader"]["worker_pids"]
                if pids:
                    killed = pids[0]
                    os.kill(killed, signal.SIGKILL)
            time.sleep(0.25)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=30) as r:
            st = json.loads(r.read())
        rc = stop(srv)
        s = summarize(json.loads((tmp / "client_out.json").read_text()))
        s.update(
            peak_rss_mb=peak,
            exit_code=rc,
            killed_worker=killed,
            worker_restarts=st["worker_restarts"],
            statuses=st["samples_by_status"],
            payload_executed=marker.exists(),
        )
        rows.append(("soak", "lead-recipes serve", s))
        print(f"# soak {s}", file=sys.stderr, flush=True)

    print(
        "\n| run | server | requests | concurrency | req/s | p50 ms | p90 ms | p99 ms | lost | non-2xx | peak RSS MB |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for run, name, r in rows:
        conc = args.soak_concurrency if run == "soak" else args.load_concurrency
        print(
            f"| {run} | {name} | {r['n']:,} | {conc} | {r['req_s']:,.0f} | {r['p50_ms']:.1f} | {r['p90_ms']:.1f} | "
            f"{r['p99_ms']:.1f} | {r['lost']} | {r['non2xx']} | {r.get('peak_rss_mb', float('nan')):,.0f} |"
        )
    for run, name, r in rows:
        extra = {
            k: r[k]
            for k in (
                "reward_mismatch",
                "statuses",
                "killed_worker",
                "worker_restarts",
                "payload_executed",
                "exit_code",
                "client_errors",
            )
            if k in r
        }
        print(f"- {run} / {name}: {json.dumps(extra)}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--client":
        sys.exit(client_main(sys.argv[2]))
    if len(sys.argv) == 3 and sys.argv[1] == "--anchor-server":
        sys.exit(anchor_server_main(int(sys.argv[2])))
    sys.exit(main())
