"""Helper for launchers/gpu_smoke.sh: writes the smoke prompt set and checks a finished smoke run.

    python launchers/gpu_smoke.py data OUT.jsonl
    python launchers/gpu_smoke.py check RUN_DIR METHOD --steps 1,2 [--resumed-from 2]

`check` reads what the run left on disk: the DeepSpeed checkpoints' client_states["recipe"] (one per step,
--ckpt.save_steps 1), the TensorBoard scalars `train/recipe/*`, and recipe_problems.jsonl. It asserts the recipe
stats were logged at every step, the state in each checkpoint belongs to METHOD, a stateful method's controller
moved between steps, and (with --resumed-from S) that the resumed run's controller continued from step S's state
rather than restarting. Exit 0 if all hold, 1 with the reasons otherwise. It starts nothing.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys

STATEFUL = ("lead", "leash")


def write_data(path: str) -> int:
    rows = [{"prompt": f"What is {a} + {b}? Put the final answer in \\boxed{{}}.", "label": str(a + b)}
            for a, b in ((3, 4), (12, 30), (7, 8), (25, 17), (9, 9), (100, 23), (6, 7), (44, 11))]
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    return 0


def recipe_state(ckpt: str, step: int) -> dict:
    import torch
    files = glob.glob(os.path.join(ckpt, "_actor", f"global_step{step}", "*model_states.pt"))
    if not files:
        raise AssertionError(f"no DeepSpeed checkpoint for global_step{step} under {ckpt}/_actor")
    state = torch.load(files[0], map_location="cpu", weights_only=False)
    if "recipe" not in state:
        raise AssertionError(f"checkpoint global_step{step} has no client_states['recipe']")
    return state["recipe"]


def tb_scalars(tb_dir: str) -> dict[str, dict[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    out: dict[str, dict[int, float]] = {}
    for events in glob.glob(os.path.join(tb_dir, "**", "events.*"), recursive=True):
        acc = EventAccumulator(events, size_guidance={"scalars": 0})
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            out.setdefault(tag, {}).update({e.step: e.value for e in acc.Scalars(tag)})
    return out


def check(run: str, method: str, steps: list[int], resumed_from: int | None) -> list[str]:
    problems = []
    ckpt, tb = os.path.join(run, "ckpt"), os.path.join(run, "tb")
    scalars = tb_scalars(tb)
    for tag in ("train/recipe/correct_rate", "train/recipe/length_mean", "train/recipe/grading/timeout_count",
                "train/recipe/grading/error_count"):
        missing = [s for s in steps if s not in scalars.get(tag, {})]
        if missing:
            problems.append(f"{tag} not logged at steps {missing}")
    if not any(t.startswith(f"train/recipe/{method}/") for t in scalars):
        problems.append(f"no train/recipe/{method}/* controller/method scalars in TensorBoard")
    states = {}
    for s in steps + ([resumed_from] if resumed_from else []):
        try:
            states[s] = recipe_state(ckpt, s)
        except AssertionError as exc:
            problems.append(str(exc))
    for s, st in states.items():
        if st.get("method") != method:
            problems.append(f"global_step{s}: recipe state is for {st.get('method')!r}, expected {method!r}")
    ctrl = {s: st["controller"]["controller"] for s, st in states.items() if "controller" in st}
    if method in STATEFUL and all(s in ctrl for s in steps):
        if ctrl[steps[0]] == ctrl[steps[-1]]:
            problems.append(f"{method} controller did not move between steps {steps[0]} and {steps[-1]}: "
                            f"{ctrl[steps[0]]}")
        if resumed_from and resumed_from in ctrl and ctrl[steps[0]]["step"] <= ctrl[resumed_from]["step"]:
            problems.append(f"resumed controller step {ctrl[steps[0]]['step']} does not continue from "
                            f"step {resumed_from}'s {ctrl[resumed_from]['step']} (restarted?)")
    problems_file = os.path.join(ckpt, "recipe_problems.jsonl")
    logged = set()
    if os.path.exists(problems_file):
        with open(problems_file, encoding="utf-8") as f:
            logged = {json.loads(line)["step"] for line in f}
    if not set(steps) <= logged:
        problems.append(f"recipe_problems.jsonl lacks steps {sorted(set(steps) - logged)}")
    return problems


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("data")
    d.add_argument("out")
    c = sub.add_parser("check")
    c.add_argument("run")
    c.add_argument("method")
    c.add_argument("--steps", required=True, help="comma-separated global steps this run trained")
    c.add_argument("--resumed-from", type=int, default=None)
    a = ap.parse_args(argv)
    if a.cmd == "data":
        return write_data(a.out)
    problems = check(a.run, a.method, [int(s) for s in a.steps.split(",")], a.resumed_from)
    for p in problems:
        print(f"FAIL {a.method}: {p}")
    if not problems:
        print(f"ok {a.method}: steps {a.steps}" + (f" (resumed from {a.resumed_from})" if a.resumed_from else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
