"""What follows the model a recipe runs: its context length against `data.max_len` (from its `config.json` in a local
directory or the Hugging Face cache, never downloaded; recipe loading refuses a recipe over it, and so does the
preflight through lead_recipes/training/context_check.py, so a 4k-context model under a 5,024-token recipe fails
before vLLM starts), and the run's name (its directory, W&B run and Slurm job). See docs/own-data.md.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml

from lead_recipes.recipes import RecipeError

# vLLM 0.29's rule (ModelArchConfigConvertor.derive_max_model_len_and_key, config/model.py _get_and_verify_max_len):
# the smallest of these keys in the text config, model_max_length over all of them; then RoPE scaling: a yarn
# config's original_max_position_embeddings x factor, any other rope type but su/longrope/llama3 x factor
CONTEXT_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)


def config_path(model: str) -> str | None:
    """The model's config.json on this machine (a directory, or the hub cache), or None."""
    if os.path.isdir(model):
        path = os.path.join(model, "config.json")
        return path if os.path.isfile(path) else None
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(model, "config.json")
    except Exception:  # noqa: BLE001 - an invalid repo id is as unknown as an uncached one
        return None
    return cached if isinstance(cached, str) else None


def model_context(model: str | None) -> tuple[int, str] | None:
    """(context length, the key it came from) from the model's local config, or None when it cannot be read."""
    path = config_path(model) if model else None
    if not path:
        return None
    try:
        config = json.loads(open(path, encoding="utf-8").read())
    except (OSError, ValueError):
        return None
    text = config.get("text_config") or config  # a multimodal config nests the language model's
    found = {k: text[k] for k in CONTEXT_KEYS if isinstance(text.get(k), int) and text[k] > 0}
    if not found:
        return None
    key = "model_max_length" if "model_max_length" in found else min(found, key=found.get)
    context, why = found[key], key
    rope = text.get("rope_parameters") or text.get("rope_scaling") or config.get("rope_scaling")
    if not isinstance(rope, dict) or "gemma3" in str(config.get("model_type")):  # Gemma3's length is scaled
        return context, why
    factor = 1.0
    for part in rope.values() if all(isinstance(v, dict) for v in rope.values()) else [rope]:  # per layer type
        kind = part.get("rope_type") or part.get("type")
        if kind not in ("su", "longrope", "llama3"):
            factor = part.get("factor", factor)
            if kind == "yarn" and "original_max_position_embeddings" in part:
                context, why = part["original_max_position_embeddings"], "original_max_position_embeddings"
    if factor and factor != 1:
        context, why = int(context * factor), f"{why} x rope factor {factor}"
    return context, why


def context_problem(model: str | None, max_len: int | None) -> str | None:
    """One line when `max_len` (prompt + response tokens) exceeds the model's context, else None."""
    found = model_context(model)
    if found is None or max_len is None or int(max_len) <= found[0]:
        return None
    context, key = found
    return (
        f"data.max_len {max_len} exceeds {model}'s context of {context} tokens ({key} in its config.json): vLLM "
        f"would refuse to start; set data.max_len to at most {context} and rollout.max_new_tokens below it"
    )


def refuse_over_context(recipe, where: str) -> None:
    """Refuse a training recipe whose data.max_len exceeds its model's context (RecipeError blaming `where`)."""
    problem = context_problem(recipe.openrlhf.get("actor.model_name_or_path"), recipe.openrlhf.get("data.max_len"))
    if problem and recipe.entrypoint == "train":
        raise RecipeError(f"{where}: {problem}")


def run_names(path: Path, raw: dict, given: dict) -> tuple[str, str]:
    """(the run's name, its W&B and Slurm job name). The run's name, which also names its directory, is the recipe
    file's stem, with the model's last path part appended when `--set` gives another model. A
    `logger.wandb.run_name` that `--set` or the file states wins, except the file's own stem, which is the name our
    recipes state for themselves: that one, and one inherited through `extends`, become the run's name in `raw`."""
    openrlhf = raw.get("openrlhf") or {}
    key, model_given = "logger.wandb.run_name", ("openrlhf", "actor.model_name_or_path") in given
    model = str(openrlhf.get("actor.model_name_or_path")).rstrip("/").rsplit("/", 1)[-1]
    name = f"{path.stem}-{model}" if model_given else path.stem
    own = ((yaml.safe_load(path.read_text()) or {}).get("openrlhf") or {}).get(key)
    if key in openrlhf and ("openrlhf", key) not in given and own in (None, path.stem):
        openrlhf[key] = name
    return name, str(openrlhf.get(key) or name)
