"""Trade-off benchmark: which method keeps accuracy while cutting length, over seeds, in the real OpenRLHF loop on a
CPU. The task "What is a + b + c + d?" has a longer, more accurate behaviour (`steps`), a short, less accurate one
(`direct`) and filler after the answer (waste), so the best policy is known; every run is `lead-recipes train`
under the CPU harness of tests/cpu_e2e. Design, table and plots: docs/benchmarks.md#design (its section).

    .venv/bin/python benchmarks/tradeoff.py --workdir DIR            # the sweep; rerun resumes it
    .venv/bin/python benchmarks/tradeoff.py --workdir DIR --report-only"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import random
import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent / "tests")]
from toy_run import FILLER, generate  # noqa: E402
from tradeoff_configs import CAP, EXTRA, MONITOR_SEED, MONITOR_SET, configs, laser_de_settings  # noqa: E402
from tradeoff_start import TEMPLATES, build_start, start_info  # noqa: E402

OPERANDS = 4  # digits per question
FILLER_MAX = 40  # filler words after the answer: uniform in 0..FILLER_MAX
STEPS_SHARE = 0.5  # share of `steps` responses in the SFT data


# ------------------------------------------------------------------------------------------------------------ task
def question(digits: list[int]) -> str:
    return "What is " + " + ".join(map(str, digits)) + "?"


def answer_text(digits: list[int], behaviour: str) -> str:
    if behaviour == "direct":
        return f"\\boxed{{{sum(digits)}}}"
    parts, acc = [], digits[0]
    for d in digits[1:]:
        parts.append(f"{acc}+{d}={acc + d}")
        acc += d
    return " ".join(parts) + f" \\boxed{{{acc}}}"


def response(rng: random.Random, digits: list[int], behaviour: str, filler: int) -> str:
    return answer_text(digits, behaviour) + "".join(" " + rng.choice(FILLER) for _ in range(filler))


def draw(rng: random.Random) -> list[int]:
    return [rng.randrange(10) for _ in range(OPERANDS)]


BOX = re.compile(r"\\boxed\{[^{}]*\}")


def tag(text: str, tok) -> tuple[str, int]:
    """(behaviour, waste tokens) of a sampled response: `steps` if it opens with `x+y=`, `direct` if it opens with
    the box, else `other`; waste = the tokens after the last box (all of them when there is no box)."""
    behaviour = "direct" if text.startswith("\\boxed{") else "steps" if re.match(r"\d+\+\d+=", text) else "other"
    boxes = list(BOX.finditer(text))
    tail = text[boxes[-1].end() :] if boxes else text
    return behaviour, len(tok(tail, add_special_tokens=False).input_ids) if tail.strip() else 0


# ----------------------------------------------------------------------------------------------------- SFT starts
def write_prompts(path: Path, rows: int, seed: int) -> None:
    rng = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(rows):
            d = draw(rng)
            f.write(json.dumps({"prompt": question(d), "label": str(sum(d))}) + "\n")


def write_monitor_prompts(path: Path, rows: int, exclude: set[str]) -> None:
    """Laser-DE's monitor set: `rows` distinct task prompts drawn with MONITOR_SEED, none of them in `exclude` (the
    run's training prompts and the evaluation questions), so the targets come from prompts held back from both."""
    rng, seen = random.Random(MONITOR_SEED), set(exclude)
    with open(path, "w") as f:
        for _ in range(rows):
            d = draw(rng)
            while question(d) in seen:
                d = draw(rng)
            seen.add(question(d))
            f.write(json.dumps({"prompt": question(d), "label": str(sum(d))}) + "\n")


EVAL_SEED = 12345  # the evaluation questions and sampling noise: the same for every start, method and seed


def eval_questions(n: int) -> list[list[int]]:
    rng = random.Random(EVAL_SEED)
    return [draw(rng) for _ in range(n)]


def evaluate(model_dir: Path, n_questions: int, samples: int) -> dict:
    """Accuracy, mean length and the behaviour breakdown over n_questions × samples at temperature 1, sampled with
    noise fixed per (question, sample, position), graded by the package's reward function."""
    from transformers import AutoTokenizer

    from lead_recipes.reward.reward_func import grade_samples

    qs = eval_questions(n_questions)
    texts, lengths, truncated = generate(model_dir, [question(d) for d in qs], samples, CAP, EVAL_SEED)
    labels = [str(sum(qs[i // samples])) for i in range(len(texts))]
    rewards, _ = grade_samples(texts, [""] * len(texts), labels)
    tok = AutoTokenizer.from_pretrained(model_dir)
    rows = [
        {"behaviour": b, "waste": w, "correct": bool(r), "length": n, "truncated": t}
        for (b, w), r, n, t in zip((tag(x, tok) for x in texts), rewards, lengths, truncated)
    ]
    return summarise(rows) | {"example": texts[:3]}


def summarise(rows: list[dict]) -> dict:
    """accuracy, length, waste; per behaviour its share, accuracy, length and waste; the best-policy point."""

    def mean(xs):
        return sum(xs) / len(xs) if xs else None

    out = {
        "n": len(rows),
        "accuracy": mean([r["correct"] for r in rows]),
        "length": mean([r["length"] for r in rows]),
        "waste": mean([r["waste"] for r in rows]),
        "truncated": mean([r["truncated"] for r in rows]),
        "by_behaviour": {},
    }
    for b in ("steps", "direct", "other"):
        sub = [r for r in rows if r["behaviour"] == b]
        out["by_behaviour"][b] = {
            "share": len(sub) / len(rows),
            "accuracy": mean([r["correct"] for r in sub]),
            "length": mean([r["length"] for r in sub]),
            "waste": mean([r["waste"] for r in sub]),
            "core_length": mean([r["length"] - r["waste"] for r in sub]),
        }
    # accuracy by waste bucket within each behaviour: waste must be free (tradeoff pitfalls)
    out["by_waste"] = {}
    for b in ("steps", "direct"):
        for lo, hi in ((0, 10), (10, 25), (25, 10**9)):
            sub = [r["correct"] for r in rows if r["behaviour"] == b and lo <= r["waste"] < hi]
            out["by_waste"][f"{b} {lo}-{hi if hi < 10**9 else ''}"] = (mean(sub), len(sub))
    return out


# ------------------------------------------------------------------------------------------------------- training
def train_flags(args, data: Path, seed: int) -> list[str]:
    """Overrides on top of the harness's CPU smoke command: this benchmark's data, sizes, optimiser and seed."""
    return [
        "--data.prompt_dataset",
        str(data),
        "--data.max_samples",
        str(args.steps * args.prompts_per_step),
        "--data.max_len",
        str(CAP + 64),
        "--rollout.max_new_tokens",
        str(CAP),
        "--rollout.batch_size",
        str(args.prompts_per_step),
        "--rollout.n_samples_per_prompt",
        str(args.n),
        "--rollout.micro_batch_size",
        "32",
        "--train.batch_size",
        str(args.prompts_per_step * args.n),
        "--train.micro_batch_size",
        "32",
        "--actor.adam.lr",
        str(args.lr),
        "--ckpt.save_steps",
        "-1",
        "--algo.kl.init_coef",
        "0",
        "--train.seed",
        str(seed),
    ]


def trained_samples(run_dir: Path, tok, batch: int) -> list[list[dict]]:
    """Per RL step, every sample the actor trained on: behaviour, waste, length, correctness, advantage, group."""
    import glob

    rows = [
        json.loads(line)
        for f in sorted(glob.glob(str(run_dir / "ckpt" / "e2e_record" / "*.jsonl")))
        for line in open(f, encoding="utf-8")
    ]
    steps = []
    for at in range(0, len(rows) - batch + 1, batch):
        out = []
        for r in rows[at : at + batch]:
            text = tok.decode(r["response_ids"], skip_special_tokens=True)
            behaviour, waste = tag(text, tok)
            out.append(
                {
                    "behaviour": behaviour,
                    "waste": waste,
                    "length": len(r["adv"]),
                    "correct": r["info"]["correct"] > 0,
                    "adv": r["info"]["recipe_advantage"],
                    "group": r["prompt"],
                    "truncated": bool(r["truncated"]),
                }
            )
        steps.append(out)
    return steps


def run_one(cluster, start_dir: Path, run_dir: Path, name: str, seed: int, args) -> dict:
    """One `lead-recipes train` run, its end evaluation and its training-side record, as a JSON-able result."""
    from cpu_e2e import harness
    from transformers import AutoTokenizer

    method, flags = configs(args.steps, args.prompts_per_step)[name]
    data = run_dir / "prompts.jsonl"
    run_dir.mkdir(parents=True, exist_ok=True)
    write_prompts(data, args.steps * args.prompts_per_step, 1000 + seed)
    if MONITOR_SET in flags:
        monitor = run_dir / "monitor.jsonl"
        trained = {json.loads(line)["prompt"] for line in open(data)}
        held_out = trained | {question(d) for d in eval_questions(args.eval_questions)}
        write_monitor_prompts(monitor, laser_de_settings(args.prompts_per_step)["monitor_prompts"], held_out)
        flags = [str(monitor) if f == MONITOR_SET else f for f in flags]
    run = harness.Run(cluster, start_dir, run_dir, method, extra=[*train_flags(args, data, seed), *flags])
    rc = run.wait(timeout=1800)
    if rc != 0:
        raise RuntimeError(f"{name} seed {seed}: lead-recipes train exited {rc}; tail:\n{run.tail()}")
    resolved = re.search(r"recipe=(RecipeConfig\(.*?\)), recipe_save_request", run.text())
    scalars = run.scalars()
    tok = AutoTokenizer.from_pretrained(start_dir)
    per_step = trained_samples(run_dir, tok, args.prompts_per_step * args.n)
    return {
        "name": name,
        "method": method,
        "flags": flags,
        "seed": seed,
        "wall_s": round(run.wall_s, 1),
        "recipe": resolved.group(1) if resolved else None,  # the configuration the trainer resolved
        "end": evaluate(run_dir / "hf", args.eval_questions, args.eval_samples),
        "curves": {
            k.rsplit("/", 1)[-1]: v
            for k, v in scalars.items()
            if k in ("train/recipe/correct_rate", "train/recipe/length_mean")
        },
        "steps": [summarise(s) for s in per_step],
        "trained": per_step,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", type=Path, required=True, help="results per run land here; a rerun resumes")
    ap.add_argument(
        "--configs",
        default=",".join(c for c in configs(1) if c not in EXTRA),
        help=f"comma-separated, of: {', '.join(configs(1))}",
    )
    ap.add_argument("--starts", type=int, default=2, help="SFT starts (seeds 0..N-1)")
    ap.add_argument("--seeds", type=int, default=3, help="RL seeds per start")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--prompts-per-step", type=int, default=8)
    ap.add_argument("--n", type=int, default=8, help="samples per prompt")
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--sft-steps", type=int, default=1200)
    ap.add_argument("--eval-questions", type=int, default=100)
    ap.add_argument("--eval-samples", type=int, default=8)
    ap.add_argument(
        "--threads", type=int, default=2, help="torch threads for evaluation (SFT: tradeoff_start.SFT_THREADS)"
    )
    ap.add_argument(
        "--template",
        choices=list(TEMPLATES),
        default="plain",
        help="the starts' prompt: nothink ends it in an empty, closed think block (Laser's format rule)",
    )
    ap.add_argument(
        "--lock",
        type=Path,
        default=None,
        help="hold an flock on this file during each training run (a machine shared with other jobs)",
    )
    ap.add_argument("--plot-dir", type=Path, default=Path("docs/img"))
    ap.add_argument("--plot-name", default="tradeoff", help="plots: PLOT_DIR/NAME.png and NAME_steps.png")
    ap.add_argument("--report-only", action="store_true", help="table and plots from --workdir's results")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    from tradeoff_report import report

    work = args.workdir
    if not args.report_only:
        sweep(work, args)
    report(work, args)
    return 0


def sweep(work: Path, args) -> None:
    from cpu_e2e import harness

    work.mkdir(parents=True, exist_ok=True)
    log = work / "sweep.jsonl"  # when each run started and ended, with the load average: the sweep's timeline
    names = args.configs.split(",")
    unknown = sorted(set(names) - set(configs(args.steps)))
    if unknown:
        raise SystemExit(f"unknown --configs {unknown}; known: {', '.join(configs(args.steps))}")
    (work / "args.json").write_text(json.dumps(vars(args), default=str, indent=1))
    cluster = None
    try:
        for s in range(args.starts):
            start_dir = work / f"start{s}"
            if not (start_dir / "model.safetensors").exists():
                info = build_start(start_dir, s, args.sft_steps, args.template)
                _log(log, event="sft", start=s, **info)
            info = start_info(start_dir)
            if info is None or info["template"] != args.template:
                built = "without info.json" if info is None else f"with --template {info['template']}"
                raise SystemExit(
                    f"{start_dir} was built {built}, not --template {args.template}: give that workdir its own "
                    "template, or a fresh --workdir"
                )
            if not (start_dir / "eval.json").exists():
                (start_dir / "eval.json").write_text(
                    json.dumps(evaluate(start_dir, args.eval_questions, args.eval_samples), indent=1)
                )
            for seed in range(args.seeds):
                for name in names:
                    result = work / "runs" / f"start{s}" / name / f"seed{seed}.json"
                    if result.exists():
                        continue
                    with held(args.lock):
                        cluster = cluster or harness.RayCluster()
                        t0 = time.time()
                        out = run_one(
                            cluster, start_dir, work / "runs" / f"start{s}" / name / f"seed{seed}", name, seed, args
                        )
                    out["start_sha256"] = info["weights_sha256"]  # the report refuses to mix starts
                    result.write_text(json.dumps(out))
                    _log(
                        log,
                        event="run",
                        start=s,
                        config=name,
                        seed=seed,
                        wall_s=round(time.time() - t0, 1),
                        accuracy=out["end"]["accuracy"],
                        length=out["end"]["length"],
                    )
    finally:
        if cluster is not None:
            cluster.stop()


@contextlib.contextmanager
def held(lock: Path | None):
    if lock is None:
        yield
        return
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _log(path: Path, **row) -> None:
    row |= {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "load": os.getloadavg()}
    print(json.dumps(row), flush=True)
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
