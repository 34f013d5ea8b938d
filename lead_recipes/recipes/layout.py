"""Checks of a loaded recipe that need no cluster: impossible resource layouts (caught before any allocation;
OpenRLHF would assert only after Ray is up), a `data.max_samples` cut of a file that was not shuffled with a seed,
and the number of training steps the recipe will run (`rollout_steps`). This module starts nothing.
See docs/launch.md#recipes-launchersrecipesyaml.
"""

from __future__ import annotations

import json
import os
import shlex

from lead_recipes.methods import sections_read
from lead_recipes.methods.config import DEFAULT_METHOD
from lead_recipes.recipes import RecipeError
from lead_recipes.recipes.openrlhf_parser import openrlhf_default

REWARD_PLACEMENTS = ("every_node", "head", "none")


def _value(openrlhf: dict, key: str):
    """The recipe's value of OpenRLHF flag `key`, or the installed OpenRLHF's default when the recipe leaves it out."""
    return openrlhf[key] if key in openrlhf else openrlhf_default(key)


def _flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv[:-1] else None


def check_seeded_selection(recipe) -> None:
    """OpenRLHF keeps the first `data.max_samples` rows of the prompt file (before its own shuffle): only a file
    written in a seeded random order (`lead-recipes data build|curriculum --seed`) makes those rows a random draw."""
    if recipe.entrypoint != "train" or recipe.openrlhf.get("data.max_samples") is None:
        return
    prepare = [str(a) for a in recipe.data.get("prepare") or []]
    if "--seed" not in prepare or _flag(prepare, "--output") != recipe.openrlhf.get("data.prompt_dataset"):
        raise RecipeError(
            f"{recipe.path}: key 'data.max_samples': OpenRLHF keeps the first "
            f"{recipe.openrlhf['data.max_samples']} rows of data.prompt_dataset, so the file must be "
            "written in a seeded random order: give data.prepare a --seed and the same --output "
            f"(now: {shlex.join(prepare) or 'no data.prepare'})"
        )


def unseeded_file(recipe) -> str | None:
    """Why an existing prompt file may not be cut by data.max_samples (its build report records no seed), or None."""
    path = recipe.openrlhf.get("data.prompt_dataset")
    if recipe.openrlhf.get("data.max_samples") is None or not path or not os.path.isfile(path):
        return None
    try:
        seed = json.loads(open(f"{path}.report.json", encoding="utf-8").read()).get("seed")
    except (OSError, ValueError):
        seed = None
    return (
        None
        if seed is not None
        else (
            f"data.max_samples keeps the first rows of {path}, whose report "
            f"({path}.report.json) records no shuffle seed; rebuild it with "
            "the recipe's data.prepare"
        )
    )


def rollout_steps(recipe) -> int | None:
    """Training steps (rollout batches; OpenRLHF's global_step) the recipe runs: episodes x ceil(rows / rollout
    batch). rows = data.max_samples, or the exact `--rows` its data.prepare writes, whichever is smaller; None when
    the row count is only known once the data is built."""
    o = recipe.openrlhf
    prepare = [str(a) for a in recipe.data.get("prepare") or []]
    known = [int(x) for x in (o.get("data.max_samples"), _flag(prepare, "--curriculum.rows")) if x is not None]
    if recipe.entrypoint != "train" or not known:
        return None
    return _steps(o, min(known))


def _steps(o: dict, rows: int) -> int:
    # OpenRLHF 0.11.2 trains a short last batch too: its prompt loader drops nothing (batch size 1) and
    # SamplesGenerator hands over the partial chunk, which train_step counts as a global_step like any other
    return int(_value(o, "train.num_episodes")) * -(-rows // int(_value(o, "rollout.batch_size")))


def planned_steps(recipe) -> int | None:
    """`rollout_steps`, or, when the prompt file exists here, episodes x ceil(its rows (capped by data.max_samples) /
    rollout batch); None when neither is known."""
    known = rollout_steps(recipe)
    path = recipe.openrlhf.get("data.prompt_dataset")
    if known is not None or recipe.entrypoint != "train" or not path or not os.path.isfile(str(path)):
        return known
    with open(path, "rb") as f:
        rows = sum(1 for line in f if line.strip())
    cap = recipe.openrlhf.get("data.max_samples")
    rows = min(rows, int(cap)) if cap is not None else rows
    return _steps(recipe.openrlhf, rows)


def checkpoint_warning(recipe) -> str | None:
    """One line when the run ends before its first checkpoint (fewer steps than ckpt.save_steps): a requeued or
    preempted job then has nothing to resume from."""
    every, steps = recipe.openrlhf.get("ckpt.save_steps"), planned_steps(recipe)
    if not steps or every is None or int(every) <= 0 or steps >= int(every):
        return None
    return (
        f"lead-recipes launch: warning: the run takes {steps} steps, fewer than ckpt.save_steps {every}, so it writes "
        f"no checkpoint to resume from; --set ckpt.save_steps={max(1, steps // 2)} (or more data or episodes)"
    )


def no_steps(recipe) -> str | None:
    """Why the run would take no training step (a prompt file with no rows, or data.max_samples or
    train.num_episodes 0), or None: OpenRLHF would start Ray and vLLM and then save nothing."""
    if planned_steps(recipe) != 0:
        return None
    o = recipe.openrlhf
    return (
        f"the run takes 0 training steps: data.prompt_dataset {o.get('data.prompt_dataset')} has no rows, or "
        f"data.max_samples {o.get('data.max_samples')} or train.num_episodes {_value(o, 'train.num_episodes')} is 0"
    )


def check_layout(recipe) -> None:
    """Impossible resource layouts, caught before any allocation (OpenRLHF would assert only after Ray is up)."""
    o, r, where = recipe.openrlhf, recipe.resources, recipe.path
    if r["reward_placement"] not in REWARD_PLACEMENTS:
        raise RecipeError(
            f"{where}: key 'resources.reward_placement': {r['reward_placement']!r} is not one of "
            f"{list(REWARD_PLACEMENTS)}"
        )
    if r["nodes"] < 1 or r["gpus_per_node"] < 0:
        raise RecipeError(f"{where}: key 'resources.nodes'/'resources.gpus_per_node': need nodes >= 1, gpus >= 0")
    if recipe.entrypoint != "train":
        return
    if o.get("ckpt.disable_ds"):
        raise RecipeError(
            f"{where}: key 'ckpt.disable_ds': resume after preemption needs DeepSpeed checkpoints "
            "(controller state lives in client_states); remove it"
        )
    if r["gpus_per_node"]:
        for key in ("actor.num_gpus_per_node", "ref.num_gpus_per_node", "vllm.tensor_parallel_size"):
            if key in o and int(o[key]) > r["gpus_per_node"]:
                raise RecipeError(
                    f"{where}: key '{key}' = {o[key]} exceeds resources.gpus_per_node = "
                    f"{r['gpus_per_node']} (a node cannot hold it)"
                )
    g = lambda role: int(_value(o, f"{role}.num_nodes")) * int(_value(o, f"{role}.num_gpus_per_node"))  # noqa: E731
    actor = g("actor")
    engines, tp = o.get("vllm.num_engines"), int(_value(o, "vllm.tensor_parallel_size"))
    colocate_all = bool(o.get("train.colocate_all")) and not o.get("train.async_enable")
    if engines and colocate_all and engines * tp != actor:
        raise RecipeError(
            f"{where}: key 'vllm.num_engines': under train.colocate_all, vllm.num_engines x "
            f"vllm.tensor_parallel_size ({engines} x {tp} = {engines * tp}) must equal the actor GPUs "
            f"(actor.num_nodes x actor.num_gpus_per_node = {actor})"
        )
    if (
        (o.get("train.colocate_all") or o.get("train.colocate_actor_ref"))
        and float(_value(o, "algo.kl.init_coef")) > 0
        and g("ref") != actor
    ):
        raise RecipeError(
            f"{where}: key 'ref.num_gpus_per_node': a colocated reference model needs the actor's "
            f"layout ({actor} GPUs), got {g('ref')}"
        )
    needs_ref = float(_value(o, "algo.kl.init_coef")) > 0 or o.get("algo.kl.use_loss")
    total = actor
    if needs_ref and not (o.get("train.colocate_all") or o.get("train.colocate_actor_ref")):
        total += g("ref")
    if engines and not colocate_all:
        total += engines * tp
    have = r["nodes"] * r["gpus_per_node"]
    if have and total > have:
        raise RecipeError(
            f"{where}: key 'resources.gpus_per_node': the layout needs {total} GPUs (actor {actor}"
            f"{', ref ' + str(g('ref')) if total > actor else ''}"
            f"{', vLLM ' + str(engines * tp) if engines and not colocate_all else ''})"
            f" but resources give {r['nodes']} x {r['gpus_per_node']} = {have}"
        )
    for role in ("actor", "ref"):
        if int(_value(o, f"{role}.num_nodes")) > r["nodes"]:
            raise RecipeError(
                f"{where}: key '{role}.num_nodes' = {o.get(f'{role}.num_nodes')} exceeds resources.nodes = {r['nodes']}"
            )
    batch, micro = int(_value(o, "train.batch_size")), int(_value(o, "train.micro_batch_size"))
    if not o.get("train.dynamic_batch_enable") and batch % (micro * actor):
        raise RecipeError(
            f"{where}: key 'train.batch_size' = {batch} is not divisible by train.micro_batch_size x "
            f"actor GPUs = {micro} x {actor}"
        )
    rollout = int(_value(o, "rollout.batch_size")) * int(_value(o, "rollout.n_samples_per_prompt"))
    if rollout % batch:
        raise RecipeError(
            f"{where}: key 'train.batch_size' = {batch} must divide rollout.batch_size x "
            f"rollout.n_samples_per_prompt = {rollout}"
        )
    b_max = recipe.recipe.get("lead.b_max")
    # sections_read builds the method (imports torch), so it is asked last, only when B_max exceeds the cap
    if (
        b_max
        and o.get("rollout.max_new_tokens")
        and int(b_max) > int(o["rollout.max_new_tokens"])
        and "lead" in sections_read(recipe.recipe.get("method", DEFAULT_METHOD))
    ):
        raise RecipeError(
            f"{where}: key 'lead.b_max' = {b_max} exceeds rollout.max_new_tokens = "
            f"{o['rollout.max_new_tokens']} (B_max is the rollout cap, see docs/methods.md)"
        )
    new, max_len = o.get("rollout.max_new_tokens"), int(_value(o, "data.max_len"))
    if new is not None and int(new) >= max_len:
        raise RecipeError(
            f"{where}: key 'rollout.max_new_tokens' = {new} leaves no room for the prompt within "
            f"data.max_len = {max_len}"
        )
