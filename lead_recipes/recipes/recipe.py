"""YAML recipes: load, merge (`extends`), override (`--set`), validate against the installed OpenRLHF's and our own
parsers, and render to a `lead-recipes train` command line. This module does not start anything.
Recipe format: docs/launch.md; the source of every value: docs/recipes.md.
"""

from __future__ import annotations

import argparse
import copy
import difflib
import functools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import yaml

from lead_recipes.recipes import RecipeError
from lead_recipes.recipes.layout import check_layout, check_seeded_selection
from lead_recipes.recipes.openrlhf_parser import ENTRYPOINTS, openrlhf_parser
from lead_recipes.recipes.own_model import refuse_over_context, run_names

RECIPES_DIR = Path(__file__).resolve().parents[2] / "launchers" / "recipes"
TOP_KEYS = ("description", "entrypoint", "extends", "after", "data", "resources", "openrlhf", "recipe")
DATA_KEYS = ("prepare", "prepare_eval", "notes")  # prepare_eval: builds eval.dataset (a monitor set)
# The `resources:` keys: type, default (None: unset) and what each does; docs/slurm.md's table is generated from it.
RESOURCES = {
    "nodes": (int, 1, "sbatch `--nodes`"),
    "gpus_per_node": (int, 8, "sbatch `--gpus-per-node`, the GPUs Ray is told per node (0: none, CPU-only dry runs)"),
    "cpus_per_node": (
        int,
        None,
        "sbatch `--cpus-per-task`; unset: the CPUs of the partition's smallest node (`sinfo`). Without a CPU request "
        "many clusters give one CPU, and OpenRLHF, which places one CPU with each GPU, then waits forever",
    ),
    "partition": (str, None, "sbatch `--partition`"),
    "account": (str, None, "sbatch `--account`"),
    "time": (str, "24:00:00", "sbatch `--time`; must be longer than `signal_seconds` (refused otherwise)"),
    "reward_placement": (
        str,
        "every_node",
        "where `lead-recipes serve` runs: a server on each node (each node's vLLM engines grade locally), `head`, "
        "or `none`",
    ),
    "reward_port": (int, None, "reward server port; unset: `29000 + job id mod 3000`, so two jobs on a node get two"),
    "reward_workers": (int, None, "grading processes per reward server (`lead-recipes serve --grade.workers`)"),
    "signal_seconds": (int, 600, "`--signal=B:USR1@S`: the checkpoint warning before the time limit"),
    "requeue": (bool, True, "requeue after a preemption; false: `--no-requeue`, `--sbatch.max_restarts 0`"),
    "mem": (str, "0", "sbatch `--mem`; `0` is all of the node's memory"),
    "constraint": (str, None, "sbatch `--constraint`"),
    "qos": (str, None, "sbatch `--qos`"),
    "save_timeout": (
        int,
        None,
        "seconds the job waits for the requested checkpoint on USR1; unset: sized from the model by slurm/train.sbatch",
    ),
}
RESOURCE_KEYS = {key: spec[0] for key, spec in RESOURCES.items()}
RESOURCE_DEFAULTS = {key: spec[1] for key, spec in RESOURCES.items()}
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_]+)(?::([A-Za-z0-9_.-]+))?\}")


# ---------------------------------------------------------------- parsers (the real ones, built once per process)
@functools.lru_cache(maxsize=None)
def recipe_parser() -> argparse.ArgumentParser:
    """Our --recipe.* flags, defined once in lead_recipes.flags."""
    from lead_recipes.flags import add_recipe_flags

    parser = argparse.ArgumentParser(prog="lead-recipes train", allow_abbrev=False, add_help=False)
    add_recipe_flags(parser)
    return parser


def _actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.option_strings[0][2:]: a for a in parser._actions if a.option_strings and a.option_strings[0] != "-h"}


def _coerce(action: argparse.Action, key: str, value: Any, where: str) -> Any:
    """Check one value the way argparse would; returns the typed value (list for nargs, bool for flags)."""
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse.BooleanOptionalAction)):
        if not isinstance(value, bool):
            raise RecipeError(f"{where}: key {key!r} is a switch; give true or false, not {value!r}")
        return value
    items = value if isinstance(value, list) else [value]
    if action.nargs is None and isinstance(value, list):
        raise RecipeError(f"{where}: key {key!r} takes one value, got a list {value!r}")
    if isinstance(action.nargs, int) and len(items) != action.nargs:
        raise RecipeError(f"{where}: key {key!r} takes {action.nargs} values, got {value!r}")
    out = []
    for item in items:
        if item is None:
            out.append(None)
            continue
        try:
            typed = action.type(str(item)) if action.type else str(item)
        except (TypeError, ValueError) as exc:
            raise RecipeError(f"{where}: key {key!r}: invalid value {item!r} ({exc})") from None
        if action.choices is not None and typed not in action.choices:
            raise RecipeError(f"{where}: key {key!r}: {item!r} is not one of {list(action.choices)}")
        out.append(typed)
    return out if isinstance(value, list) or action.nargs not in (None, "?") else out[0]


def _unknown(key: str, known: Sequence[str], section: str, where: str) -> RecipeError:
    close = difflib.get_close_matches(key, list(known), n=2)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return RecipeError(f"{where}: unknown key {key!r} in {section}{hint}")


# ---------------------------------------------------------------- loading
def recipe_names() -> list[str]:
    return sorted(p.stem for p in RECIPES_DIR.glob("*.yaml"))


def _find(name_or_path: str) -> Path:
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise RecipeError(f"recipe file {path} does not exist")
        return path
    candidate = RECIPES_DIR / f"{name_or_path}.yaml"
    if not candidate.is_file():
        raise RecipeError(f"unknown recipe {name_or_path!r}; known: {', '.join(recipe_names())}")
    return candidate


def read_raw(path: Path, seen: tuple[str, ...] = ()) -> dict:
    """The mapping in recipe file `path` with its `extends` chain merged in and its keys checked; no overrides, no
    placeholders expanded. `seen`: the files that extend it, to refuse a cycle."""
    if str(path.resolve()) in seen:
        raise RecipeError(f"{path}: 'extends' cycle: {' -> '.join(seen)}")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise RecipeError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise RecipeError(f"{path}: a recipe is a mapping of {TOP_KEYS}")
    for key in raw:
        if key not in TOP_KEYS:
            raise _unknown(str(key), TOP_KEYS, "the top level", str(path))
    for section in ("data", "resources", "openrlhf", "recipe"):
        if raw.get(section) is not None and not isinstance(raw[section], dict):
            raise RecipeError(f"{path}: section {section!r} must be a mapping")
    if "extends" not in raw:
        _only_read_sections(raw, set(raw.get("recipe") or ()), str(path))
        return raw
    base = read_raw(
        _find(str(raw["extends"])) if "/" in str(raw["extends"]) else RECIPES_DIR / f"{raw['extends']}.yaml",
        seen + (str(path.resolve()),),
    )
    merged = copy.deepcopy(base)
    merged.pop("after", None)  # a stage's predecessor belongs to that file, not to recipes extending it
    for key, value in raw.items():
        if key in ("data", "resources", "openrlhf", "recipe"):
            merged.setdefault(key, {}).update(value or {})
        elif key != "extends":
            merged[key] = value
    merged["extends"] = raw["extends"]
    _only_read_sections(merged, set(raw.get("recipe") or ()), str(path))
    return merged


def _only_read_sections(raw: dict, own: set[str], where: str, given: dict | None = None) -> None:
    """Keep only the `recipe:` keys of sections the recipe's method reads (methods.config.MethodEntry.sections): an
    inherited key of another section is dropped (a thinkprune recipe extending lead-1.5b does not render
    --recipe.lead.*); one set in `own` (this file's keys, or a --set in `given`) is a RecipeError, as it would do
    nothing. Unknown methods and sections are left for the key checks of load_recipe to name."""
    from lead_recipes.methods.config import DEFAULT_METHOD, METHODS, SECTIONS, entry

    section = raw.get("recipe") or {}
    method = section.get("method", DEFAULT_METHOD)
    if method not in METHODS:
        return
    reads = entry(method).sections
    for key in [k for k in section if "." in str(k)]:
        name = str(key).split(".")[0]
        if name in SECTIONS and name not in reads:
            if key in own:
                at = (given or {}).get(("recipe", key), where)
                raise RecipeError(
                    f"{at}: key {key!r}: --recipe.method {method} does not read --recipe.{name}.* (it reads "
                    f"{', '.join(f'--recipe.{r}.*' for r in reads)}); the setting would do nothing"
                )
            del section[key]


def parse_override(text: str) -> tuple[str, str, Any]:
    """'section.key=value' -> (section, key, value); a bare OpenRLHF flag ('actor.adam.lr=2e-6', 'data.max_len=…':
    `data.` keys other than DATA_KEYS are OpenRLHF's) means the openrlhf section. Values are YAML."""
    if "=" not in text:
        raise RecipeError(f"--set {text!r}: expected key=value")
    key, _, raw_value = text.partition("=")
    key = key.strip().removeprefix("--")
    value = yaml.safe_load(raw_value) if raw_value.strip() else ""
    head, _, rest = key.partition(".")
    if head in ("openrlhf", "recipe", "resources") and rest or (head == "data" and rest in DATA_KEYS):
        return head, rest, value
    if key in ("description", "entrypoint"):
        return key, "", value
    return "openrlhf", key, value


def placeholders(name: str) -> dict[str, str]:
    """${data}: where `lead-recipes data` writes (LEAD_RECIPES_DATA, default ./data); ${sources}: raw source files
    it reads (LEAD_RECIPES_SOURCES, default ./data/sources); ${run}: this run's directory (LEAD_RECIPES_RUN_DIR,
    default <runs>/<name>, `name` the run's: the recipe's, plus the model's when --set gives one); ${run:NAME}:
    recipe NAME's run directory <runs>/NAME, where <runs> is LEAD_RECIPES_RUNS (default ./runs); ${reward_func}:
    the installed lead_recipes/reward/reward_func.py."""
    return {
        "data": os.path.abspath(os.environ.get("LEAD_RECIPES_DATA", "data")),
        "sources": os.path.abspath(os.environ.get("LEAD_RECIPES_SOURCES", os.path.join("data", "sources"))),
        "run": os.path.abspath(os.environ.get("LEAD_RECIPES_RUN_DIR", run_dir_of(name))),
        "reward_func": str(Path(__file__).resolve().parents[1] / "reward" / "reward_func.py"),
    }


def run_dir_of(name: str) -> str:
    """${run:NAME}: where recipe NAME's run writes (the chain's hand-over point between stages)."""
    return os.path.abspath(os.path.join(os.environ.get("LEAD_RECIPES_RUNS", "runs"), name))


def _expand(value: Any, env: dict[str, str], key: str, where: str) -> Any:
    if isinstance(value, list):
        return [_expand(v, env, key, where) for v in value]
    if not isinstance(value, str):
        return value

    def sub(match: re.Match) -> str:
        if match.group(2) is not None:
            if match.group(1) != "run" or match.group(2) not in recipe_names():
                raise RecipeError(
                    f"{where}: key {key!r}: {match.group(0)} names no recipe run; use ${{run:NAME}} "
                    f"with NAME one of {recipe_names()}"
                )
            return run_dir_of(match.group(2))
        if match.group(1) not in env:
            raise RecipeError(f"{where}: key {key!r}: unknown placeholder ${{{match.group(1)}}}; known: {sorted(env)}")
        return env[match.group(1)]

    return _PLACEHOLDER.sub(sub, value)


# ---------------------------------------------------------------- the recipe object
@dataclass
class Recipe:
    name: str
    path: str
    description: str
    entrypoint: str
    openrlhf: dict[str, Any]
    recipe: dict[str, Any]
    resources: dict[str, Any]
    data: dict[str, Any] = field(default_factory=dict)
    run_name: str = ""  # the W&B run and Slurm job name (`own_model.run_names`)
    run_dir: str = ""  # ${run}: follows the model (`own_model.run_names`)
    extends: str | None = None
    after: str | None = None

    def train_argv(self) -> list[str]:
        """Flags for `lead-recipes train` (OpenRLHF flags, then --recipe.* flags); for an sft recipe, the
        flags of openrlhf.cli.train_sft. Switches appear only when true; lists expand to nargs values."""
        return _section_argv("--", self.openrlhf) + _section_argv("--recipe.", self.recipe)

    def command(self) -> list[str]:
        """The full command that runs this recipe on an existing Ray cluster (train) or under deepspeed (sft).
        `--recipe.name none`: the rendered flags are the whole recipe, so `train` must not lay them over the
        method's reference recipe (a switch this recipe leaves off would come back from the base)."""
        if self.entrypoint == "sft":
            return ["deepspeed", "--module", ENTRYPOINTS["sft"], *self.train_argv()]
        return ["lead-recipes", "train", *self.train_argv(), "--recipe.name", "none"]

    def actor_gpus(self) -> int:
        return int(self.openrlhf.get("actor.num_nodes", 1)) * int(self.openrlhf.get("actor.num_gpus_per_node", 8))

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "path": self.path,
            "description": self.description,
            "entrypoint": self.entrypoint,
            "extends": self.extends,
            "after": self.after,
            "data": copy.deepcopy(self.data),
            "resources": dict(self.resources),
            "openrlhf": copy.deepcopy(self.openrlhf),
            "recipe": copy.deepcopy(self.recipe),
        }


def _section_argv(prefix: str, section: dict[str, Any]) -> list[str]:
    argv: list[str] = []
    for key, value in section.items():
        if value is None or value is False:
            continue
        argv.append(prefix + key)
        if value is not True:
            argv += [_fmt(v) for v in value] if isinstance(value, list) else [_fmt(value)]
    return argv


def _fmt(value: Any) -> str:
    return repr(value) if isinstance(value, float) and "e" in repr(value) else str(value)


def load_recipe(name_or_path: str, overrides: Sequence[str] = ()) -> Recipe:
    """Load a recipe by name (file stem in launchers/recipes/) or path, apply ``key=value`` overrides, expand
    placeholders and validate everything (RecipeError naming the key on the first problem)."""
    path = _find(name_or_path)
    raw = read_raw(path)
    where = str(path)
    given: dict[tuple[str, str], str] = {}  # (section, key) -> the --set that gave it: errors blame the flag
    for text in overrides:
        section, key, value = parse_override(text)
        if section in ("description", "entrypoint"):
            raw[section] = value
        else:
            raw.setdefault(section, {})[key] = value
        given[section, key] = f"--set {text}"
    if any(section == "recipe" for section, _ in given):  # a --set method drops the old method's sections
        _only_read_sections(raw, {key for section, key in given if section == "recipe"}, str(path), given)

    def origin(section: str, key: str) -> str:
        return given.get((section, key), where)

    (run, run_name), entrypoint = run_names(path, raw, given), raw.get("entrypoint", "train")
    if entrypoint not in ENTRYPOINTS:
        raise RecipeError(f"{where}: key 'entrypoint': {entrypoint!r} is not one of {list(ENTRYPOINTS)}")
    env = placeholders(run)

    known = _actions(openrlhf_parser(entrypoint))
    openrlhf_values = {}
    for key, value in (raw.get("openrlhf") or {}).items():
        at = origin("openrlhf", key)
        if key not in known:
            raise _unknown(key, known, "openrlhf", at)
        openrlhf_values[key] = _coerce(known[key], key, _expand(value, env, key, at), at)

    recipe_values = {}
    if raw.get("recipe"):
        if entrypoint != "train":
            raise RecipeError(f"{where}: section 'recipe' only applies to entrypoint 'train'")
        known_recipe = {k.removeprefix("recipe."): a for k, a in _actions(recipe_parser()).items()}
        for key, value in raw["recipe"].items():
            at = origin("recipe", key)
            if key not in known_recipe:
                raise _unknown(key, known_recipe, "recipe", at)
            recipe_values[key] = _coerce(known_recipe[key], key, _expand(value, env, key, at), at)

    resources = dict(RESOURCE_DEFAULTS)
    for key, value in (raw.get("resources") or {}).items():
        if key not in RESOURCE_KEYS:
            raise _unknown(key, RESOURCE_KEYS, "resources", origin("resources", key))
        typ = RESOURCE_KEYS[key]
        if value is not None and (not isinstance(value, typ) or (typ is int and isinstance(value, bool))):
            raise RecipeError(
                f"{origin('resources', key)}: key 'resources.{key}' must be {RESOURCE_KEYS[key].__name__}, got "
                f"{value!r}"
            )
        resources[key] = value
    after = raw.get("after")
    if after is not None and str(after) not in recipe_names():
        raise RecipeError(f"{where}: key 'after': {after!r} is not a recipe; known: {', '.join(recipe_names())}")
    data = dict(raw.get("data") or {})
    for key in data:
        if key not in DATA_KEYS:
            raise _unknown(key, DATA_KEYS, "data", origin("data", key))
    for key in ("prepare", "prepare_eval"):
        if data.get(key) is not None:
            data[key] = [str(_expand(str(v), env, f"data.{key}", where)) for v in data[key]]

    recipe = Recipe(
        name=path.stem,
        path=where,
        description=str(raw.get("description", "")),
        entrypoint=entrypoint,
        openrlhf=openrlhf_values,
        recipe=recipe_values,
        resources=resources,
        data=data,
        run_name=run_name,
        run_dir=env["run"],
        extends=raw.get("extends"),
        after=None if after is None else str(after),
    )
    check_layout(recipe)
    check_seeded_selection(recipe)
    refuse_over_context(recipe, origin("openrlhf", "data.max_len"))
    if recipe_values:
        _check_recipe_semantics(recipe)
    return recipe


def _check_recipe_semantics(recipe: Recipe) -> None:
    """Validate the recipe's `recipe:` section as `lead-recipes train` would (lead_recipes.methods.config)."""
    from lead_recipes.flags import recipe_config

    args = recipe_parser().parse_args(_section_argv("--recipe.", recipe.recipe))
    try:
        recipe_config(args)
    except ValueError as exc:
        raise RecipeError(f"{recipe.path}: section 'recipe': {exc}") from None
