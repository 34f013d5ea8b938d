"""Group-advantage methods: the types every caller sees, and `build_method`.

A method maps one rollout batch of M prompts × G rollouts (correctness, lengths, optional truncation/repetition
flags) to per-rollout shaped rewards, per-rollout scalar advantages (before OpenRLHF broadcasts them over tokens) and
a fixed set of named statistics. Each method lives in its own module as a pure tensor function; its `Method` class
wraps that function and, for LEAD, Leash and the composed method, a controller whose state goes into checkpoints.

This module does not import torch at import time (flags and recipes stay importable without the training stack)
and holds no method math. DRPO is not offered: it is a loss, not an advantage (see docs/methods.md).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import torch

METHODS = ("grpo", "grpo-scalarized", "gdpo", "lead", "grpo-lead", "leash", "shorter-better", "composed")

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


@dataclass
class RolloutBatch:
    """One step's rollouts, grouped by prompt: row q holds the G rollouts of prompt q."""
    correct: "torch.Tensor"                    # [M, G] bool
    lengths: "torch.Tensor"                    # [M, G] float32, response tokens incl. EOS (> 0)
    max_new_tokens: int                        # the rollout cap (LEAD B_max, truncation cap)
    truncated: "torch.Tensor | None" = None    # [M, G] bool
    repetitive: "torch.Tensor | None" = None   # [M, G] bool


@dataclass
class MethodOutput:
    rewards: "torch.Tensor"                    # [M, G] float32, the shaped per-rollout reward
    advantages: "torch.Tensor"                 # [M, G] float32, per-rollout scalar (broadcast over tokens later)
    stats: dict[str, float]                    # named, finite; fixed key set per method (Method.STATS_KEYS)


class Method:
    """One method: `step` validates the batch, runs the pure function and advances the controller (if any).

    Subclasses set `name`, `STATS_KEYS` and implement `_step`; stateful ones override `_controller_state` /
    `_load_controller_state`. Instances are plain picklable objects (no closures, no tensors held between steps).
    """
    name: str = ""
    STATS_KEYS: tuple[str, ...] = ()

    def __init__(self, config: Any = None):
        self.config = config

    def step(self, batch: RolloutBatch) -> MethodOutput:
        from lead_recipes.methods.common import check_batch, check_output
        out = self._step(check_batch(batch))
        check_output(out, self.STATS_KEYS)
        return out

    @classmethod
    def from_recipe(cls, ns: Any) -> "Method":  # pragma: no cover - abstract
        """Build from a validated nested recipe namespace (its section of --recipe.* flags)."""
        raise NotImplementedError

    def _step(self, batch: RolloutBatch) -> MethodOutput:  # pragma: no cover - abstract
        """The method on a batch already validated by `check_batch` (bool flags, float64 lengths)."""
        raise NotImplementedError

    # -- checkpoint state: {"method": name, "version": 1, "controller": {...} | None}, JSON-able --
    def state_dict(self) -> dict:
        return {"method": self.name, "version": 1, "controller": self._controller_state()}

    def load_state_dict(self, state: dict) -> None:
        if not isinstance(state, dict) or state.get("method") != self.name:
            got = state.get("method") if isinstance(state, dict) else type(state).__name__
            raise ValueError(f"recipe state is for method {got!r}, but this run uses --recipe.method {self.name}")
        if state.get("version") != 1:
            raise ValueError(f"unsupported recipe state version {state.get('version')!r} (expected 1)")
        self._load_controller_state(state.get("controller"))

    def _controller_state(self) -> dict | None:
        return None

    def _load_controller_state(self, state: dict | None) -> None:
        if state is not None:
            raise ValueError(f"method {self.name} is stateless but the checkpoint holds controller state")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config!r})"


def build_method(recipe: Any = None) -> Method:
    """Build the method selected by `recipe.method` (default "lead") from a nested namespace of the --recipe.*
    flags (`lead_recipes.flags.recipe_namespace`). Missing sections/fields take their defaults; values are
    validated (ValueError naming the flag)."""
    from lead_recipes.flags import default_recipe, merge_recipe, validate_recipe
    ns = default_recipe() if recipe is None else merge_recipe(recipe)
    validate_recipe(ns)
    module_name, cls_name = _REGISTRY[ns.method]
    cls = getattr(importlib.import_module(module_name), cls_name)
    return cls.from_recipe(ns)


__all__ = ["METHODS", "RolloutBatch", "MethodOutput", "Method", "build_method"]
