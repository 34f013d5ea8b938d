"""What a checkpoint carries for lead-recipes (`client_states["recipe"]`, the one envelope around the method's
controller state) and what a resume from it accepts: the same method, version and settings (unless
--recipe.resume.settings_change_enable); plus the W&B run id, the run name and each logged step once after a resume.
It does not import OpenRLHF or restore anything but the method (OpenRLHF restores models and data).
See docs/training.md#checkpoints-and-resume.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import json
import logging
import os
import uuid
from typing import Any

from lead_recipes.methods import sections_read
from lead_recipes.methods.base import Method
from lead_recipes.methods.config import LeadConfig, flag
from lead_recipes.training.guard import SKIPPED_KEY

STATE_VERSION = 1
WANDB_ID_FILE = "recipe_wandb_run_id.txt"
WANDB_LOGGED_FILE = "recipe_wandb_logged.json"
RUN_NAME_FILE = "recipe_run_name.txt"
ALLOW_FLAG = "--recipe.resume.settings_change_enable"
_ABSENT = "(absent)"

# lead_recipes.training.openrlhf_plugin attaches OpenRLHF's log handler to this logger (init_logger), as to its own
logger = logging.getLogger(__name__)


def method_settings(method: Method, max_new_tokens: int | None) -> dict[str, Any]:
    """The settings `method` runs with, flag -> value: `--recipe.method`, every field of each section it holds and,
    while `--recipe.lead.b_max` is unset in a LEAD section it holds, the rollout cap B_max defaults to."""
    out: dict[str, Any] = {"--recipe.method": method.name}
    for section, value in sections_read(method).items():
        out.update({flag(section, f.name): getattr(value, f.name) for f in dataclasses.fields(value)})
        if isinstance(value, LeadConfig) and value.b_max is None and max_new_tokens is not None:
            out["--rollout.max_new_tokens"] = int(max_new_tokens)  # B_max only while --recipe.lead.b_max is unset
    return out


def settings_changes(saved: dict, current: dict) -> list[str]:
    """One line per flag whose value differs between the checkpoint's settings and this run's."""
    keys = list(current) + [k for k in saved if k not in current]
    return [
        f"{k} {saved.get(k, _ABSENT)!r} in the checkpoint, {current.get(k, _ABSENT)!r} now"
        for k in keys
        if saved.get(k, _ABSENT) != current.get(k, _ABSENT)
    ]


def recipe_client_state(method: Method, wandb_run_id: str | None, settings: dict | None = None) -> dict:
    """What goes into `client_states["recipe"]` (plain JSON-able Python; checked so a save never fails late)."""
    state = {
        "version": STATE_VERSION,
        "method": method.name,
        "controller": method.state_dict(),
        "settings": settings,
        "wandb_run_id": wandb_run_id,
        "openrlhf": importlib.metadata.version("openrlhf"),
    }
    json.dumps(state, allow_nan=False)
    return state


def restore_recipe_state(
    method: Method, checkpoint_states: dict | None, settings: dict | None = None, allow_change: bool = False
) -> list[str] | None:
    """Load the controller from checkpoint states: None when there was nothing to restore, else the settings
    changes that were allowed ([] for none). RuntimeError for a checkpoint without recipe state, of another method
    or version, or with other settings (not allowed): a controller never silently restarts nor mixes settings."""
    if not checkpoint_states:
        return None
    state = checkpoint_states.get("recipe")
    if state is None:
        if checkpoint_states.get("global_step", 0) > 0:
            raise RuntimeError(
                "the checkpoint being resumed has no client_states['recipe'] (saved without "
                "lead-recipes?); refusing to restart the method's controller from scratch"
            )
        return None
    if state.get("version") != STATE_VERSION or state.get("method") != method.name:
        raise RuntimeError(
            f"the checkpoint's recipe state is version {state.get('version')} of method "
            f"{state.get('method')!r}; this run reads version {STATE_VERSION} of {method.name}"
        )
    changes = settings_changes(state.get("settings") or {}, settings) if settings is not None else []
    if changes and not allow_change:
        raise RuntimeError(
            f"resuming under other method settings than the checkpoint's: {'; '.join(changes)}\n"
            f"use the checkpoint's values, or pass {ALLOW_FLAG} to continue under the new ones"
        )
    method.load_state_dict(state["controller"])
    return changes


def prepare_wandb_resume(args) -> str | None:
    """Fix the W&B run id before OpenRLHF's `wandb.init` (which passes no id): WANDB_RUN_ID if set, else the id
    saved beside the checkpoints when resuming, else a new one; WANDB_RESUME=allow makes a resume continue it."""
    if not getattr(args.logger.wandb, "key", None):
        return None
    path = os.path.join(args.ckpt.path, WANDB_ID_FILE)
    run_id = os.environ.get("WANDB_RUN_ID")
    if not run_id and args.ckpt.load_enable and os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            run_id = f.read().strip()
    run_id = run_id or uuid.uuid4().hex[:8]
    os.makedirs(args.ckpt.path, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(run_id + "\n")
    os.environ["WANDB_RUN_ID"] = run_id
    os.environ.setdefault("WANDB_RESUME", "allow")
    return run_id


def keep_run_name(args) -> None:
    """Before OpenRLHF's loggers start: a run that resumes a checkpoint takes the run name (TensorBoard directory,
    W&B name) saved beside it by the run that wrote it, unless --logger.wandb.run_name was given
    (`args.recipe_run_name_given`, set by the plug-in); OpenRLHF's default name is the start time. The name in use
    is saved for the next resume."""
    path, name = os.path.join(args.ckpt.path, RUN_NAME_FILE), args.logger.wandb.run_name
    saved = None
    if args.ckpt.load_enable and os.path.isdir(os.path.join(args.ckpt.path, "_actor")) and os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            saved = f.read().strip() or None
    if saved and saved != name and getattr(args, "recipe_run_name_given", False):
        logger.warning(
            f"lead-recipes: --logger.wandb.run_name {name} differs from the resumed run's {saved}: its TensorBoard "
            "curves continue in another directory"
        )
    elif saved and saved != name:
        args.logger.wandb.run_name = saved
        logger.info(f"lead-recipes: resuming run {saved} (TensorBoard directory and W&B name; this start's is {name})")
    os.makedirs(args.ckpt.path, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(args.logger.wandb.run_name + "\n")


def purge_tensorboard_from(tb_logger, step: int) -> None:
    """Reopen OpenRLHF's TensorboardLogger writer (nothing written yet) with `purge_step=step`: TensorBoard drops
    the earlier event files' events at steps >= `step` of this run directory."""
    from torch.utils.tensorboard import SummaryWriter

    old = tb_logger.writer
    old.close()
    tb_logger.writer = SummaryWriter(log_dir=old.log_dir, purge_step=int(step))


class StepOnceWandbLogger:
    """OpenRLHF's WandbLogger logging each global step of a W&B run once across resumes: train logs of a step this
    run already logged as trained, a second skipped log of a step (grading failed: not trained), and eval logs of
    an evaluated step are dropped; W&B history cannot be rewritten, so the values logged first are kept. A step
    logged only as skipped is logged again once it is trained. What was logged is kept in
    <ckpt.path>/recipe_wandb_logged.json with the run id; everything else is the wrapped logger's."""

    def __init__(self, inner, ckpt_path: str, run_id: str | None, resuming: bool):
        self.inner, self.run_id = inner, run_id
        self.path = os.path.join(ckpt_path, WANDB_LOGGED_FILE)
        self.train, self.skipped, self.eval = 0, set(), 0  # highest train step, steps logged only as skipped
        saved = {}
        if resuming and os.path.exists(self.path):
            with contextlib.suppress(OSError, ValueError):
                with open(self.path, encoding="utf-8") as f:
                    saved = json.load(f)
        if isinstance(saved, dict) and saved.get("run_id") == str(run_id):
            self.train, self.eval = int(saved.get("train", 0)), int(saved.get("eval", 0))
            self.skipped = {int(s) for s in saved.get("skipped", [])}
        self._record()

    def _record(self) -> None:
        state = {"run_id": str(self.run_id), "train": self.train, "skipped": sorted(self.skipped), "eval": self.eval}
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        tmp = f"{self.path}.tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps(state) + "\n")
        os.replace(tmp, self.path)

    def log_train(self, global_step, logs_dict) -> None:
        skipped = bool((logs_dict or {}).get(SKIPPED_KEY))
        if global_step <= self.train and (skipped or global_step not in self.skipped):
            return
        self.inner.log_train(global_step, logs_dict)
        (self.skipped.add if skipped else self.skipped.discard)(global_step)
        self.train = max(self.train, int(global_step))
        self._record()

    def log_eval(self, global_step, logs_dict) -> None:
        if global_step > self.eval:
            self.inner.log_eval(global_step, logs_dict)
            self.eval = int(global_step)
            self._record()

    def __getattr__(self, name):  # close, handle, samples_table: the wrapped logger's
        return getattr(self.inner, name)
