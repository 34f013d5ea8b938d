"""The smoke-run driver of launchers/gpu_smoke.sh and the CPU end-to-end tests (tests/cpu_e2e): `train_argv`, the
one `lead-recipes train` command of a smoke run per profile (gpu: real sizes, placed on the node's GPUs with a batch
that fits their number; cpu: toy sizes on fake Ray GPUs) and GPU path (PATHS), the smoke prompts (L1 data for the L1
methods), and readers of what a run wrote (checkpoint recipe state, TensorBoard scalars; the checks are in
smoke_check.py). Subcommands: methods, paths, data, train (`--help`). It starts nothing but the train command.
See docs/training.md#on-gpu-nodes and docs/e2e.md.
"""

from __future__ import annotations

import glob
import json
import os
import sys

from lead_recipes.help_format import ArgumentParser
from lead_recipes.methods import sections_read
from lead_recipes.methods.config import METHODS, entry
from lead_recipes.prompts import l1_suffix

# per profile: sequence sizes, the smallest batch shape (prompts per step x samples; train_batch and the prompt
# count are derived, see `batch`), learning rate, placement flags. One episode = 2 steps. Both learning rates are
# high so one step moves the policy enough that a missing weight sync shows in vllm_kl (docs/e2e.md).
PROFILES = {
    "gpu": {
        "max_len": 512,
        "max_new_tokens": 256,
        "rollout_batch": 4,
        "n": 4,
        "rollout_micro": 1,
        "train_micro": 1,
        "lr": "1e-5",
        "layout": [  # actor, reference and vLLM share every GPU, each asleep while the other works
            "--vllm.gpu_memory_utilization",
            "0.4",
            "--vllm.enable_sleep",
            "--ds.enable_sleep",
            "--train.colocate_all",
        ],
        "separate_layout": ["--vllm.gpu_memory_utilization", "0.6", "--train.colocate_actor_ref"],  # SEPARATE paths
    },
    "cpu": {
        "max_len": 256,
        "max_new_tokens": 32,
        "rollout_batch": 2,
        "n": 4,
        "rollout_micro": 4,
        "train_micro": 4,
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
    "non-colocated": {},  # the gpu profile's placement differs (SEPARATE): vLLM on GPUs of its own, NCCL sync
    "async": {"--train.async_enable": None},
}
# Paths whose vLLM engines get GPUs of their own in the gpu profile, so the weights reach them over NCCL instead of
# CUDA IPC. OpenRLHF's async trainer never shares vLLM's GPUs (with colocate_all it colocates only DeepSpeed's
# models) and asserts that vLLM sleep is off.
SEPARATE = ("non-colocated", "async")


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


def min_gpus(path: str) -> int:
    """GPUs PATH needs on the gpu profile: a TP engine's, or one for the actor and one for vLLM when separate."""
    return max(int(PATHS[path].get("--vllm.tensor_parallel_size") or 1), 2 if path in SEPARATE else 1)


def placement(profile: str, path: str, gpus: int) -> dict:
    """Actor (= reference) GPUs, vLLM engines, their TP size and the profile's placement flags for PATH on GPUS.
    gpu: colocated paths put actor, reference and vLLM on the same GPUs (engines x TP = actor GPUs, OpenRLHF's
    assertion; a TP path leaves an odd GPU out), SEPARATE ones give vLLM gpus // 2 GPUs and the actor the rest.
    cpu: the harness's fake GPUs are not shared, every role gets GPUS of them (the CPU e2e's layout)."""
    p, tp = PROFILES[profile], int(PATHS[path].get("--vllm.tensor_parallel_size") or 1)
    if profile == "cpu":
        return {"actor": gpus, "engines": gpus, "tp": tp, "flags": p["layout"]}
    if gpus < min_gpus(path):
        raise ValueError(f"path {path} needs at least {min_gpus(path)} GPUs, got {gpus}")
    if path in SEPARATE:
        return {"actor": gpus - gpus // 2, "engines": gpus // 2, "tp": tp, "flags": p["separate_layout"]}
    return {"actor": gpus - gpus % tp, "engines": (gpus - gpus % tp) // tp, "tp": tp, "flags": p["layout"]}


def batch(profile: str, actor_gpus: int) -> dict:
    """The step shape for ACTOR_GPUS data-parallel ranks: the smallest rollout batch (from the profile's) whose
    samples split evenly over the ranks in whole micro-batches, one optimizer step per global step
    (train_batch = all the step's samples: DeepSpeed asserts train_batch = micro x accumulation x ranks), and the
    prompts of one episode (2 steps)."""
    p = PROFILES[profile]
    rollout = p["rollout_batch"]
    while any((rollout * p["n"]) % (actor_gpus * p[micro]) for micro in ("train_micro", "rollout_micro")):
        rollout += 1
    return {"rollout_batch": rollout, "train_batch": rollout * p["n"], "prompts": 2 * rollout}


# per --recipe section: settings as fractions of the rollout cap, so the length terms can move within a few steps
CAP_FRACTIONS = {
    "lead": {"b_max": 1, "l_min": 0.25},
    "leash": {"target_length": 0.25},
    "grpo_scalarized": {"length_threshold": 0.5},
    "gdpo": {"length_threshold": 0.5},
    "grpo_lead": {"ref_code_length_gate_tokens": 1},
    "laser_d": {"grid_lower": 0.5},  # a target grid the short smoke responses can fall on either side of
    "laser_de": {"grid_lower": 0.5},
}
MONITOR_STEPS = 2  # Laser-D/-DE: the run's own prompts are the monitor set, a pass every 2 steps


def method_flags(method: str, max_new_tokens: int) -> list[str]:
    """The CAP_FRACTIONS settings of every section `method` reads (lead's for gdpo and composed too)."""
    return [
        arg
        for section in sections_read(method)
        for name, fraction in CAP_FRACTIONS.get(section, {}).items()
        for arg in (f"--recipe.{section}.{name}", str(max(int(max_new_tokens * fraction), 1)))
    ]


# AdaptThink's forced tokens in a smoke run: R1's `</think>` and "Alright" are no single ids of a small
# non-reasoning tokenizer, so two letters that are, and that the smoke models never put first; ρ so that one of a
# group of 4 is no-think; the OpenRLHF settings lead_recipes.training.first_token requires (the IS correction off,
# so the loss's old log-probs are the ones the plug-in's seam overwrites)
ADAPTTHINK_TOKENS = ("Q", "X")
ADAPTTHINK_RHO = 0.25
ADAPTTHINK_OPENRLHF = {
    "--actor.policy_loss_type": "gspo",
    "--algo.kl.init_coef": "0",
    "--algo.advantage.is_correction_level": "off",
}


def adaptthink_flags(model: str, max_new_tokens: int) -> list[str]:
    """`--recipe.adaptthink.*` of a smoke run: ADAPTTHINK_TOKENS as ids of MODEL's tokenizer (ValueError when one
    is not a single id there), ρ, and a no-think cap of half the rollout cap."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model, local_files_only=True)  # the smoke never goes online
    ids = [tok.encode(t, add_special_tokens=False) for t in ADAPTTHINK_TOKENS]
    if any(len(i) != 1 for i in ids):
        raise ValueError(f"{model}: the forced tokens {ADAPTTHINK_TOKENS} are not single ids ({ids})")
    return [
        *("--recipe.adaptthink.nothink_token_id", str(ids[0][0]), "--recipe.adaptthink.think_token_id", str(ids[1][0])),
        *("--recipe.adaptthink.rho", str(ADAPTTHINK_RHO), "--recipe.adaptthink.nothink_cap", str(max_new_tokens // 2)),
    ]


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
    GPU path PATH (PATHS) placed on GPUS GPUs."""
    p, place = PROFILES[profile], placement(profile, path, gpus)
    b = batch(profile, place["actor"])
    flags = {  # --recipe.name none: the command is complete, no base recipe underneath it; None: a switch
        "--recipe.name": "none",
        "--actor.model_name_or_path": model,
        "--reward.remote_url": reward,
        "--data.prompt_dataset": data,
        "--data.input_key": "prompt",
        "--data.label_key": "label",
        "--data.apply_chat_template": None,
        "--data.max_len": p["max_len"],
        "--rollout.max_new_tokens": p["max_new_tokens"],
        "--actor.num_nodes": 1,
        "--actor.num_gpus_per_node": place["actor"],
        "--ref.num_nodes": 1,
        "--ref.num_gpus_per_node": place["actor"],
        "--vllm.num_engines": place["engines"],
        "--vllm.tensor_parallel_size": place["tp"],
        "--rollout.batch_size": b["rollout_batch"],
        "--rollout.n_samples_per_prompt": p["n"],
        "--rollout.micro_batch_size": p["rollout_micro"],
        "--train.batch_size": b["train_batch"],
        "--train.micro_batch_size": p["train_micro"],
        "--train.num_episodes": episodes,
        "--train.max_epochs": 1,
        "--train.seed": 0,
        "--algo.advantage.estimator": "group_norm",
        "--algo.advantage.is_correction_level": "token",
        "--algo.kl.use_loss": None,
        "--algo.kl.init_coef": "1e-3",
        "--algo.kl.estimator": "k2",
        "--ds.zero_stage": 2,
        "--ds.param_dtype": "bf16",
        "--ds.attn_implementation": "sdpa",
        "--actor.adam.lr": p["lr"],
        "--actor.lr_scheduler": "constant",
        "--actor.lr_warmup_ratio": "0.0",
        "--ckpt.path": os.path.join(run, "ckpt"),
        "--ckpt.save_steps": 1,
        "--ckpt.output_dir": os.path.join(run, "hf"),
        "--logger.tensorboard_dir": os.path.join(run, "tb"),
        "--logger.logging_steps": 1,
        "--recipe.method": method,
    }
    if method == "adaptthink":
        flags.update(ADAPTTHINK_OPENRLHF)
    if entry(method).monitor:
        flags.update({"--eval.dataset": data, "--eval.steps": MONITOR_STEPS, "--eval.n_samples_per_prompt": p["n"]})
    argv = [str(x) for flag, value in flags.items() for x in ((flag,) if value is None else (flag, value))]
    argv += place["flags"] + method_flags(method, p["max_new_tokens"])
    argv += adaptthink_flags(model, p["max_new_tokens"]) if method == "adaptthink" else []
    return apply_path(argv, path, p) + list(extra)


def layout_problem(argv: list[str], gpus: int) -> str | None:
    """What the recipes' own layout check (lead_recipes.recipes.layout: OpenRLHF's colocation assertion, DeepSpeed's
    batch assertion, the GPUs the roles need) says about the command ARGV on one node of GPUS GPUs, or None."""
    from types import SimpleNamespace

    from lead_recipes.recipes import RecipeError
    from lead_recipes.recipes.layout import check_layout

    def value(i: int):  # typed as a recipe's YAML would be: a switch is True, numbers are numbers
        if i + 1 == len(argv) or argv[i + 1].startswith("--"):
            return True
        try:
            return json.loads(argv[i + 1])
        except ValueError:
            return argv[i + 1]

    flags = {a[2:]: value(i) for i, a in enumerate(argv) if a.startswith("--")}
    recipe = {k.removeprefix("recipe."): v for k, v in flags.items() if k.startswith("recipe.")}
    resources = {"nodes": 1, "gpus_per_node": gpus, "reward_placement": "none"}
    try:
        check_layout(
            SimpleNamespace(openrlhf=flags, recipe=recipe, resources=resources, entrypoint="train", path="gpu_smoke")
        )
    except RecipeError as exc:
        return str(exc)
    return None


# the easy sums of the gpu profile (a small instruct model gets them right often enough for the correctness-gated
# length terms to move); more are made from SUM_STEP when a step needs more prompts
SUMS = ((3, 4), (12, 30), (7, 8), (25, 17), (9, 9), (100, 23), (6, 7), (44, 11))
SUM_STEP = (13, 29)
# the CPU fixture model answers 2 or 3 at random: every group gets mixed rewards
CPU_PROMPTS = (("What is 1 + 1?", "2"), ("What is 6 / 2?", "3"), ("What is 5 - 3?", "2"), ("What is 9 / 3?", "3"))


def smoke_rows(profile: str, prompts: int) -> list[dict]:
    if profile == "cpu":
        if prompts > len(CPU_PROMPTS):
            raise ValueError(f"the cpu profile has {len(CPU_PROMPTS)} prompts, {prompts} asked (use --smoke.gpus 1)")
        return [{"prompt": q, "label": a} for q, a in CPU_PROMPTS[:prompts]]
    pairs = list(SUMS) + [(SUM_STEP[0] * k, SUM_STEP[1] + k) for k in range(1, prompts)]
    return [
        {"prompt": f"What is {a} + {b}? Put the final answer in \\boxed{{}}.", "label": str(a + b)}
        for a, b in pairs[:prompts]
    ]


def l1_rows(rows: list[dict], method: str, cap: int) -> list[dict]:
    """ROWS as L1 data: L1's length instruction appended and an object label with the target `n_gold` (a quarter
    to five eighths of the cap, so both too short and too long occur) and `l1_mode` (l1-max's data mixes both)."""
    out = []
    for i, row in enumerate(rows):
        n, mode = cap // 4 + (i % 4) * (cap // 8), ("max" if method == "l1-max" and i % 2 else "exact")
        label = {"answer": row["label"], "n_gold": n, "l1_mode": mode}
        out.append({"prompt": row["prompt"] + l1_suffix(n, mode), "label": label})
    return out


def write_data(out: str, profile: str = "gpu", method: str | None = None, gpus: int = 1, path: str = "plain") -> int:
    """The smoke prompts of one run (one episode's worth for its batch), as L1 data when METHOD reads n_gold, with
    a reference accuracy (a quarter to one, by row) in each label when it reads ref_acc (AdaptThink)."""
    p = PROFILES[profile]
    rows = smoke_rows(profile, batch(profile, placement(profile, path, gpus)["actor"])["prompts"])
    if method is not None and "n_gold" in entry(method).label_keys:
        rows = l1_rows(rows, method, p["max_new_tokens"])
    if method is not None and "ref_acc" in entry(method).label_keys:
        rows = [{**r, "label": {"answer": r["label"], "ref_acc": (i % 4 + 1) / 4}} for i, r in enumerate(rows)]
    with open(out, "w", encoding="utf-8") as f:
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


def vllm_kl_after_gradient_steps(scalars: dict) -> dict[int, float]:
    """{step: vllm_kl} for every step whose previous step changed the policy (grad_norm > 0): only there does
    vLLM generating with stale weights show. A step with all-equal rewards in every group has zero gradient."""
    grads = next((v for k, v in scalars.items() if k.endswith("grad_norm")), {})
    kl = scalars.get("train/vllm_kl", {})
    return {s: v for s, v in kl.items() if grads.get(s - 1, 0.0) > 0}


def main(argv: list[str]) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("methods", help="print the methods to run: NAMES checked, default every registered one")
    m.add_argument("names", nargs="*", metavar="NAME", help=f"of {', '.join(METHODS)}")
    pa = sub.add_parser("paths", help="print PATH:GPUS_IT_NEEDS of the paths to run: NAMES checked, default all")
    pa.add_argument("names", nargs="*", metavar="NAME", help=f"of {', '.join(PATHS)}")
    d = sub.add_parser("data", help="write one run's smoke prompts and run the preflight's data check on them")
    d.add_argument("out")
    d.add_argument("--smoke.method", dest="method", choices=METHODS, default=None)
    t = sub.add_parser("train", help="run one smoke `lead-recipes train` (extra flags after --)")
    for name in ("method", "model", "data", "run", "reward"):
        t.add_argument(f"--smoke.{name}", dest=name, required=True)
    t.add_argument("--smoke.episodes", dest="episodes", type=int, default=1)
    t.add_argument("extra", nargs="*")
    for p in (d, t):
        p.add_argument("--smoke.profile", dest="profile", choices=sorted(PROFILES), default="gpu")
        p.add_argument("--smoke.gpus", dest="gpus", type=int, default=1)
        p.add_argument("--smoke.path", dest="path", choices=list(PATHS), default="plain")
    a = ap.parse_args(argv)
    if a.cmd in ("methods", "paths"):
        known, parser = (METHODS, m) if a.cmd == "methods" else (list(PATHS), pa)
        unknown = [n for n in a.names if n not in known]
        if unknown:
            parser.error(f"unknown {a.cmd[:-1]}(s) {', '.join(unknown)}; the {a.cmd}: {', '.join(known)}")
        names = a.names or known
        print(" ".join(names if a.cmd == "methods" else [f"{n}:{min_gpus(n)}" for n in names]))
        return 0
    if a.cmd == "data":
        import datasets

        from lead_recipes.recipes.openrlhf_parser import openrlhf_default
        from lead_recipes.training.data_check import check_data

        datasets.disable_progress_bars()
        write_data(a.out, a.profile, a.method, a.gpus, a.path)
        split = openrlhf_default("data.prompt_split")  # train_argv leaves OpenRLHF's default
        result = check_data("data", a.out, "prompt", "label", split, a.method)
        what = f"{a.path} ({a.method})" if a.path != "plain" else a.method or "data"
        print(f"{'ok' if result.ok else 'FAIL'} {what}: the preflight's data check: {result.detail}")
        return 0 if result.ok else 1
    from lead_recipes import cli

    argv = train_argv(a.profile, a.method, a.model, a.data, a.run, a.reward, a.episodes, a.gpus, a.extra, a.path)
    problem = layout_problem(argv, a.gpus) if a.profile == "gpu" else None
    if problem:
        print(f"gpu_smoke.py: the {a.path} command does not fit {a.gpus} GPU(s): {problem}", file=sys.stderr)
        return 2
    return cli.main(["train", *argv])  # in this process: the dry run's many commands start one interpreter each


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
