"""Benchmark: data-parallel vLLM engines (evaluation/vllm_dp.py) against one engine (the anchor, same run), on the
tiny offline Qwen2 of tests/support/tiny_model.py: start-up, generation time and identical samples. Not collected by
pytest.

What it measures and checks: docs/benchmarks.md#evaluation-two-data-parallel-vllm-engines-against-one-2026-12-01-stale.
Usage: .venv/bin/python benchmarks/bench_eval_dp.py [--engines 2] [--requests 64] [--max-new 64]
       [--max-num-seqs 16] [--reps 3]"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def _requests(n: int, tokenizer):
    from evaluation.backends import GenRequest
    from evaluation.protocols import render_prompt, resolve

    gen = resolve("sober", max_new_tokens=ARGS.max_new)
    reqs = []
    for i in range(n):
        prompt = render_prompt(gen, f"What is {i} + {i + 1}?", tokenizer)
        reqs.append(GenRequest("toy", str(i // 4), i % 4, prompt, (), gen.seed + i % 4))
    return gen, reqs


def _time(backend, gen, reqs, reps: int):
    outs, times = None, []
    for _ in range(reps):
        rows: list[dict] = []
        t0 = time.monotonic()
        backend.generate(reqs, gen, rows.extend)
        times.append(time.monotonic() - t0)
        outs = sorted((r["id"], r["sample"], r["response"]) for r in rows)
    return statistics.median(times), outs


def main() -> None:
    from support.tiny_model import make_tiny_qwen2

    from evaluation.backends import VLLMBackend, load_tokenizer
    from evaluation.vllm_dp import DataParallelVLLM

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    model = str(make_tiny_qwen2(Path(tempfile.mkdtemp(prefix="bench-dp-")) / "tiny"))
    gen, reqs = _requests(ARGS.requests, load_tokenizer(model))
    engine = dict(dtype="float32", enforce_eager=True, max_model_len=2048, seed=0, max_num_seqs=ARGS.max_num_seqs)
    load = os.getloadavg()
    t0 = time.monotonic()
    one = VLLMBackend(model, **engine)
    _ = one.llm
    start_one = time.monotonic() - t0
    gen_one, out_one = _time(one, gen, reqs, ARGS.reps)
    one.close()
    dp = DataParallelVLLM(model, ARGS.engines, gpus=None, **engine)
    try:
        t0 = time.monotonic()
        dp.start()
        start_dp = time.monotonic() - t0
        gen_dp, out_dp = _time(dp, gen, reqs, ARGS.reps)
    finally:
        dp.close()
    print(
        f"{ARGS.requests} requests x {ARGS.max_new} new tokens, max_num_seqs {ARGS.max_num_seqs}, "
        f"{os.cpu_count()} CPUs, "
        f"load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, end {os.getloadavg()[0]:.2f}"
    )
    print("| engines | start-up s | generation s (median) | generation ratio to 1 engine | same samples |")
    print("|---|---|---|---|---|")
    print(f"| 1 (anchor) | {start_one:.1f} | {gen_one:.2f} | 1.00 | — |")
    print(f"| {ARGS.engines} | {start_dp:.1f} | {gen_dp:.2f} | {gen_dp / gen_one:.2f} | {out_dp == out_one} |")


if __name__ == "__main__":
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--engines", type=int, default=2)
    p.add_argument("--requests", type=int, default=64)
    p.add_argument("--max-new", type=int, default=64)
    p.add_argument("--max-num-seqs", type=int, default=16)
    p.add_argument("--reps", type=int, default=3)
    ARGS = p.parse_args()
    main()
