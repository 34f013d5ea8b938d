"""The monitor seam for methods whose registry entry needs monitor passes (Laser-D/-DE): `MonitorMixin`, which the
plug-in mixes into the sync trainer for them only, samples OpenRLHF's eval dataset with the current policy (its own
`evaluate` path, graded by the same reward function), hands each prompt's (correct, response tokens) to the method's
`observe_monitor` (a pass whose grading failed stops the run), and keeps the schedule of arXiv 2505.15612's code:
before step 1, then after the update of every step t with t % --eval.steps == 0, so the step-t checkpoint holds the
step-t targets. No method math; no OpenRLHF import. See docs/training.md#the-monitor-seam-laser-d-laser-de.
"""

from __future__ import annotations

import contextlib
import logging

import torch

from lead_recipes.training.guard import GradingFailure, GradingGuard, failure_share, status_counts

logger = logging.getLogger(__name__)  # the plug-in attaches OpenRLHF's handler (init_logger)


def monitor_pass(samples, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(correct [P, n] bool, lengths [P, n] response tokens) of one eval pass: OpenRLHF's eval samples in its order,
    n consecutive samples per prompt (as its compute_eval_metrics reads them). `correct` is the reward function's
    `extra_logs["correct"]`, the answer only (the authors' monitor grades no format). ValueError on a pass that
    does not split into prompts of n samples or lacks the grades."""
    rows = [(p, e.info.get("correct"), e.action_mask) for e in samples for p in [e.prompts[0]]]
    if not rows or len(rows) % n:
        raise ValueError(f"the monitor pass returned {len(rows)} samples, not a positive multiple of n = {n}")
    if any(c is None for _, c, _ in rows):
        raise ValueError(
            "the monitor's eval samples have no info[\"correct\"]: the reward function must be lead-recipes' "
            "(--reward.remote_url <path>/lead_recipes/reward/reward_func.py or the `lead-recipes serve` URL)"
        )
    for start in range(0, len(rows), n):
        if len({p for p, _, _ in rows[start : start + n]}) != 1:
            raise ValueError(f"monitor samples {start}..{start + n - 1} are not the n = {n} samples of one prompt")
    correct = torch.tensor([float(c.reshape(-1)[0]) > 0.5 for _, c, _ in rows]).reshape(-1, n)
    lengths = torch.tensor([float(m.sum()) for _, _, m in rows], dtype=torch.float64).reshape(-1, n)
    return correct, lengths


class MonitorMixin:
    """Runs the monitor passes of a method with `observe_monitor` inside OpenRLHF 0.11.2's sync `PPOTrainer.fit`.

    fit calls save_logs_and_checkpoints(t) before evaluate(t); the pass due at step t runs in the former, before the
    state is saved, and the evaluate of the same step reuses its samples (one generation, logged as usual). The pass
    before step 1 (fresh run; on resume with --recipe.<m>.ref_code_remonitor_on_resume_enable) runs at the start of
    the first train_step: vLLM holds the initial (or just-broadcast resumed) weights and no advantage is computed yet.
    A pass due at a skipped step (grading failed, nothing trained) runs there too, at the next train_step.
    """

    recipe_monitor_pending = False  # a pass is due before the next batch's advantages
    recipe_monitor_samples: dict | None = None  # {step: the pass's eval samples} for fit's evaluate of that step

    def restore_best_checkpoint_state(self, checkpoint_states):
        super().restore_best_checkpoint_state(checkpoint_states)  # the saved targets are restored here
        resumed = int((checkpoint_states or {}).get("global_step", 0)) > 0
        self.recipe_monitor_pending = not resumed or self.recipe_method.config.ref_code_remonitor_on_resume_enable

    def train_step(self, rollout_samples, global_step):
        if self.recipe_monitor_pending:
            self.recipe_monitor_pending = False
            self._recipe_monitor(global_step)
        return super().train_step(rollout_samples, global_step)

    def save_logs_and_checkpoints(self, global_step, logs_dict=None, client_states=None):
        if global_step % self.args.eval.steps == 0 and self.recipe_step_skipped:
            # no checkpoint follows a skipped step, which trained nothing: the pass is made before the next
            # batch's advantages, on the same weights, rather than a period later
            self.recipe_monitor_pending = True
        elif global_step % self.args.eval.steps == 0:
            logs_dict = dict(logs_dict or {})
            logs_dict.update(self._recipe_monitor(global_step, keep=True))
        return super().save_logs_and_checkpoints(global_step, logs_dict, client_states)

    def evaluate(self, global_step, **generate_kwargs):
        samples = (self.recipe_monitor_samples or {}).pop(global_step, None)
        if samples is None:
            return super().evaluate(global_step, **generate_kwargs)
        with _instance_attr(self.samples_generator, "generate_eval_samples", lambda **_: samples):
            return super().evaluate(global_step, **generate_kwargs)

    def _recipe_monitor(self, global_step: int, keep: bool = False) -> dict[str, float]:
        """One pass with fit's own eval settings; the method's new targets apply from the next batch. `keep`: hold
        the samples for fit's evaluate of this step. Returns the targets as logged values."""
        ev = self.args.eval
        kwargs = {
            **self.generate_kwargs,
            "temperature": ev.temperature,
            "n_samples_per_prompt": ev.n_samples_per_prompt,
        }
        samples = self.samples_generator.generate_eval_samples(**kwargs)
        _check_grading(samples, getattr(self.args, "recipe", None), global_step)
        correct, lengths = monitor_pass(samples, ev.n_samples_per_prompt)
        targets = self.recipe_method.observe_monitor(correct, lengths, step=global_step)
        if keep:
            self.recipe_monitor_samples = {global_step: samples}
        logger.info(
            f"lead-recipes: monitor pass at global step {global_step} ({correct.shape[0]} prompts × "
            f"{correct.shape[1]}, accuracy {float(correct.double().mean()):.3f}): targets {targets}"
        )
        # a bucket without a target logs 0 (its rewards use no cap)
        return {f"recipe/monitor/target_{b}": float(v or 0) for b, v in targets.items()}


def _check_grading(samples, recipe, global_step: int) -> None:
    """GradingFailure when more of the pass's samples failed grading (error, timeout: read as wrong) than
    --recipe.guard.grade_failure_max allows: such a pass would move prompts to the low band and its targets would
    hold for --eval.steps steps and in the checkpoint. The run stops before the targets change (the training
    guard's eval samples are not counted in its windows)."""
    counts = status_counts([e.info for e in samples])
    share = None if counts is None else failure_share(counts)
    limit = GradingGuard.from_recipe(recipe).max_share
    if share is not None and share > limit:
        raise GradingFailure(
            f"grading failed for {share:.0%} of the monitor pass at global step {global_step} ({counts['error']:.0f} "
            f"error, {counts['timeout']:.0f} timeout of {sum(counts.values()):.0f}), above "
            f"--recipe.guard.grade_failure_max {limit}: its bucket targets would read those samples as wrong.\nCheck "
            "the reward server's log and GET /stats, LEAD_RECIPES_GRADE_TIMEOUT_S and --data.label_key, then resume "
            "from the last checkpoint."
        )


@contextlib.contextmanager
def _instance_attr(obj, name, value):
    """`obj.name = value` for the block, then what the instance had before (its own attribute, or none)."""
    own = vars(obj).get(name, _NONE)
    setattr(obj, name, value)
    try:
        yield
    finally:
        if own is _NONE:
            delattr(obj, name)
        else:
            setattr(obj, name, own)


_NONE = object()
