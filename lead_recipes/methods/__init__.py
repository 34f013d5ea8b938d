"""Group-advantage methods: the registry of method names and `build_method`.

A method maps one rollout batch of M prompts × G rollouts (correctness, lengths, optional truncation/repetition
flags) to per-rollout shaped rewards, per-rollout scalar advantages (before OpenRLHF broadcasts them over tokens) and
a fixed set of named statistics. Each method lives in its own module as a pure tensor function; its `Method` class
wraps that function and, for LEAD, Leash and the composed method, a controller whose state goes into checkpoints.

The shared types and base class (RolloutBatch, MethodOutput, Method) are in `methods.base`, every hyperparameter in `methods.config`.
This module does not import torch at import time (flags and recipes stay importable without the training stack)
and holds no method math. DRPO is not offered: it is a loss, not an advantage (see docs/methods.md).
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from lead_recipes.methods.config import RecipeConfig, validate

if TYPE_CHECKING:  # pragma: no cover
    from lead_recipes.methods.base import Method

# method name -> (module, Method subclass); imported lazily so `import lead_recipes.methods` stays torch-free
_REGISTRY = {
    "grpo": ("lead_recipes.methods.grpo", "GrpoMethod"),
    "grpo-scalarized": ("lead_recipes.methods.grpo", "ScalarizedMethod"),
    "gdpo": ("lead_recipes.methods.gdpo", "GdpoMethod"),
    "lead": ("lead_recipes.methods.lead", "LeadMethod"),
    "grpo-lead": ("lead_recipes.methods.grpo_lead", "GrpoLeadMethod"),
    "leash": ("lead_recipes.methods.leash", "LeashMethod"),
    "shorter-better": ("lead_recipes.methods.shorter_better", "ShorterBetterMethod"),
    "composed": ("lead_recipes.methods.composed", "ComposedMethod"),
}


def build_method(config: RecipeConfig | None = None) -> "Method":
    """The method `config.method` selects, built from a validated RecipeConfig (default: LEAD with its defaults).
    Flags and YAML become a RecipeConfig through lead_recipes.flags.recipe_config or RecipeConfig.of."""
    config = RecipeConfig() if config is None else config
    if not isinstance(config, RecipeConfig):
        raise TypeError(f"build_method takes a RecipeConfig, got {type(config).__name__} (RecipeConfig.of turns a "
                        "mapping or namespace into one)")
    validate(config)
    module_name, cls_name = _REGISTRY[config.method]
    return getattr(importlib.import_module(module_name), cls_name).from_config(config)
