"""What every method shares: `RolloutBatch` in, `MethodOutput` out, the `Method` base class (its name from the registry,
its controller's checkpoint state) and the validation every batch and output passes (a ValueError naming the
prompt, never a NaN later). No method math; imports torch (torch-free callers import methods.config).
See docs/methods.md#python-api.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from lead_recipes.methods.config import RecipeConfig, method_name


@dataclass
class RolloutBatch:
    """One step's rollouts, grouped by prompt: row q holds the G rollouts of prompt q."""

    correct: "torch.Tensor"  # [M, G] bool
    lengths: "torch.Tensor"  # [M, G] float32, response tokens incl. EOS (> 0)
    max_new_tokens: int  # the rollout cap (LEAD B_max, truncation cap)
    truncated: "torch.Tensor | None" = None  # [M, G] bool
    repetitive: "torch.Tensor | None" = None  # [M, G] bool
    # [M, G] bool: prompt + response has `</think>` with a `\boxed` before it (GRPO-LEAD code's format rule)
    think_boxed: "torch.Tensor | None" = None
    # [M, G] bool: prompt + response has `<think>`, `</think>` and a `\boxed{}` after it (Laser's format rule)
    answer_boxed: "torch.Tensor | None" = None
    # [M, G] bool: the response (forced first token included) has no `<think>`, exactly one `</think>` and a
    # `\boxed` after it (AdaptThink code's count rule)
    think_once: "torch.Tensor | None" = None
    nothink: "torch.Tensor | None" = None  # [M, G] bool: the first response token was forced to no-think (AdaptThink)
    ref_acc: "torch.Tensor | None" = None  # [M] float in [0, 1]: the reference model's accuracy (AdaptThink label key)
    n_gold: "torch.Tensor | None" = None  # [M] float, per-prompt target tokens (L1's "Think for N tokens.")
    l1_max: "torch.Tensor | None" = None  # [M] bool, the prompt asks for "maximum N tokens" (L1-Max)
    # [M, G] float: OpenRLHF's length penalties (DAPO overlong, ProRL stop-properly) as a reward change; every method
    # adds it to its length channel, else to its reward, before group normalisation (None = 0)
    length_penalty: "torch.Tensor | None" = None


@dataclass
class MethodOutput:
    rewards: "torch.Tensor"  # [M, G] float32, the shaped per-rollout reward
    advantages: "torch.Tensor"  # [M, G] float32, per-rollout scalar (broadcast over tokens later)
    stats: dict[str, float]  # named, finite; fixed key set per method (Method.STATS_KEYS)


class Method:
    """One method: `step` validates the batch, runs the pure function and advances the controller (if any).

    Subclasses set `STATS_KEYS` and implement `from_config` and `_step`; stateful ones set `controller` (an
    object with state_dict / load_state_dict). Instances are plain picklable objects (no closures, no tensors held).
    """

    STATS_KEYS: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The `--recipe.method` name (from the registry entry naming this class or its nearest registered base)."""
        return method_name(type(self))

    def __init__(self, config: Any = None):
        self.config = config

    def step(self, batch: RolloutBatch) -> MethodOutput:
        out = self._step(check_batch(batch))
        check_output(out, self.STATS_KEYS)
        return out

    @classmethod
    def from_config(cls, cfg: RecipeConfig) -> "Method":  # pragma: no cover - abstract
        """Build from a validated RecipeConfig (the method reads its own section and any it shares)."""
        raise NotImplementedError

    def _step(self, batch: RolloutBatch) -> MethodOutput:  # pragma: no cover - abstract
        """The method on a batch already validated by `check_batch` (bool flags, float64 lengths)."""
        raise NotImplementedError

    # checkpoint state: the controller's (plain JSON), None for a stateless method; training.resume wraps it
    controller: Any = None

    def state_dict(self) -> dict | None:
        return None if self.controller is None else self.controller.state_dict()

    def load_state_dict(self, state: dict | None) -> None:
        """Restore the controller (ValueError on corrupt state, nothing changed)."""
        if self.controller is not None:
            self.controller.load_state_dict(state)
        elif state is not None:
            raise ValueError(f"method {self.name} is stateless but the checkpoint holds controller state")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config!r})"


def _first_bad_row(bad: torch.Tensor) -> int:
    return int(bad.reshape(bad.shape[0], -1).any(1).nonzero()[0, 0])


def _as_bool(name: str, x, shape) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if tuple(x.shape) != tuple(shape):
        dims = "[M, G]" if len(shape) == 2 else "[M]"
        raise ValueError(f"{name} has shape {tuple(x.shape)}, expected {dims} = {tuple(shape)}")
    if x.dtype == torch.bool:
        return x
    bad = ~((x == 0) | (x == 1))
    if bad.any():
        q = _first_bad_row(bad)
        raise ValueError(f"prompt {q}: {name} must be boolean (0/1), got {x[q].tolist()}")
    return x != 0


def check_batch(batch: RolloutBatch) -> RolloutBatch:
    """Validate a batch and return a normalised copy: bool flags, float64 lengths, `truncated` derived from
    `lengths >= max_new_tokens` when not given, `length_penalty` zeros when not given. ValueError names the
    offending prompt index."""
    if not isinstance(batch, RolloutBatch):
        raise ValueError(f"expected a RolloutBatch, got {type(batch).__name__}")
    c = batch.correct
    if not isinstance(c, torch.Tensor) or c.dim() != 2:
        raise ValueError(
            f"correct must be a 2-D [M prompts, G rollouts] tensor, got "
            f"{tuple(c.shape) if isinstance(c, torch.Tensor) else type(c).__name__}"
        )
    m, g = c.shape
    if m == 0:
        raise ValueError("the batch has no prompts (M = 0)")
    if g == 0:
        raise ValueError("prompt 0: empty group (G = 0 rollouts)")
    if g == 1:
        raise ValueError("prompt 0: group of 1 rollout; group-relative advantages need G ≥ 2 per prompt")
    mnt = batch.max_new_tokens
    if isinstance(mnt, bool) or not isinstance(mnt, int) or mnt <= 0:
        raise ValueError(f"max_new_tokens must be a positive int, got {mnt!r}")
    correct = _as_bool("correct", c, (m, g))
    lens = batch.lengths
    if not isinstance(lens, torch.Tensor) or tuple(lens.shape) != (m, g):
        raise ValueError(f"lengths has shape {tuple(getattr(lens, 'shape', ()))}, expected [M, G] = {(m, g)}")
    lens = lens.double()
    lo_t, hi_t = torch.aminmax(lens)
    lo, hi = float(lo_t), float(hi_t)
    if not (lo > 0 and hi <= mnt):  # NaN fails both comparisons; diagnose only on failure
        for bad, what in (
            (~torch.isfinite(lens), "must be finite"),
            (lens <= 0, "must be > 0 tokens (EOS included)"),
            (lens > mnt, f"exceed max_new_tokens = {mnt}"),
        ):
            if bad.any():
                q = _first_bad_row(bad)
                raise ValueError(f"prompt {q}: lengths {what}: {lens[q].tolist()}")
    if batch.truncated is not None:
        trunc = _as_bool("truncated", batch.truncated, (m, g))
    else:  # a response that reached the cap was cut off
        trunc = lens >= mnt
    rep = None if batch.repetitive is None else _as_bool("repetitive", batch.repetitive, (m, g))
    boxed = None if batch.think_boxed is None else _as_bool("think_boxed", batch.think_boxed, (m, g))
    answer = None if batch.answer_boxed is None else _as_bool("answer_boxed", batch.answer_boxed, (m, g))
    once = None if batch.think_once is None else _as_bool("think_once", batch.think_once, (m, g))
    nothink = None if batch.nothink is None else _as_bool("nothink", batch.nothink, (m, g))
    ref_acc = None if batch.ref_acc is None else _reference_accuracy(batch.ref_acc, m)
    n_gold = None if batch.n_gold is None else _per_prompt_targets(batch.n_gold, m)
    l1_max = None if batch.l1_max is None else _as_bool("l1_max", batch.l1_max, (m,))
    return RolloutBatch(
        correct=correct,
        lengths=lens,
        max_new_tokens=mnt,
        truncated=trunc,
        repetitive=rep,
        think_boxed=boxed,
        answer_boxed=answer,
        think_once=once,
        nothink=nothink,
        ref_acc=ref_acc,
        n_gold=n_gold,
        l1_max=l1_max,
        length_penalty=_reward_change(batch.length_penalty, m, g),
    )


def _reward_change(x, m: int, g: int) -> torch.Tensor:
    """The length penalty as a float64 [M, G] tensor (zeros when None), finite."""
    if x is None:
        return torch.zeros(m, g, dtype=torch.float64)
    if not isinstance(x, torch.Tensor) or tuple(x.shape) != (m, g):
        raise ValueError(f"length_penalty has shape {tuple(getattr(x, 'shape', ()))}, expected [M, G] = {(m, g)}")
    x = x.double()
    if not torch.isfinite(x).all():
        q = _first_bad_row(~torch.isfinite(x))
        raise ValueError(f"prompt {q}: length_penalty must be finite, got {x[q].tolist()}")
    return x


def _reference_accuracy(x, m: int) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or tuple(x.shape) != (m,):
        raise ValueError(f"ref_acc has shape {tuple(getattr(x, 'shape', ()))}, expected [M] = ({m},), one per prompt")
    x = x.double()
    bad = ~((x >= 0) & (x <= 1))  # NaN included
    if bad.any():
        q = int(bad.nonzero()[0, 0])
        raise ValueError(
            f"prompt {q}: ref_acc must be the reference model's accuracy in [0, 1], got {x[q].item()} (a negative "
            'value: its label has no "ref_acc"; the authors\' code asserts every training prompt has one)'
        )
    return x


def _per_prompt_targets(x, m: int) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or tuple(x.shape) != (m,):
        raise ValueError(f"n_gold has shape {tuple(getattr(x, 'shape', ()))}, expected [M] = ({m},), one per prompt")
    x = x.double()
    bad = ~torch.isfinite(x) | (x <= 0)
    if bad.any():
        q = int(bad.nonzero()[0, 0])
        raise ValueError(f"prompt {q}: n_gold must be a finite positive token count, got {x[q].item()}")
    return x


def check_output(out: MethodOutput, keys: tuple[str, ...]) -> None:
    """NaN/inf never leaves a method: raise naming the prompt (a bug guard; valid input cannot trigger it)."""
    for name in ("rewards", "advantages"):
        t = getattr(out, name)
        # any NaN/inf makes the (float32) sum non-finite; a sum that merely overflowed finds no bad element below
        if not math.isfinite(float(t.sum())):
            bad = ~torch.isfinite(t)
            if bad.any():
                q = _first_bad_row(bad)
                raise ValueError(f"prompt {q}: non-finite {name} {t[q].tolist()}")
    if tuple(out.stats) != keys:
        raise ValueError(f"stats keys {tuple(out.stats)} differ from the method's fixed set {keys}")
    bad = [k for k, v in out.stats.items() if not (isinstance(v, float) and math.isfinite(v))]
    if bad:
        raise ValueError(f"non-finite or non-float statistics: {bad}")
