"""The `--recipe.*` flags, defined once for `lead-recipes train`, `lead-recipes replay` and the recipe files.

Flags follow OpenRLHF's dotted style (`--recipe.lead.aggregator min_correct`; dest "recipe.lead.aggregator", which
OpenRLHF's `hierarchize` turns into `args.recipe.lead.aggregator`); booleans end in `_enable` and are store_true.
Every flag except `--recipe.method` is generated from the config dataclasses in `lead_recipes.methods.config`, so
the defaults live in one place. This module is torch-free; it parses and validates, it computes nothing.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import types
from typing import Any, Mapping

from lead_recipes.methods import METHODS
from lead_recipes.methods.config import SECTIONS

DEFAULT_METHOD = "lead"


def _fields(section: str):
    return dataclasses.fields(SECTIONS[section])


def _flag(section: str, name: str) -> str:
    return f"--recipe.{section}.{name}"


def _base_type(f: dataclasses.Field):
    # annotations are strings (from __future__ import annotations): "float", "int | None", "str", "bool"
    ann = str(f.type).replace(" ", "")
    for name, typ in (("bool", bool), ("int", int), ("float", float), ("str", str)):
        if ann.split("|")[0] == name:
            return typ
    raise TypeError(f"unsupported recipe field type {f.type!r}")  # pragma: no cover - config authoring error


def add_recipe_flags(parser: argparse.ArgumentParser) -> None:
    """Add every --recipe.* flag to `parser` (one argument group per method section)."""
    group = parser.add_argument_group("recipe", "length-efficient RL method (lead-recipes)")
    group.add_argument("--recipe.method", dest="recipe.method", default=DEFAULT_METHOD, choices=METHODS,
                       help=f"advantage method (default {DEFAULT_METHOD}); DRPO is a loss and not supported")
    for section in SECTIONS:
        g = parser.add_argument_group(f"recipe.{section}")
        for f in _fields(section):
            typ = _base_type(f)
            kw: dict[str, Any] = {"dest": f"recipe.{section}.{f.name}", "default": f.default,
                                  "help": f"{f.metadata.get('help', '')} (default: {f.default})"}
            if typ is bool:
                kw["action"] = "store_true"
            else:
                kw["type"] = typ
                kw["metavar"] = typ.__name__.upper()
                if "choices" in f.metadata:
                    kw["choices"] = f.metadata["choices"]
                    kw["metavar"] = "{" + ",".join(f.metadata["choices"]) + "}"
            g.add_argument(_flag(section, f.name), **kw)


def default_recipe() -> types.SimpleNamespace:
    """The nested namespace of all defaults (what an empty command line gives)."""
    ns = types.SimpleNamespace(method=DEFAULT_METHOD)
    for section in SECTIONS:
        setattr(ns, section, types.SimpleNamespace(**{f.name: f.default for f in _fields(section)}))
    return ns


def _as_mapping(x: Any) -> Mapping:
    if isinstance(x, Mapping):
        return x
    if isinstance(x, (types.SimpleNamespace, argparse.Namespace)):
        return vars(x)
    raise ValueError(f"recipe must be a namespace or a mapping, got {type(x).__name__}")


def merge_recipe(recipe: Any) -> types.SimpleNamespace:
    """Defaults overlaid with `recipe` (nested namespace or nested dict, e.g. from a YAML recipe). Unknown keys →
    ValueError naming the flag."""
    ns = default_recipe()
    for key, value in _as_mapping(recipe).items():
        if key == "method":
            ns.method = value
        elif key in SECTIONS:
            sec = getattr(ns, key)
            types_ = {f.name: _base_type(f) for f in _fields(key)}
            for name, v in _as_mapping(value).items():
                if name not in types_:
                    raise ValueError(f"{_flag(key, name)} is not a recipe flag")
                if types_[name] is float and isinstance(v, int) and not isinstance(v, bool):
                    v = float(v)   # YAML `4096` for a float flag: keep controller state plain floats
                setattr(sec, name, v)
        else:
            raise ValueError(f"--recipe.{key} is not a recipe flag or section")
    return ns


def recipe_namespace(args: argparse.Namespace) -> types.SimpleNamespace:
    """The nested recipe namespace from parsed args: flat dests ("recipe.lead.aggregator") or an already
    hierarchized `args.recipe`. Missing flags take their defaults."""
    if isinstance(getattr(args, "recipe", None), (types.SimpleNamespace, Mapping)):
        return merge_recipe(args.recipe)
    nested: dict[str, Any] = {}
    for key, value in vars(args).items():
        if not key.startswith("recipe."):
            continue
        parts = key.split(".")[1:]
        if len(parts) == 1:
            nested[parts[0]] = value
        else:
            nested.setdefault(parts[0], {})[parts[1]] = value
    return merge_recipe(nested)


def recipe_argv(recipe: Any, only_changed: bool = True) -> list[str]:
    """The --recipe.* command-line flags that reproduce `recipe` (non-default ones only, by default)."""
    ns, default = merge_recipe(recipe), default_recipe()
    argv: list[str] = []
    if not only_changed or ns.method != default.method:
        argv += ["--recipe.method", str(ns.method)]
    for section in SECTIONS:
        for f in _fields(section):
            v, d = getattr(getattr(ns, section), f.name), getattr(getattr(default, section), f.name)
            if only_changed and v == d:
                continue
            if _base_type(f) is bool:
                if v:
                    argv.append(_flag(section, f.name))
                elif d:  # pragma: no cover - no default-True booleans exist
                    raise ValueError(f"{_flag(section, f.name)} cannot be turned off from the command line")
            elif v is not None:
                argv += [_flag(section, f.name), repr(v) if isinstance(v, float) else str(v)]
    return argv


# (section, field) -> (predicate, what it must be); None-valued optional fields are skipped
_CHECKS: dict[tuple[str, str], tuple[Any, str]] = {
    ("grpo_scalarized", "correct_weight"): (lambda v: v >= 0, "≥ 0"),
    ("grpo_scalarized", "length_weight"): (lambda v: v >= 0, "≥ 0"),
    ("grpo_scalarized", "length_threshold"): (lambda v: v > 0, "> 0"),
    ("gdpo", "correct_weight"): (lambda v: v >= 0, "≥ 0"),
    ("gdpo", "length_weight"): (lambda v: v >= 0, "≥ 0"),
    ("gdpo", "length_threshold"): (lambda v: v > 0, "> 0"),
    ("lead", "l_min"): (lambda v: v > 0, "> 0"),
    ("lead", "b_max"): (lambda v: v > 0, "> 0"),
    ("lead", "alpha"): (lambda v: v > 0, "> 0"),
    ("lead", "beta_ema"): (lambda v: 0 <= v < 1, "in [0, 1)"),
    ("lead", "lambda_min"): (lambda v: 0 <= v <= 1, "in [0, 1]"),
    ("lead", "static_lambda_c"): (lambda v: 0 <= v <= 1, "in [0, 1]"),
    ("grpo_lead", "alpha"): (lambda v: v >= 0, "≥ 0"),
    ("grpo_lead", "weight_min"): (lambda v: v > 0, "> 0"),
    ("grpo_lead", "weight_max"): (lambda v: v > 0, "> 0"),
    ("grpo_lead", "rho0"): (lambda v: 0 <= v <= 1, "in [0, 1]"),
    ("grpo_lead", "ref_code_length_gate_tokens"): (lambda v: v > 0, "> 0"),
    ("leash", "target_length"): (lambda v: v > 0, "> 0"),
    ("leash", "lr"): (lambda v: v > 0, "> 0"),
    ("leash", "lambda_min"): (lambda v: v >= 0, "≥ 0"),
    ("leash", "adam_beta1"): (lambda v: 0 <= v < 1, "in [0, 1)"),
    ("leash", "adam_beta2"): (lambda v: 0 <= v < 1, "in [0, 1)"),
    ("leash", "adam_eps"): (lambda v: v > 0, "> 0"),
    ("shorter_better", "alpha"): (lambda v: v > 0, "> 0"),
    ("shorter_better", "beta"): (lambda v: v >= 0, "≥ 0"),
    ("composed", "budget_tokens"): (lambda v: v > 0, "> 0"),
}


def validate_recipe(ns: Any) -> None:
    """Raise ValueError naming the offending --recipe.* flag when a value has the wrong type or range."""
    if getattr(ns, "method", None) not in METHODS:
        raise ValueError(f"--recipe.method must be one of {', '.join(METHODS)}, got {getattr(ns, 'method', None)!r}"
                         + (" (DRPO is a loss, not an advantage method: not supported)"
                            if str(getattr(ns, "method", "")).lower() == "drpo" else ""))
    for section in SECTIONS:
        sec = getattr(ns, section, None)
        if sec is None:
            raise ValueError(f"recipe section --recipe.{section}.* is missing")
        for f in _fields(section):
            flag, v = _flag(section, f.name), getattr(sec, f.name, f.default)
            typ = _base_type(f)
            if v is None:
                if f.default is None:
                    continue
                raise ValueError(f"{flag} must be set (default {f.default})")
            if typ is bool:
                if not isinstance(v, bool):
                    raise ValueError(f"{flag} must be true or false, got {v!r}")
                continue
            if typ is str:
                if v not in f.metadata.get("choices", (v,)):
                    raise ValueError(f"{flag} must be one of {', '.join(f.metadata['choices'])}, got {v!r}")
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or (typ is int and v != int(v)):
                raise ValueError(f"{flag} must be a{'n integer' if typ is int else ' number'}, got {v!r}")
            if not math.isfinite(v):
                raise ValueError(f"{flag} must be finite, got {v!r}")
            check = _CHECKS.get((section, f.name))
            if check and not check[0](v):
                raise ValueError(f"{flag} must be {check[1]}, got {v!r}")
    for section in ("grpo_scalarized", "gdpo"):
        sec = getattr(ns, section)
        if sec.correct_weight == 0 and sec.length_weight == 0:
            raise ValueError(f"--recipe.{section}.correct_weight and --recipe.{section}.length_weight are both 0")
    if ns.method == "composed" and ns.grpo_lead.ref_code_rejection_enable:
        raise ValueError("--recipe.grpo_lead.ref_code_rejection_enable is not supported by --recipe.method composed "
                         "(group rejection is a GRPO-LEAD training-loop option, not part of its reweighting)")
    le = ns.leash
    if not le.lambda_min <= le.lambda_max:
        raise ValueError(f"--recipe.leash.lambda_max must be ≥ --recipe.leash.lambda_min ({le.lambda_min}), "
                         f"got {le.lambda_max}")
    if not le.lambda_min <= le.lambda_init <= le.lambda_max:
        raise ValueError(f"--recipe.leash.lambda_init must be in [lambda_min, lambda_max] = "
                         f"[{le.lambda_min}, {le.lambda_max}], got {le.lambda_init}")
