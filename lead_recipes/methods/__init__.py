"""Group-advantage methods (LEAD, GRPO-LEAD, Leash and the baselines) and their controllers. `build_method` returns
the Method of the registry entry (methods.config.REGISTRY) a config names.

One module per method, a pure tensor function and its `Method` class (methods.base); hyperparameters in
methods.config. This module imports no torch at import time (flags and recipes stay light). See docs/methods.md.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from lead_recipes.methods.config import SECTIONS, RecipeConfig, entry, validate

if TYPE_CHECKING:  # pragma: no cover
    from lead_recipes.methods.base import Method


def build_method(config: RecipeConfig | None = None) -> "Method":
    """The method `config.method` selects, built from a validated RecipeConfig (default: LEAD with its defaults).
    Flags and YAML become a RecipeConfig through lead_recipes.flags.recipe_config or RecipeConfig.of."""
    config = RecipeConfig() if config is None else config
    if not isinstance(config, RecipeConfig):
        raise TypeError(
            f"build_method takes a RecipeConfig, got {type(config).__name__} (RecipeConfig.of turns a "
            "mapping or namespace into one)"
        )
    validate(config)
    with warnings.catch_warnings():  # the method's module imports torch, which warns that pynvml is deprecated:
        # printed on every `train --run.dry_run_enable` or `replay` that builds one, and nothing the user can act on
        warnings.filterwarnings("ignore", message="The pynvml package is deprecated", category=FutureWarning)
        return entry(config.method).load().from_config(config)


def sections_read(method: "Method | str") -> dict[str, Any]:
    """{section: config} of every `--recipe.<section>.*` section `method` reads: the config dataclasses its
    instance holds (a method name is built with the defaults), e.g. gdpo reads `gdpo` and `lead`."""
    if isinstance(method, str):
        method = build_method(RecipeConfig(method=method))
    by_class = {cls: name for name, cls in SECTIONS.items()}
    return {by_class[type(v)]: v for v in vars(method).values() if type(v) in by_class}
