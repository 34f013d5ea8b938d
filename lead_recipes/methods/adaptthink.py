"""AdaptThink (Zhang et al., arXiv 2505.13417; the paper body is unverified, the rule is the authors' code,
THU-KEG/AdaptThink `adapt_think_reward_manager.py` and `adapt_think_core_algos.py`): R = acc − r̄_ref(q) +
δ·1[no-think], A = R, with no group baseline. The forced first token (lead_recipes.training.adaptthink_executor) and
the importance-sampled loss (lead_recipes.training.first_token) live outside the advantage step. Stateless.
See docs/methods.md#equations-adaptthink.
"""

from __future__ import annotations

import torch

from lead_recipes.methods.base import Method, MethodOutput, RolloutBatch
from lead_recipes.methods.baseline_config import AdaptThinkConfig
from lead_recipes.methods.common import BASE_STATS, finish
from lead_recipes.methods.config import RecipeConfig


def _required(b: RolloutBatch) -> None:
    missing = [k for k in ("nothink", "think_once", "ref_acc") if getattr(b, k) is None]
    if missing:
        raise ValueError(
            f"--recipe.method adaptthink needs {', '.join(missing)} per rollout (training: the AdaptThink executor "
            "--train.agent_func_path reports nothink and ref_acc, the reward function think_once; replay: each "
            'group\'s "nothink", "ref_acc" and "think_once")'
        )


def adaptthink(
    correct: torch.Tensor,
    nothink: torch.Tensor,
    think_once: torch.Tensor,
    ref_acc: torch.Tensor,
    cfg: AdaptThinkConfig,
    length_penalty=0.0,
) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
    """acc = correct ∧ think_once (the code's `<think>`/`</think>` count rule), R = acc − r̄_ref + δ·1[nothink]
    (+ the length penalty), A = R. Returns (R, A, statistics)."""
    acc = (correct & think_once).double()
    r = acc - ref_acc.double()[:, None] + cfg.delta * nothink.double() + length_penalty
    share = nothink.double().mean()
    nothink_acc = float((acc * nothink).sum() / nothink.sum()) if nothink.any() else 0.0
    return (
        r,
        r.clone(),
        {
            "nothink_frac": float(share),
            "nothink_accuracy": nothink_acc,
            "format_ok_frac": float(think_once.double().mean()),
        },
    )


class AdaptThinkMethod(Method):
    """AdaptThink (arXiv 2505.13417; THU-KEG/AdaptThink): R = acc − r̄_ref(q) + δ·1[no-think], A = R, acc = 0 unless
    the response has no `<think>` and one `</think>`; first token forced for round(G·ρ) rollouts, GSPO loss."""

    STATS_KEYS = BASE_STATS + ("nothink_frac", "nothink_accuracy", "format_ok_frac")

    @classmethod
    def from_config(cls, cfg: RecipeConfig) -> "AdaptThinkMethod":
        return cls(cfg.adaptthink)

    def _step(self, b: RolloutBatch) -> MethodOutput:
        _required(b)
        r, a, extra = adaptthink(b.correct, b.nothink, b.think_once, b.ref_acc, self.config, b.length_penalty)
        return finish(b, r, a, extra)
