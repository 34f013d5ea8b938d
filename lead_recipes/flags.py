"""The `--recipe.*` flags of `lead-recipes train`, `lead-recipes replay` and the recipe files, generated from
`lead_recipes.methods.config` (defaults, ranges, help). Flags are dotted like OpenRLHF's (dest
"recipe.lead.aggregator", which OpenRLHF's `hierarchize` nests); `recipe_config(args)` gives the validated
`RecipeConfig`, `recipe_argv(config)` the flags back. Torch-free; it parses, it computes nothing. See docs/methods.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
from typing import Any, Mapping

from lead_recipes.methods.config import DEFAULT_METHOD, METHODS, SECTIONS, RecipeConfig, base_type, flag


def add_recipe_flags(parser: argparse.ArgumentParser) -> None:
    """Add every --recipe.* flag to `parser` (one argument group per method section)."""
    group = parser.add_argument_group("recipe", "length-efficient RL method (lead-recipes)")
    group.add_argument(
        "--recipe.method",
        dest="recipe.method",
        default=DEFAULT_METHOD,
        choices=METHODS,
        help=f"advantage method (default: {DEFAULT_METHOD}); DRPO is a loss and not supported",
    )
    for section, config in SECTIONS.items():
        g = parser.add_argument_group(f"recipe.{section}")
        for f in dataclasses.fields(config):
            typ = base_type(f)
            kw: dict[str, Any] = {
                "dest": f"recipe.{section}.{f.name}",
                "default": f.default,
                "help": f.metadata.get("help", ""),  # the formatter shows the default, once
            }
            if typ is bool:  # a recipe may turn a switch on, so the command line can turn it off: --no-recipe.…
                kw["action"] = argparse.BooleanOptionalAction
            else:
                kw["type"] = typ
                kw["metavar"] = typ.__name__.upper()
                if "choices" in f.metadata:
                    kw["choices"] = f.metadata["choices"]
                    kw["metavar"] = "{" + ",".join(f.metadata["choices"]) + "}"
            g.add_argument(flag(section, f.name), **kw)


def recipe_config(args: argparse.Namespace) -> RecipeConfig:
    """The validated RecipeConfig from parsed args: flat dests ("recipe.lead.aggregator") or an already
    hierarchized `args.recipe`. Missing flags take their defaults; ValueError names a bad flag."""
    if isinstance(getattr(args, "recipe", None), (RecipeConfig, types.SimpleNamespace, argparse.Namespace, Mapping)):
        return RecipeConfig.of(args.recipe)
    nested: dict[str, Any] = {}
    for key, value in vars(args).items():
        if not key.startswith("recipe."):
            continue
        parts = key.split(".")[1:]
        if len(parts) == 1:
            nested[parts[0]] = value
        else:
            nested.setdefault(parts[0], {})[parts[1]] = value
    return RecipeConfig.of(nested)


def recipe_argv(recipe: Any, only_changed: bool = True) -> list[str]:
    """The --recipe.* command-line flags that reproduce `recipe` (non-default ones only, by default)."""
    cfg, default = RecipeConfig.of(recipe), RecipeConfig()
    argv: list[str] = []
    if not only_changed or cfg.method != default.method:
        argv += ["--recipe.method", str(cfg.method)]
    for section, config in SECTIONS.items():
        for f in dataclasses.fields(config):
            v, d = getattr(getattr(cfg, section), f.name), getattr(getattr(default, section), f.name)
            if only_changed and v == d:
                continue
            if base_type(f) is bool:
                argv.append(flag(section, f.name) if v else "--no-" + flag(section, f.name)[2:])
            elif v is not None:
                argv += [flag(section, f.name), repr(v) if isinstance(v, float) else str(v)]
    return argv
