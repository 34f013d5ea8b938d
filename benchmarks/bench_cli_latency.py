"""Wall time and noise of `lead-recipes train` on the way to an answer (not a test): a misspelt OpenRLHF flag, a
misspelt --recipe flag, `--help`, `--run.dry_run_enable` and a preflight failure (`--preflight.only_enable` on this
GPU-less machine), each run as a fresh process, for the checkout BEFORE (default: the parent of the commit that added
this script, extracted with `git archive`) and this checkout AFTER, interleaved in the same run. Prints medians,
the ratio and the lines that are not lead-recipes' own (third-party noise) per case.

    .venv/bin/python benchmarks/bench_cli_latency.py [--repeats 3] [--before REF]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROG = "lead-recipes train"
CASES = {  # name -> (argv after `train`, how the first stdout line of the answer itself starts)
    "misspelt OpenRLHF flag": (["--actor.model_name_or_pat", "X"], None),
    "misspelt --recipe flag": (["--recipe.lead.alph", "1"], None),
    "--help": (["--help"], "usage:"),
    "--run.dry_run_enable": (["--run.dry_run_enable"], "# resolved command"),
    "preflight failure": (["--preflight.only_enable"], ("[     ok]", "[MISSING]")),
}


def default_before() -> str:
    added = subprocess.run(
        ["git", "log", "--diff-filter=A", "--format=%H", "--", "benchmarks/bench_cli_latency.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return f"{added[-1]}^" if added else "HEAD"


def noise(out: str, err: str, answer: str | tuple[str, ...] | None) -> list[str]:
    """Lines that are not ours: stderr lines other than `lead-recipes train…` and their indented continuations,
    and stdout lines before the answer's first line."""
    lines, ours = [], False
    for line in err.splitlines():
        ours = line.startswith(PROG) or (ours and line.startswith(" "))
        if not ours and line.strip():
            lines.append(line)
    if answer is not None:
        for line in out.splitlines():
            if line.startswith(answer):
                break
            if line.strip():
                lines.append(line)
    return lines


def run_once(tree: Path, case: str, cwd: Path) -> tuple[float, int, list[str]]:
    argv, answer = CASES[case]
    env = dict(os.environ, PYTHONPATH=str(tree), CUDA_VISIBLE_DEVICES="", HF_HUB_OFFLINE="1")
    env.pop("RAY_ADDRESS", None)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "lead_recipes.cli", "train", *argv], cwd=cwd, env=env, capture_output=True, text=True
    )
    return time.perf_counter() - t0, proc.returncode, noise(proc.stdout, proc.stderr, answer)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--before", default=None, help="git ref of the BEFORE checkout (default: see above)")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    args = ap.parse_args()
    before_ref = args.before or default_before()
    cases = [c.strip() for c in args.cases.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        before, cwd = Path(tmp) / "before", Path(tmp) / "cwd"
        before.mkdir()
        cwd.mkdir()
        archive = subprocess.run(["git", "archive", before_ref], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(before)], input=archive, check=True)
        sides = {"before": before, "after": ROOT}
        print(f"before = {before_ref}, after = {ROOT} (working tree); {args.repeats} repeats; cwd {cwd} (empty)")
        print(f"load average at start: {os.getloadavg()}, cpus: {os.cpu_count()}")
        results: dict[tuple[str, str], list] = {}
        for _ in range(args.repeats):
            for case in cases:
                for side, tree in sides.items():  # interleaved: load drifts hit both sides alike
                    results.setdefault((case, side), []).append(run_once(tree, case, cwd))
    print(f"load average at end: {os.getloadavg()}")
    print()
    head = ["case", "before s (median)", "after s (median)", "after/before", "exit before/after", "noise lines b/a"]
    print("| " + " | ".join(head) + " |")
    print("|---|---|---|---|---|---|")
    for case in cases:
        b, a = results[(case, "before")], results[(case, "after")]
        mb, ma = statistics.median(r[0] for r in b), statistics.median(r[0] for r in a)
        print(f"| {case} | {mb:.2f} | {ma:.2f} | {ma / mb:.2f} | {b[0][1]}/{a[0][1]} | {len(b[0][2])}/{len(a[0][2])} |")
    print()
    for case in cases:
        for side in sides:
            lines = results[(case, side)][0][2]
            if lines:
                print(f"noise, {case}, {side}:")
                print("\n".join(f"    {line[:160]}" for line in lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
