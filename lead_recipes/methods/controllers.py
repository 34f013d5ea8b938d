"""The stateful controllers: LEAD's EMA of the PSI target weights (arXiv 2605.09806, Eq. 7), Leash's Lagrange
multiplier λ with its Adam moments (arXiv 2512.21540; the optimiser settings are our choice), the composed
method's pair of both under one flat state, and a step counter (Kimi k1.5's warm-up). Plain Python floats and ints
only, so `state_dict()` is JSON-able and a save → load round trip restores the exact bits; no tensors, files or
args. See docs/methods.md#python-api.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

PSI_EPS = 1e-8  # LEAD Eqs. 4-7: ε of the PSI normalisation and of the "Ψ_c = Ψ_l = 0" test


def _float(state: dict, key: str, kind: str) -> float:
    if key not in state:
        raise ValueError(f"{kind} controller state lacks {key!r} (has {sorted(state)})")
    v = state[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"{kind} controller state {key!r} must be a finite number, got {v!r}")
    return float(v)


def _int(state: dict, key: str, kind: str) -> int:
    v = state.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError(f"{kind} controller state {key!r} must be a non-negative int, got {v!r}")
    return v


@dataclass
class LeadController:
    """w(t) = β·w(t−1) + (1−β)·λ̂(t), w(0) = (0.5, 0.5); λ_c = max(w_c, λ_min), λ_l = 1 − λ_c (LEAD Eq. 7).

    The stored state is the un-floored w (reference code). When Ψ_c + Ψ_l < ε the target is (0, 0) and the EMA
    shrinks toward it (Eq. 7 and the authors' code), unless `skip_on_zero_psi` (ours: keep w(t−1)). With
    `static_lambda_c` set, λ_c is that constant and w never moves (LEAD-static ablation)."""

    beta_ema: float = 0.95
    lambda_min: float = 0.3
    static_lambda_c: float | None = None
    skip_on_zero_psi: bool = False
    w_c: float = 0.5
    w_l: float = 0.5
    step: int = 0
    lambda_c: float = 0.5
    lambda_l: float = 0.5

    def update(self, psi_c: float, psi_l: float) -> dict[str, float]:
        """Advance one step from this batch's Ψ; returns the target λ̂, whether the EMA was skipped, and sets
        `lambda_c`/`lambda_l` (the weights to use for this same batch)."""
        total = psi_c + psi_l
        t_c, t_l = psi_c / (total + PSI_EPS), psi_l / (total + PSI_EPS)
        skipped = self.static_lambda_c is None and total < PSI_EPS and self.skip_on_zero_psi
        if self.static_lambda_c is not None:
            self.lambda_c = float(self.static_lambda_c)
        else:
            if not skipped:
                b = self.beta_ema
                self.w_c = b * self.w_c + (1.0 - b) * t_c
                self.w_l = b * self.w_l + (1.0 - b) * t_l
            self.lambda_c = max(self.w_c, self.lambda_min)
        self.lambda_l = 1.0 - self.lambda_c
        self.step += 1
        return {"target_lambda_c": t_c, "target_lambda_l": t_l, "ema_skipped": float(skipped)}

    def state_dict(self) -> dict:
        return {
            "w_c": self.w_c,
            "w_l": self.w_l,
            "step": self.step,
            "lambda_c": self.lambda_c,
            "lambda_l": self.lambda_l,
        }

    def load_state_dict(self, state: dict) -> None:
        if not isinstance(state, dict):
            raise ValueError(f"lead controller state must be a dict, got {type(state).__name__}")
        vals = [_float(state, k, "lead") for k in ("w_c", "w_l", "lambda_c", "lambda_l")]  # all checked first
        step = _int(state, "step", "lead")
        self.w_c, self.w_l, self.lambda_c, self.lambda_l = vals
        self.step = step


@dataclass
class LeashController:
    """λ ≥ 0 for the constraint E[l/L_t − 1] ≤ 0. After each batch, Adam minimises −λ·ĝ (gradient −ĝ), then λ is
    projected to [λ_min, λ_max]: λ grows while lengths exceed L_t, shrinks when under (Leash). Adam follows
    torch.optim.Adam's arithmetic (bias-corrected, ε added to the corrected √v). `constant` = Leash-C."""

    lr: float = 1e-2
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    lambda_min: float = 0.0
    lambda_max: float = 1.0
    constant: bool = False
    lam: float = 0.0
    m: float = 0.0
    v: float = 0.0
    step: int = 0

    def update(self, g_hat: float) -> float:
        """One dual step from the batch's constraint estimate ĝ; returns the new λ (for the next batch)."""
        if self.constant:
            return self.lam
        grad = -g_hat
        self.step += 1
        self.m = self.beta1 * self.m + (1.0 - self.beta1) * grad
        self.v = self.beta2 * self.v + (1.0 - self.beta2) * grad * grad
        bc1 = 1.0 - self.beta1**self.step
        bc2 = 1.0 - self.beta2**self.step
        denom = math.sqrt(self.v) / math.sqrt(bc2) + self.eps
        self.lam = min(max(self.lam - (self.lr / bc1) * self.m / denom, self.lambda_min), self.lambda_max)
        return self.lam

    def state_dict(self) -> dict:
        return {"lagrange_lambda": self.lam, "adam_m": self.m, "adam_v": self.v, "step": self.step}

    def load_state_dict(self, state: dict) -> None:
        if not isinstance(state, dict):
            raise ValueError(f"leash controller state must be a dict, got {type(state).__name__}")
        vals = [_float(state, k, "leash") for k in ("lagrange_lambda", "adam_m", "adam_v")]  # all checked first
        step = _int(state, "step", "leash")
        self.lam, self.m, self.v = vals
        self.step = step


@dataclass
class ComposedController:
    """The composed method's controller: LEAD's PSI EMA (`psi`) and Leash's dual variable (`dual`), each with its
    own update rule, saved as one flat state. Flat keys keep `lead-recipes replay` plotting both trajectories; the
    dual optimiser's step count is stored as `dual_step` next to the EMA's `step`."""

    psi: LeadController
    dual: LeashController

    def state_dict(self) -> dict:
        dual = self.dual.state_dict()
        dual["dual_step"] = dual.pop("step")
        return {**self.psi.state_dict(), **dual}

    def load_state_dict(self, state: dict) -> None:
        if not isinstance(state, dict):
            raise ValueError(f"composed controller state must be a dict, got {type(state).__name__}")
        psi_keys = ("w_c", "w_l", "step", "lambda_c", "lambda_l")
        dual_keys = ("lagrange_lambda", "adam_m", "adam_v", "dual_step")
        unknown = sorted(set(state) - set(psi_keys) - set(dual_keys))
        if unknown:
            raise ValueError(f"composed controller state has unknown keys {unknown}")
        psi, dual = LeadController(), LeashController()  # load into scratch copies first: all checked, then set
        psi.load_state_dict({k: state[k] for k in psi_keys if k in state})
        dual_step = _int(state, "dual_step", "composed")
        dual.load_state_dict({**{k: state[k] for k in dual_keys[:3] if k in state}, "step": dual_step})
        self.psi.load_state_dict(psi.state_dict())
        self.dual.load_state_dict(dual.state_dict())


@dataclass
class StepCounter:
    """The number of batches a method has shaped: Kimi k1.5's warm-up (arXiv 2501.12599, Sec. 2.3.3) switches its
    length penalty on after `warmup_steps` of them, so a resumed run has to know how many came before."""

    step: int = 0

    def state_dict(self) -> dict:
        return {"step": self.step}

    def load_state_dict(self, state: dict) -> None:
        if not isinstance(state, dict):
            raise ValueError(f"step counter state must be a dict, got {type(state).__name__}")
        unknown = sorted(set(state) - {"step"})
        if unknown:
            raise ValueError(f"step counter state has unknown keys {unknown}")
        self.step = _int(state, "step", "step counter")


LASER_BUCKETS = ("low", "medium", "high")  # Laser-D's buckets by group accuracy, lowest first


@dataclass
class LaserTargets:
    """Laser-D/-DE's per-bucket target lengths, replaced by each monitor pass (`observe_monitor`); the state is
    `{"targets": {"low", "medium", "high": L or None}, "last_monitor_step", "step"}`, as the 2026 baselines spec
    writes it. The authors re-run the monitor on resume instead of saving it; restoring it resumes exactly."""

    targets: dict | None = None
    last_monitor_step: int = 0
    step: int = 0

    def observe(self, targets: dict, step: int) -> None:
        self.targets, self.last_monitor_step = dict(targets), int(step)

    def state_dict(self) -> dict:
        # before the first monitor every bucket is null, so the state loads back (load_state_dict needs all three)
        targets = {b: (self.targets or {}).get(b) for b in LASER_BUCKETS}
        return {"targets": targets, "last_monitor_step": self.last_monitor_step, "step": self.step}

    def load_state_dict(self, state: dict) -> None:
        if not isinstance(state, dict) or not isinstance(state.get("targets"), dict):
            raise ValueError(f"laser controller state must be a dict with a 'targets' dict, got {state!r}")
        targets = state["targets"]
        if set(targets) != set(LASER_BUCKETS):
            raise ValueError(f"laser controller targets need exactly {', '.join(LASER_BUCKETS)}, got {sorted(targets)}")
        for name, v in targets.items():
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v <= 0):
                raise ValueError(f"laser controller target {name!r} must be a positive int or null, got {v!r}")
        last, step = _int(state, "last_monitor_step", "laser"), _int(state, "step", "laser")
        # all null at step 0 is the state saved before any monitor (state_dict above), not a monitor's finding
        unseen = step == 0 and last == 0 and all(v is None for v in targets.values())
        self.targets, self.last_monitor_step, self.step = None if unseen else dict(targets), last, step
