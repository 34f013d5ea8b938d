"""The smoke-run driver of launchers/gpu_smoke.sh and the CPU end-to-end tests (tests/cpu_e2e): `train_argv`, the
one `lead-recipes train` command of a smoke run per profile (gpu: real sizes, colocated; cpu: toy sizes on fake Ray
GPUs), the smoke prompt set, the methods to run (every registered one), and `check` of what a finished run left on
disk (recipe stats at every step, the method's state in each checkpoint, a stateful controller that moved and, after
a resume, continued). Subcommands: methods, data, train, check (`--help`). It starts nothing but the train command.
See docs/training.md#on-gpu-nodes and docs/e2e.md.
"""

from __future__ import annotations

import glob
import json
import os
import sys

from lead_recipes.help_format import ArgumentParser
from lead_recipes.methods import build_method, sections_read
from lead_recipes.methods.config import METHODS, RecipeConfig

# per profile: sequence sizes, batch shape (prompts per step x samples), learning rate, layout flags. One episode =
# 2 steps. The toy model's lr is large so one step moves the policy enough that a missing weight sync shows in
# vllm_kl (docs/benchmarks.md#cpu-end-to-end-runs has the measurement).
PROFILES = {
    "gpu": {
        "max_len": 512,
        "max_new_tokens": 256,
        "rollout_batch": 4,
        "n": 4,
        "rollout_micro": 1,
        "train_batch": 16,
        "train_micro": 1,
        "prompts": 8,
        "lr": "1e-6",
        "layout": [
            "--vllm.gpu_memory_utilization",
            "0.4",
            "--vllm.enable_sleep",
            "--ds.enable_sleep",
            "--train.colocate_all",
        ],
    },
    "cpu": {
        "max_len": 256,
        "max_new_tokens": 32,
        "rollout_batch": 2,
        "n": 4,
        "rollout_micro": 4,
        "train_batch": 8,
        "train_micro": 4,
        "prompts": 4,
        "lr": "1e-2",
        "layout": ["--vllm.gpu_memory_utilization", "0.3", "--vllm.sync_backend", "gloo", "--vllm.enforce_eager"],
    },
}


# The GPU paths the shipped recipes take, each a set of flag overrides on top of a profile (a value of None is a
# switch; "{max_len}" and the like are filled from the profile). gpu_smoke.sh runs them on GPUs; tests/e2e runs
# the ones that can run on CPU through tests/cpu_e2e's shim. See docs/e2e.md.
PATHS: dict[str, dict[str, str | None]] = {
    "plain": {},
    "packing": {"--ds.packing_samples": None, "--ds.attn_implementation": "flash_attention_2"},
    "dynamic-batching": {
        "--ds.packing_samples": None,
        "--ds.attn_implementation": "flash_attention_2",
        "--train.dynamic_batch_enable": None,
        "--train.max_tokens_per_gpu": "{max_len}",
        "--train.max_epochs": "2",
    },
    "zero3": {"--ds.zero_stage": "3"},
    "tp2": {"--vllm.tensor_parallel_size": "2"},
    "async": {"--train.async_enable": None},
}


def apply_path(argv: list[str], path: str, profile: dict) -> list[str]:
    """ARGV with PATHS[path]'s flags set: a flag already there gets the path's value, a new one is appended."""
    out = list(argv)
    for flag, value in PATHS[path].items():
        value = None if value is None else value.format(**profile)
        if flag in out:
            if value is not None:
                out[out.index(flag) + 1] = value
        else:
            out += [flag] if value is None else [flag, value]
    return out


# per --recipe section: settings as fractions of the rollout cap, so the length terms can move within a few steps
CAP_FRACTIONS = {
    "lead": {"b_max": 1, "l_min": 0.25},
    "leash": {"target_length": 0.25},
    "grpo_scalarized": {"length_threshold": 0.5},
    "gdpo": {"length_threshold": 0.5},
    "grpo_lead": {"ref_code_length_gate_tokens": 1},
}


def method_flags(method: str, max_new_tokens: int) -> list[str]:
    """The CAP_FRACTIONS settings of every section `method` reads (lead's for gdpo and composed too)."""
    return [
        arg
        for section in sections_read(method)
        for name, fraction in CAP_FRACTIONS.get(section, {}).items()
        for arg in (f"--recipe.{section}.{name}", str(max(int(max_new_tokens * fraction), 1)))
    ]


def stateful(method: str) -> bool:
    """The method carries controller state from step to step (its Method sets `controller`)."""
    return build_method(RecipeConfig(method=method)).controller is not None


def train_argv(
    profile: str,
    method: str,
    model: str,
    data: str,
    run: str,
    reward: str,
    episodes: int,
    gpus: int = 1,
    extra: list[str] | tuple = (),
    path: str = "plain",
) -> list[str]:
    """`lead-recipes train` flags (without the command) of one smoke run writing under RUN (ckpt, tb, hf), on the
    GPU path PATH (PATHS)."""
    p = PROFILES[profile]
    argv = [  # --recipe.name none: the command is complete, no base recipe underneath it
        "--recipe.name",
        "none",
        "--actor.model_name_or_path",
        model,
        "--reward.remote_url",
        reward,
        "--data.prompt_dataset",
        data,
        "--data.input_key",
        "prompt",
        "--data.label_key",
        "label",
        "--data.apply_chat_template",
        "--data.max_len",
        str(p["max_len"]),
        "--rollout.max_new_tokens",
        str(p["max_new_tokens"]),
        "--actor.num_nodes",
        "1",
        "--actor.num_gpus_per_node",
        str(gpus),
        "--ref.num_nodes",
        "1",
        "--ref.num_gpus_per_node",
        str(gpus),
        "--vllm.num_engines",
        str(gpus),
        "--vllm.tensor_parallel_size",
        "1",
        *p["layout"],
        "--rollout.batch_size",
        str(p["rollout_batch"]),
        "--rollout.n_samples_per_prompt",
        str(p["n"]),
        "--rollout.micro_batch_size",
        str(p["rollout_micro"]),
        "--train.batch_size",
        str(p["train_batch"]),
        "--train.micro_batch_size",
        str(p["train_micro"]),
        "--train.num_episodes",
        str(episodes),
        "--train.max_epochs",
        "1",
        "--train.seed",
        "0",
        "--algo.advantage.estimator",
        "group_norm",
        "--algo.advantage.is_correction_level",
        "token",
        "--algo.kl.use_loss",
        "--algo.kl.init_coef",
        "1e-3",
        "--algo.kl.estimator",
        "k2",
        "--ds.zero_stage",
        "2",
        "--ds.param_dtype",
        "bf16",
        "--ds.attn_implementation",
        "sdpa",
        "--actor.adam.lr",
        p["lr"],
        "--actor.lr_scheduler",
        "constant",
        "--actor.lr_warmup_ratio",
        "0.0",
        "--ckpt.path",
        os.path.join(run, "ckpt"),
        "--ckpt.save_steps",
        "1",
        "--ckpt.output_dir",
        os.path.join(run, "hf"),
        "--logger.tensorboard_dir",
        os.path.join(run, "tb"),
        "--logger.logging_steps",
        "1",
        "--recipe.method",
        method,
        *method_flags(method, p["max_new_tokens"]),
    ]
    return apply_path(argv, path, p) + list(extra)


def write_data(path: str, profile: str = "gpu") -> int:
    if profile == "cpu":  # the tiny test model answers 2 or 3 at random: every group gets mixed rewards
        rows = [
            {"prompt": q, "label": a}
            for q, a in (
                ("What is 1 + 1?", "2"),
                ("What is 6 / 2?", "3"),
                ("What is 5 - 3?", "2"),
                ("What is 9 / 3?", "3"),
            )
        ]
    else:
        rows = [
            {"prompt": f"What is {a} + {b}? Put the final answer in \\boxed{{}}.", "label": str(a + b)}
            for a, b in ((3, 4), (12, 30), (7, 8), (25, 17), (9, 9), (100, 23), (6, 7), (44, 11))
        ]
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


def main(argv: list[str]) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("methods", help="print the methods to run: NAMES checked, default every registered one")
    m.add_argument("names", nargs="*", metavar="NAME", help=f"of {', '.join(METHODS)}")
    d = sub.add_parser("data", help="write the smoke prompt set")
    d.add_argument("out")
    d.add_argument("--smoke.profile", dest="profile", choices=sorted(PROFILES), default="gpu")
    t = sub.add_parser("train", help="run one smoke `lead-recipes train` (extra flags after --)")
    t.add_argument("--smoke.profile", dest="profile", choices=sorted(PROFILES), default="gpu")
    for name in ("method", "model", "data", "run", "reward"):
        t.add_argument(f"--smoke.{name}", dest=name, required=True)
    t.add_argument("--smoke.episodes", dest="episodes", type=int, default=1)
    t.add_argument("--smoke.gpus", dest="gpus", type=int, default=1)
    t.add_argument("--smoke.path", dest="path", choices=list(PATHS), default="plain")
    t.add_argument("extra", nargs="*")
    c = sub.add_parser("check", help="check a finished run's directory")
    c.add_argument("run")
    c.add_argument("method", choices=METHODS)
    c.add_argument("--smoke.steps", dest="steps", required=True, help="comma-separated global steps this run trained")
    c.add_argument("--smoke.resumed_from", dest="resumed_from", type=int, default=None)
    a = ap.parse_args(argv)
    if a.cmd == "methods":
        unknown = [n for n in a.names if n not in METHODS]
        if unknown:
            m.error(f"unknown method(s) {', '.join(unknown)}; the methods: {', '.join(METHODS)}")
        print(" ".join(a.names or METHODS))
        return 0
    if a.cmd == "data":
        return write_data(a.out, a.profile)
    if a.cmd == "train":
        import subprocess

        argv = train_argv(a.profile, a.method, a.model, a.data, a.run, a.reward, a.episodes, a.gpus, a.extra, a.path)
        return subprocess.call([sys.executable, "-m", "lead_recipes.cli", "train", *argv])
    problems = check(a.run, a.method, [int(s) for s in a.steps.split(",")], a.resumed_from)
    for p in problems:
        print(f"FAIL {a.method}: {p}")
    if not problems:
        print(f"ok {a.method}: steps {a.steps}" + (f" (resumed from {a.resumed_from})" if a.resumed_from else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
