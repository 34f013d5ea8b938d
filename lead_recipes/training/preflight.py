"""Preflight of `lead-recipes train`: every check before training (OpenRLHF version, GPUs for the layout, flash-attn
and the optional packages the flags need, both the doctor's checks from lead_recipes.training.doctor, data, model,
the reward function on a probe, checkpoint directory, Ray), none stopping the others, and building missing prompt
data from the recipe's `data.prepare`. It does not parse flags, print or train, and imports OpenRLHF, torch and Ray
only inside the checks. See docs/training.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys

from lead_recipes.training.args import graded_by
from lead_recipes.training.context_check import check_args as check_context_of
from lead_recipes.training.data_check import Check, check_data
from lead_recipes.training.doctor import check_driver, check_flash_attn, check_packages

PROG = "lead-recipes train"


def required_gpus(args) -> int:
    """GPUs this layout asks Ray for (train_ppo_ray's placement: colocated groups share the actor's GPUs). Under
    --train.async_enable, colocate_all colocates only the DeepSpeed models: train_ppo_ray gives the vLLM engines no
    placement group then, so they take GPUs of their own."""
    actor = args.actor.num_nodes * args.actor.num_gpus_per_node
    vllm = (args.vllm.num_engines or 0) * args.vllm.tensor_parallel_size
    if args.train.colocate_all:
        return actor + (vllm if args.train.async_enable else 0)
    ref = (
        0
        if args.train.colocate_actor_ref or args.algo.kl.init_coef <= 0
        else args.ref.num_nodes * args.ref.num_gpus_per_node
    )
    return actor + ref + vllm


def _check_gpus(args) -> Check:
    import torch

    need = required_gpus(args)
    have = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if have >= need or (have and args.actor.num_nodes > 1):  # multi-node: Ray's count below is the real check
        return Check("gpu", True, f"{have} CUDA GPU(s) visible here, layout needs {need}")
    why = "no CUDA GPU visible (torch %s, cuda available: %s)" % (torch.__version__, torch.cuda.is_available())
    # a driver too old for torch's CUDA is the usual reason torch sees none: the doctor's line names it with its fix
    driver = "" if have else f"; driver check: {check_driver().detail}"
    return Check(
        "gpu",
        False,
        f"{why}; this layout needs {need} GPU(s) "
        f"(actor {args.actor.num_nodes}x{args.actor.num_gpus_per_node}, colocate_all={args.train.colocate_all})"
        f"{driver}",
    )


def _check_flash_attn(args) -> Check:
    """Never "not needed": OpenRLHF imports flash_attn always; its CUDA kernels only with flash attention or packing."""
    need_kernels = "flash" in (args.ds.attn_implementation or "") or bool(args.ds.packing_samples)
    return check_flash_attn(need_kernels)


def _check_model(name: str | None) -> Check:
    if not name:
        return Check("model", False, "--actor.model_name_or_path is unset")
    if os.path.isdir(name):
        ok = os.path.exists(os.path.join(name, "config.json"))
        return Check("model", ok, f"{name}" + ("" if ok else ": directory has no config.json"))
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(name, "config.json")
    except Exception:  # noqa: BLE001 - an invalid repo id is reported below like a missing one
        cached = None
    if isinstance(cached, str):
        return Check("model", True, f"{name} (local Hugging Face cache)")
    return Check(
        "model",
        False,
        f"{name}: not a local directory and not in the local Hugging Face cache; not "
        "resolvable offline (download it first, e.g. `hf download {name}`, or pass a local path)".replace(
            "{name}", name
        ),
    )


_PROBE = ("What is 1 + 1?", "Adding gives two. </think> The answer is $\\boxed{2}$.", "2")


def _check_reward(urls) -> Check:
    from lead_recipes.reward.logs import REWARD_LOG_KEYS

    if not urls:
        return Check("reward", False, "--reward.remote_url is unset")
    url = urls[0]
    # lead_recipes/reward/remote_reward.py forwards to servers: probe each one directly (its retries would wait
    # minutes)
    targets = url
    if os.path.basename(url) == "remote_reward.py":
        from lead_recipes.reward.remote_reward import URLS_ENV, server_urls

        targets = server_urls()
        if not targets:
            return Check("reward", False, f"{url} forwards to the servers in ${URLS_ENV}, which is empty")
    prompt, response, label = _PROBE
    for target in [targets] if isinstance(targets, str) else targets:
        try:
            if target.endswith(".py"):
                out = _probe_reward_file(target, prompt, response, label)
            else:
                out = _probe_reward_url(target, prompt, response, label)
        except Exception as exc:  # noqa: BLE001 - any failure here is what the user must see
            return Check("reward", False, f"{target}: probe failed: {type(exc).__name__}: {exc}")
        rewards = [float(r) for r in out.get("rewards", [])]
        keys = tuple((out.get("extra_logs") or {}).keys())
        if rewards != [1.0]:
            return Check("reward", False, f"{target}: a correct probe answer got rewards {rewards} (expected [1.0])")
        if keys != REWARD_LOG_KEYS:
            return Check("reward", False, f"{target}: extra_logs keys {list(keys)} differ from {list(REWARD_LOG_KEYS)}")
    if isinstance(targets, str):
        return Check("reward", True, f"{url}: graded a probe correctly, extra_logs keys match")
    return Check("reward", True, f"{url} -> {', '.join(targets)}: each graded a probe correctly, extra_logs keys match")


def _probe_reward_file(path: str, prompt: str, response: str, label: str) -> dict:
    import concurrent.futures
    import importlib.util

    spec = importlib.util.spec_from_file_location("lead_recipes_reward_probe", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # OpenRLHF calls reward_func through asyncio.to_thread: probe it off the main thread too
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(module.reward_func, [prompt + response], [prompt], [label]).result(timeout=120)


def _probe_reward_url(url: str, prompt: str, response: str, label: str) -> dict:
    import urllib.request

    health = url.rsplit("/", 1)[0] + "/health" if url.count("/") > 2 else url + "/health"
    with urllib.request.urlopen(health, timeout=10) as r:  # the user's own reward server
        if r.status != 200:
            raise RuntimeError(f"GET {health} returned {r.status}")
    body = json.dumps({"query": [prompt + response], "prompts": [prompt], "labels": [label]}).encode()
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def _check_ckpt_dir(path: str) -> Check:
    probe = os.path.abspath(path)
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    ok = os.access(probe, os.W_OK)
    return Check("ckpt", ok, f"{path}" + ("" if ok else f": {probe} is not writable"))


def _check_ray(args) -> Check:
    import ray

    address = os.environ.get("RAY_ADDRESS")
    try:
        ray.init(address=address or None, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
        gpus = int(ray.cluster_resources().get("GPU", 0))
    except Exception as exc:  # noqa: BLE001
        return Check("ray", False, f"Ray did not start: {type(exc).__name__}: {exc}")
    finally:
        ray.shutdown()
    need = required_gpus(args)
    where = f"cluster at {address}" if address else "local Ray"
    if gpus < need:
        return Check("ray", False, f"{where} started but offers {gpus} GPU(s); the layout needs {need}")
    return Check("ray", True, f"{where} started, {gpus} GPU(s)")


CHECK_NAMES = (
    "openrlhf",
    "gpu",
    "flash-attn",
    "packages",
    "data",
    "eval-data",
    "model",
    "context",
    "reward",
    "ckpt",
    "ray",
)


def parse_skip(value: str) -> tuple[str, ...]:
    """`--preflight.skip CHECK[,CHECK]` -> check names; an unknown name is an error listing the valid ones."""
    names = tuple(n.strip() for n in value.split(",") if n.strip())
    unknown = [n for n in names if n not in CHECK_NAMES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"--preflight.skip {value!r}: unknown check(s) {unknown or [value]}; choose from {', '.join(CHECK_NAMES)}"
        )
    return names


def add_preflight_flags(parser) -> None:
    group = parser.add_argument_group("preflight")
    group.add_argument(
        "--preflight.only_enable",
        dest="preflight",
        action="store_true",
        help="run only the preflight checks (exit 0 if all pass)",
    )
    group.add_argument(
        "--preflight.skip",
        dest="preflight_skip",
        type=parse_skip,
        default=(),
        metavar="CHECK[,CHECK]",
        help="preflight checks not to run, e.g. `gpu` when submitting from a login node without GPUs, "
        "`gpu,flash-attn` there for a recipe that packs samples or uses flash attention (flash-attn's kernels are "
        f"run on a GPU) ({', '.join(CHECK_NAMES)}); each is reported as skipped",
    )


def _check_openrlhf() -> Check:
    from lead_recipes.recipes.openrlhf_parser import SUPPORTED_OPENRLHF, OpenRLHFMismatch, check_openrlhf

    try:
        check_openrlhf()
        return Check("openrlhf", True, f"openrlhf {SUPPORTED_OPENRLHF}, the pinned version")
    except OpenRLHFMismatch as exc:
        return Check("openrlhf", False, str(exc))


def run_preflight(args, skip=()) -> list[Check]:
    """Every check not in `skip`, cheap ones first; none stops the others, so the report names everything missing
    at once. A skipped check is reported as passed with the reason, and never run."""
    checks = {
        "openrlhf": _check_openrlhf,
        "gpu": lambda: _check_gpus(args),
        "flash-attn": lambda: _check_flash_attn(args),
        "packages": lambda: check_packages(args),
        "data": lambda: check_data(
            "data",
            args.data.prompt_dataset,
            args.data.input_key,
            args.data.label_key,
            args.data.prompt_split,
            getattr(getattr(args, "recipe", None), "method", None),
        ),
        "eval-data": lambda: check_data(
            "eval data", args.eval.dataset, args.data.input_key, args.data.label_key, args.eval.split
        ),
        "model": lambda: _check_model(args.actor.model_name_or_path),
        "context": lambda: check_context_of(args),
        "reward": lambda: _check_reward(graded_by(args)),
        "ckpt": lambda: _check_ckpt_dir(args.ckpt.path),
        "ray": lambda: _check_ray(args),
    }
    return [Check(name, True, "skipped (--preflight.skip)") if name in skip else run() for name, run in checks.items()]


def report(checks: list[Check]) -> str:
    return "\n".join(f"[{'ok' if c.ok else 'MISSING':>7}] {c.name:<10} {c.detail}" for c in checks)


def _dataset_paths(spec: str | None) -> list[str]:
    return [os.path.abspath(p.split("@")[0].strip()) for p in (spec or "").split(",") if p.strip()]


# what builds each dataset flag's file: the recipe's `data:` key, and the data's name in messages
BUILDERS = {"data.prompt_dataset": ("prepare", "prompt data"), "eval.dataset": ("prepare_eval", "eval data")}


def _prepare_of(dataset: str | None, recipe: str | None, key: str = "data.prompt_dataset") -> tuple | None:
    """(recipe name, its `data.prepare` argv) that builds the prompt data: that of the first recipe whose
    `data.prompt_dataset` is this path, `recipe` (the run's base recipe) tried first since several may share it.
    key "eval.dataset": the recipe's `data.prepare_eval` and `eval.dataset` (Laser-D's monitor set)."""
    from lead_recipes.recipes.recipe import load_recipe, recipe_names

    wanted, builder = set(_dataset_paths(dataset)), BUILDERS[key][0]
    names = recipe_names()
    for name in ([recipe] if recipe in names else []) + [n for n in names if n != recipe]:
        try:
            found = load_recipe(name)
        except ValueError:  # a broken recipe file is the launcher's to report, not this hint's
            continue
        path = found.openrlhf.get(key)
        if found.data.get(builder) and path and os.path.abspath(str(path)) in wanted:
            return name, [str(a) for a in found.data[builder]]
    return None


def _flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv[:-1] else None


def prepare_hint(prompt_dataset: str | None, recipe: str | None, key: str = "data.prompt_dataset") -> str | None:
    """The `lead-recipes data ...` command that builds the missing prompt data (key "eval.dataset": the eval
    data), and where its source is expected when that is missing too (`${sources}` = $LEAD_RECIPES_SOURCES, default
    ./data/sources)."""
    found = _prepare_of(prompt_dataset, recipe, key)
    if found is None:
        return None
    name, prepare = found
    hint = (
        f"{PROG}: build the {BUILDERS[key][1]} (recipe {name}) with: {shlex.join(['lead-recipes', 'data', *prepare])}"
    )
    source = _flag(prepare, "--input")
    if source and os.path.isabs(source) and not os.path.exists(source):
        hint += (
            f"\n{PROG}: its source file {os.path.basename(source)} is missing: expected at {source} (the "
            "sources directory is $LEAD_RECIPES_SOURCES, default ./data/sources)"
        )
    return hint


def build_missing_data(prompt_dataset: str | None, recipe: str | None, key: str = "data.prompt_dataset") -> bool:
    """A real run whose prompt dataset is missing builds it first, in-process (lead_recipes.data.main), when the
    recipe's `data.prepare` is a `build` that writes exactly that missing path from a source file that exists
    (key "eval.dataset": the eval dataset and `data.prepare_eval`, Laser-D's monitor set). True if it built it; on
    failure its partial output is removed and the preflight reports the data missing."""
    missing = [p for p in _dataset_paths(prompt_dataset) if not os.path.exists(p)]
    what = BUILDERS[key][1]
    found = _prepare_of(prompt_dataset, recipe, key) if missing else None
    if found is None:
        return False
    name, prepare = found
    source, out = _flag(prepare, "--input"), _flag(prepare, "--output")
    if (
        prepare[0] != "build"
        or not source
        or not os.path.isfile(source)
        or not out
        or os.path.abspath(out) not in missing
    ):
        return False
    print(
        f"{PROG}: {what} {out} is missing; building it (recipe {name}) from {source}: "
        f"{shlex.join(['lead-recipes', 'data', *prepare])}",
        flush=True,
    )
    from lead_recipes import data

    try:
        rc = data.main(list(prepare))
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - reported; the preflight then names the missing data
        rc = f"{type(exc).__name__}: {exc}"
    sys.stdout.flush()
    if rc == 0 and os.path.exists(out):
        return True
    if os.path.exists(out):  # ours and incomplete: it did not exist before
        os.remove(out)
    print(f"{PROG}: building the {what} failed ({rc})", file=sys.stderr, flush=True)
    return False
