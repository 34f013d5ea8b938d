"""Benchmark: continuous evaluation generation (VLLMBackend's request-level loop, every finished sample fsync'd as it
finishes) against the anchor (one `LLM.generate` over all requests, nothing written) and chunked generation
(512-request chunks), same run and engine; plus a GPU-like occupancy model and the OpenAI backend. Not collected
by pytest.

Workload, model, run time: docs/benchmarks.md#evaluation-generation-continuous-against-chunks.
Usage: .venv/bin/python benchmarks/bench_eval_continuous.py [--requests 4096] [--max-num-seqs 256]
       [--median 32] [--sigma 0.8] [--cap 384] [--reps 3] [--concurrency 64] [--openai-requests 1024]
       [--skip-openai] [--skip-vllm]"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))
ROLLOUTS = ROOT.parent / "shared" / "data" / "rollouts" / "qwen25math_cot_math100x8.jsonl"
CHUNK = 512  # requests per chunk of the chunked path
PRESETS = {
    "sober": (
        {
            "aime2024": (30, 10),
            "aime2025": (30, 10),
            "amc2023": (40, 10),
            "math500": (500, 3),
            "olympiadbench": (675, 3),
        },
        32768,
    ),
    "grpo-lead-14b": ({"aime2024": (30, 32), "aime2025": (30, 32)}, 14336),
}


def lognormal_lengths(n: int, median: float, sigma: float, cap: int, seed: int = 0) -> list[int]:
    rng = random.Random(seed)
    return [max(1, min(cap, round(math.exp(math.log(median) + sigma * rng.gauss(0, 1))))) for _ in range(n)]


# ---------------------------------------------------------------------------------------------- occupancy model
def steps(lengths: list[int], slots: int) -> int:
    """Decode steps to run `lengths` in order on `slots` sequence slots, each request taking the first free one."""
    free = [0] * min(slots, len(lengths))
    end = 0
    for n in lengths:
        t = heapq.heappop(free) + n
        end = max(end, t)
        heapq.heappush(free, t)
    return end


def occupancy(lengths: list[int], slots: int, chunk: int | None) -> tuple[int, float]:
    """(steps, mean occupied fraction of the slots) for continuous (chunk None) or chunked scheduling."""
    parts = [lengths] if chunk is None else [lengths[i : i + chunk] for i in range(0, len(lengths), chunk)]
    total = sum(steps(p, slots) for p in parts)
    return total, sum(lengths) / (total * slots)


def rollout_lengths() -> list[int]:
    """Response lengths of the shared rollouts in characters (the file has no token counts; scale does not change
    the model's ratios, only where the cap falls, and these stay far under it)."""
    return [s["n_chars"] for line in ROLLOUTS.open() for s in json.loads(line)["samples"]]


def preset_lengths(preset: str, dist: str, seed: int = 0) -> list[int]:
    """Lengths of the preset's requests in the runner's order (benchmark, problem, sample)."""
    sets, cap = PRESETS[preset]
    rng = random.Random(seed)
    emp = rollout_lengths()
    logs = [math.log(x) for x in emp]
    mu, sd = statistics.fmean(logs), statistics.pstdev(logs)
    out = []
    for problems, n in sets.values():
        for _ in range(problems * n):
            if dist == "rollouts":
                out.append(min(cap, rng.choice(emp)))
            elif dist == "rollouts-lognormal":
                out.append(min(cap, max(1, round(math.exp(rng.gauss(mu, sd))))))
            else:  # reasoning-like: median cap/8, sigma 0.8, clipped at the cap
                out.append(min(cap, max(1, round(math.exp(math.log(cap / 8) + 0.8 * rng.gauss(0, 1))))))
    return out


def model_table(measured: list[int], slots: int) -> list[str]:
    logs = [math.log(x) for x in rollout_lengths()]
    lines = [
        f"Occupancy model, flat step cost, max_num_seqs {slots}, chunks of {CHUNK} (rollout log-normal fit: "
        f"mu {statistics.fmean(logs):.2f}, sigma {statistics.pstdev(logs):.2f} in ln chars)",
        "",
        "| workload | requests | continuous occupancy | chunked occupancy | predicted chunked / continuous time |",
        "|---|---|---|---|---|",
    ]
    cases = [("this run's CPU workload", measured)]
    for preset in PRESETS:
        for dist, label in (
            ("rollouts", "shared rollouts' lengths"),
            ("rollouts-lognormal", "log-normal fit"),
            ("reasoning", "reasoning-like: median cap/8, sigma 0.8, capped"),
        ):
            cases.append((f"{preset}, {label}", preset_lengths(preset, dist)))
    for label, lengths in cases:
        s_cont, o_cont = occupancy(lengths, slots, None)
        s_chunk, o_chunk = occupancy(lengths, slots, CHUNK)
        lines.append(f"| {label} | {len(lengths)} | {o_cont:.3f} | {o_chunk:.3f} | {s_chunk / s_cont:.2f}× |")
    # vLLM's own default on H100/H200-class GPUs is 1024: a whole 512-chunk then runs as one batch
    for label, lengths in cases[1:]:
        s_cont, o_cont = occupancy(lengths, 1024, None)
        s_chunk, o_chunk = occupancy(lengths, 1024, CHUNK)
        lines.append(
            f"| {label}, max_num_seqs 1024 | {len(lengths)} | {o_cont:.3f} | {o_chunk:.3f} | {s_chunk / s_cont:.2f}× |"
        )
    return lines


# -------------------------------------------------------------------------------------------------- vLLM paths
def vllm_part(args) -> tuple[list[str], list[int]]:
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "4")
    from support.tiny_model import make_tiny_qwen2
    from vllm import LLM

    from evaluation import run
    from evaluation.backends import VLLMBackend, sample_row
    from evaluation.protocols import resolve
    from lead_recipes.benchmarks import Problem

    lengths = lognormal_lengths(args.requests, args.median, args.sigma, args.cap, seed=1)
    work = Path(tempfile.mkdtemp(prefix="bench-cont-"))
    model = str(make_tiny_qwen2(work / "tiny"))
    llm = LLM(
        model=model,
        dtype="float32",
        enforce_eager=True,
        max_model_len=2048,
        seed=0,
        max_num_seqs=args.max_num_seqs,
        gpu_memory_utilization=0.3,
        enable_chunked_prefill=False,
    )
    gen = resolve("sober", n=1, max_new_tokens=args.cap)
    benchmarks = {
        "toy": [Problem("toy", str(i), f"What is {i} + {i + 1}?", str(2 * i + 1)) for i in range(args.requests)]
    }
    forced = {str(i): n for i, n in enumerate(lengths)}

    class Forced(VLLMBackend):
        """The backend with each request's length forced (max_tokens = L_i, EOS ignored)."""

        def sampling_params(self, req, gen):
            p = super().sampling_params(req, gen)
            p.max_tokens, p.ignore_eos = forced[req.id], True
            return p

    class Chunked(Forced):
        """The chunked path: LLM.generate on chunks of 512, each finished chunk to the sink."""

        def generate(self, requests, gen, sink):
            for start in range(0, len(requests), CHUNK):
                chunk = requests[start : start + CHUNK]
                outs = self.llm.generate(
                    [self._prompt(r.prompt, gen) for r in chunk],
                    [self.sampling_params(r, gen) for r in chunk],
                    use_tqdm=False,
                )
                sink(
                    [
                        sample_row(
                            r,
                            o.outputs[0].text,
                            len(o.outputs[0].token_ids),
                            o.outputs[0].finish_reason,
                            o.outputs[0].finish_reason == "length",
                        )
                        for r, o in zip(chunk, outs)
                    ]
                )

    class NoGrade:
        def score_rows(self, rows):
            return rows

    engine = llm.llm_engine
    counter = {"steps": 0}
    step = engine.step

    def counted_step():
        counter["steps"] += 1
        return step()

    engine.step = counted_step
    new, chunked = Forced(model, llm=llm), Chunked(model, llm=llm)
    tok = new.tokenizer
    requests = run._build_requests(gen, benchmarks, set(), new, tok)

    def anchor_pass():
        outs = llm.generate(
            [new._prompt(r.prompt, gen) for r in requests],
            [new.sampling_params(r, gen) for r in requests],
            use_tqdm=False,
        )
        return sum(len(o.outputs[0].token_ids) for o in outs)

    def runner_pass(backend, tag):
        out = work / f"{tag}-{time.monotonic_ns()}"
        out.mkdir()
        rows = run.generate_missing(gen, benchmarks, backend, out, NoGrade(), tok, progress=False)
        assert len(rows) == args.requests
        return sum(r["num_tokens"] for r in rows)

    paths = {
        "anchor: one LLM.generate over all requests (no writes)": anchor_pass,
        f"former: LLM.generate on chunks of {CHUNK}, a chunk written when done": lambda: runner_pass(chunked, "c"),
        "new: continuous, each sample written (fsync) as it finishes": lambda: runner_pass(new, "n"),
    }
    names = list(paths)
    warm = requests[:64]
    llm.generate(
        [new._prompt(r.prompt, gen) for r in warm], [new.sampling_params(r, gen) for r in warm], use_tqdm=False
    )
    results = {k: [] for k in names}
    load_start = os.getloadavg()
    for rep in range(args.reps):
        for k in names[rep % 3 :] + names[: rep % 3]:  # rotate the order between passes
            counter["steps"] = 0
            t0 = time.monotonic()
            tokens = paths[k]()
            wall = time.monotonic() - t0
            results[k].append((tokens / wall, wall, tokens / max(1, counter["steps"]), tokens))
            print(
                f"  pass {rep} {k.split(':')[0]}: {wall:.1f} s, {tokens} tokens, mean batch "
                f"{tokens / max(1, counter['steps']):.0f}",
                flush=True,
            )
    load_end = os.getloadavg()
    anchor_tps = statistics.median(r[0] for r in results[names[0]])
    lines = [
        f"{args.requests} requests, lengths log-normal (median {args.median}, sigma {args.sigma}, cap "
        f"{args.cap}; mean {statistics.fmean(lengths):.1f}, max {max(lengths)}), max_num_seqs "
        f"{args.max_num_seqs}, window {new.window}, {args.reps} passes; {os.cpu_count()} CPUs, load average "
        f"at start {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f}, at end {load_end[0]:.2f} "
        f"{load_end[1]:.2f} {load_end[2]:.2f}",
        "",
        "| path | tokens/s (median) | wall s (median) | mean running batch | ratio to anchor (median) | "
        "ratio per pass |",
        "|---|---|---|---|---|---|",
    ]
    anchor_by_pass = [r[0] for r in results[names[0]]]
    for k in names:
        rs = results[k]
        per = [r[0] / a for r, a in zip(rs, anchor_by_pass)]
        lines.append(
            f"| {k} | {statistics.median(r[0] for r in rs):.0f} | {statistics.median(r[1] for r in rs):.1f} "
            f"| {statistics.median(r[2] for r in rs):.0f} | "
            f"{statistics.median(r[0] for r in rs) / anchor_tps:.3f} | {', '.join(f'{x:.3f}' for x in per)} |"
        )
    return lines, lengths


# ------------------------------------------------------------------------------------------------ OpenAI part
def serve(delays_seed: int, median_s: float, sigma: float) -> None:
    """The stand-in server: answers /v1/completions after a log-normal delay drawn from the request's seed."""
    import asyncio

    from aiohttp import web

    async def handle(request):
        body = await request.json()
        rng = random.Random(delays_seed * 1_000_003 + int(body["seed"]))
        await asyncio.sleep(math.exp(math.log(median_s) + sigma * rng.gauss(0, 1)))
        return web.json_response(
            {"choices": [{"text": "So \\boxed{1}.", "finish_reason": "stop"}], "usage": {"completion_tokens": 5}}
        )

    async def main():
        app = web.Application()
        app.router.add_post("/v1/completions", handle)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        print(site._server.sockets[0].getsockname()[1], flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


def openai_part(args) -> list[str]:
    from evaluation import run
    from evaluation.backends import OpenAIBackend
    from evaluation.protocols import resolve
    from lead_recipes.benchmarks import Problem

    n, conc, median_s, sigma = args.openai_requests, args.concurrency, args.openai_median_s, args.sigma
    srv = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(median_s), "--sigma", str(sigma)], stdout=subprocess.PIPE, text=True
    )
    try:
        port = int(srv.stdout.readline())
        # request i carries seed i (one problem per request, sample 0, run seed i offset): same delays as served
        delays = [math.exp(math.log(median_s) + sigma * random.Random(0 * 1_000_003 + i).gauss(0, 1)) for i in range(n)]
        ideal = steps_float(delays, conc)
        walls = []

        class NoGrade:
            def score_rows(self, rows):
                return rows

        for rep in range(args.reps):
            gen = resolve("sober", n=1, max_new_tokens=64, chat_template_enable=False)
            benchmarks = {"toy": [Problem("toy", str(i), f"What is {i}?", "1") for i in range(n)]}
            backend = OpenAIBackend(f"http://127.0.0.1:{port}", "stand-in", endpoint="completions", concurrency=conc)
            out = Path(tempfile.mkdtemp(prefix="bench-openai-"))
            reqs = run._build_requests(gen, benchmarks, set(), backend, None)
            reqs = [r.__class__(r.benchmark, r.id, r.sample, r.prompt, r.messages, int(r.id)) for r in reqs]
            planned = {"wanted": {(r.benchmark, r.id, r.sample) for r in reqs}, "requests": reqs}
            t0 = time.monotonic()
            run.generate_missing(gen, benchmarks, backend, out, NoGrade(), None, progress=False, planned=planned)
            walls.append(time.monotonic() - t0)
            print(f"  openai pass {rep}: {walls[-1]:.2f} s (ideal {ideal:.2f} s)", flush=True)
    finally:
        srv.kill()
        srv.wait()
    wall = statistics.median(walls)
    return [
        f"OpenAI backend against the stand-in server: {n} requests, delays log-normal (median {median_s} s, "
        f"sigma {sigma}), concurrency {conc}, {args.reps} passes, load average {os.getloadavg()[0]:.2f}",
        "",
        "| path | wall s (median) | wall per pass | ideal s (list-scheduled delays at the concurrency) | "
        "ideal / wall |",
        "|---|---|---|---|---|",
        f"| `--eval.backend openai`, each sample written as it finishes | {wall:.2f} | "
        f"{', '.join(f'{w:.2f}' for w in walls)} | {ideal:.2f} | {ideal / wall:.3f} |",
    ]


def steps_float(durations: list[float], slots: int) -> float:
    free = [0.0] * min(slots, len(durations))
    end = 0.0
    for d in durations:
        t = heapq.heappop(free) + d
        end = max(end, t)
        heapq.heappush(free, t)
    return end


def main() -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=4096)
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--median", type=float, default=32)
    p.add_argument("--sigma", type=float, default=0.8)
    p.add_argument("--cap", type=int, default=384)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--openai-requests", type=int, default=1024)
    p.add_argument("--openai-median-s", type=float, default=0.05)
    p.add_argument("--skip-openai", action="store_true")
    p.add_argument("--skip-vllm", action="store_true")
    p.add_argument("--serve", type=float, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve is not None:
        serve(0, args.serve, args.sigma)
        return 0
    out: list[str] = []
    lengths = lognormal_lengths(args.requests, args.median, args.sigma, args.cap, seed=1)
    if not args.skip_vllm:
        lines, lengths = vllm_part(args)
        out += lines + [""]
    out += model_table(lengths, args.max_num_seqs) + [""]
    if not args.skip_openai:
        out += openai_part(args)
    print("\n" + "\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
