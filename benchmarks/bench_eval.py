"""Benchmark: scoring-only evaluation (replay backend) of 32 samples × all 1,275 benchmark problems vs naive serial
math-verify, in the same run. Not collected by pytest. Ours = the whole `python -m evaluation.cli --eval.backend
replay` CLI in a subprocess, process start to exit, on synthetic R1-style responses against the real golds.
Workload, anchor and runs: docs/benchmarks.md#evaluation-scoring.
Usage: .venv/bin/python benchmarks/bench_eval.py [--samples 32] [--reps 3] [--naive-subset 600]"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lead_recipes.benchmarks import BENCHMARKS

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "benchmarks"
FILLER = [
    "Let me reconsider the constraints. If we substitute x = 3 into the second equation we get 2x + y = 11, so y = 5.",
    "Wait, that does not look right. Let me recompute the discriminant: b^2 - 4ac = 49 - 40 = 9, so the roots are "
    "real.",
    "So the sum telescopes: \\sum_{k=1}^{n} \\left(\\frac{1}{k} - \\frac{1}{k+1}\\right) = 1 - \\frac{1}{n+1}.",
    "Hmm, maybe I should check small cases first. For n = 1, 2, 3 the values are 1, 3, 7, which suggests 2^n - 1.",
    "By the triangle inequality |a + b| \\le |a| + |b|, with equality when a and b point the same way.",
    "Alternatively, use coordinates: place A at the origin and B at (6, 0); then C lies on the circle x^2 + y^2 = 25.",
    "Let me double-check this step, since an arithmetic slip here would change everything downstream.",
    "The intermediate value is \\boxed{12} for this sub-case, but we still need the other case.",
]


def equivalent_form(gold: str) -> str:
    if gold.lstrip("-").isdigit():
        return f"{gold}.0"
    if "\\frac" in gold:
        return gold.replace("\\frac", "\\dfrac")
    return f"${gold}$"


def wrong_form(gold: str, rng: random.Random) -> str:
    if gold.lstrip("-").isdigit():
        return str(int(gold) + rng.choice((-2, -1, 1, 3, 10)))
    return rng.choice((f"{gold}+1", "2", "\\frac{1}{7}", "\\sqrt{3}"))


def synth_response(gold: str, rng: random.Random, cap_tokens: int) -> dict:
    n_par = rng.randint(12, 160)  # ~2k–24k characters of thinking
    think = "\n\n".join(rng.choice(FILLER) for _ in range(n_par))
    r = rng.random()
    if r < 0.05:  # truncated mid-thinking
        text = "<think>\n" + think
        return {"response": text, "num_tokens": cap_tokens, "truncated": True}
    if r < 0.10:
        final = "So the answer is the value computed above."  # no boxed final answer
    elif r < 0.55:
        final = f"Therefore, the final answer is: $\\boxed{{{gold}}}$. I hope it is correct"
    elif r < 0.70:
        final = f"Therefore, the final answer is: $\\boxed{{{equivalent_form(gold)}}}$."
    else:
        final = f"Therefore, the final answer is: $\\boxed{{{wrong_form(gold, rng)}}}$."
    text = f"<think>\n{think}\n</think>\n\nSummary of the solution.\n\n{final}"
    return {"response": text, "num_tokens": min(cap_tokens, len(text) // 3), "truncated": False}


def make_workload(work: Path, samples: int, cap: int) -> tuple[Path, list[tuple[str, str]], int]:
    rng = random.Random(0)
    pairs = []
    with open(work / "replay.jsonl", "w") as fh:
        for name in BENCHMARKS:
            for line in (DATA / f"{name}.jsonl").open():
                p = json.loads(line)
                for s in range(samples):
                    row = synth_response(p["answer"], rng, cap)
                    pairs.append((p["answer"], row["response"]))
                    fh.write(json.dumps({"benchmark": name, "id": p["id"], "sample": s, **row}) + "\n")
    return work / "replay.jsonl", pairs, (work / "replay.jsonl").stat().st_size


def run_ours(replay: Path, out: Path, samples: int, cap: int) -> tuple[float, float]:
    """(wall s, CPU s of the CLI process and its grader workers) for one full CLI run."""
    cmd = [
        sys.executable,
        "-m",
        "evaluation.cli",
        "--eval.backend",
        "replay",
        "--replay.path",
        str(replay),
        "--data.benchmarks_dir",
        str(DATA),
        "--sampling.n",
        str(samples),
        "--sampling.max_new_tokens",
        str(cap),
        "--eval.preset",
        "grpo-lead-14b",
        "--output",
        str(out),
        "--no-eval.progress_enable",
    ]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        raise SystemExit(f"ours failed:\n{res.stderr[-3000:]}")
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def run_naive(pairs: list[tuple[str, str]]) -> tuple[float, float]:
    """(wall s, CPU s) of serial parse+verify in this process."""
    from math_verify import parse, verify

    t0, c0 = time.perf_counter(), time.process_time()
    for gold, resp in pairs:
        verify(parse(gold), parse(resp))
    return time.perf_counter() - t0, time.process_time() - c0


def main() -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False)
    ap.add_argument("--samples", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--naive-subset", type=int, default=600)
    ap.add_argument("--max-new-tokens", type=int, default=14000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_eval_") as tmp:
        work = Path(tmp)
        t0 = time.perf_counter()
        replay, pairs, size = make_workload(work, args.samples, args.max_new_tokens)
        n = len(pairs)
        mean_chars = sum(len(r) for _, r in pairs) / n
        print(
            f"workload: {n} responses ({size / 1e6:.0f} MB JSONL, mean {mean_chars:.0f} chars), "
            f"built in {time.perf_counter() - t0:.1f} s"
        )
        load0 = os.getloadavg()[0]
        ours = [run_ours(replay, work / f"run{i}", args.samples, args.max_new_tokens) for i in range(args.reps)]
        summary = json.loads((work / "run0" / "summary.json").read_text())
        rng = random.Random(1)
        subset = rng.sample(pairs, min(args.naive_subset, n))
        scale = n / len(subset)
        naive = [tuple(x * scale for x in run_naive(subset)) for _ in range(args.reps)]
        load1 = os.getloadavg()[0]
    med = {}
    for name, runs in (("ours", ours), ("naive", naive)):
        med[name] = statistics.median(w for w, _ in runs)
        med[name + "_cpu"] = statistics.median(c for _, c in runs)
    print()
    print(
        f"| scorer ({n} responses, {args.samples}/problem, 1,275 problems) | median wall s | wall per run | "
        "median CPU s | wall ratio |"
    )
    print("|---|---|---|---|---|")
    print(
        f"| ours: `lead-recipes eval --eval.backend replay` (full CLI: grade + avg@n, pass@k, Cons@1..32, report, "
        f"plots) | {med['ours']:.1f} | {', '.join(f'{w:.1f}' for w, _ in ours)} | {med['ours_cpu']:.1f} | 1.0 |"
    )
    print(
        f"| naive serial math-verify parse+verify (timed on {len(subset)} responses, extrapolated ×{scale:.0f}) | "
        f"{med['naive']:.1f} | {', '.join(f'{w:.1f}' for w, _ in naive)} | {med['naive_cpu']:.1f} | "
        f"{med['naive'] / med['ours']:.1f}× slower |"
    )
    print()
    avg = summary["average"]
    print(
        f"ours: average accuracy {100 * avg['accuracy']:.1f}%, per benchmark "
        + ", ".join(
            f"{k} {100 * v['accuracy']:.1f}% (cons@32 {100 * v['cons_at_k']['32']:.1f}%)"
            for k, v in summary["benchmarks"].items()
        )
    )
    print(
        f"target ≤ 60 s for ours: {'met' if med['ours'] <= 60 else 'NOT met'}; machine: 2 cores shared with "
        f"other jobs, load average {load0:.1f} at start, {load1:.1f} at end (noisy)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
