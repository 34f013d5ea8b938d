"""The grading guard at the depth where a failed grade is first seen, so a failed step trains nothing.

What it does:
- `RecipeSamplesGenerator` is OpenRLHF's SamplesGenerator (samples_generator.py) counting the grading status of
  every training sample as `_process_response_into_experience` builds it, i.e. before `--algo.dynamic_filtering_enable`
  drops all-failed groups (reward 0, average 0) and pulls more prompts: the guard (lead_recipes.training.guard) sees
  one step's worth of graded samples at a time (rollout.batch_size x n_samples_per_prompt), survivors or not, and
  raises GradingFailure there, in generation, after `--recipe.guard.grade_failure_steps` failing windows; without
  this a full outage under filtering consumed the whole dataset and ended with exit 0. Eval samples are not counted.
- `skip_failed_step(rollout_samples, recipe)`: the experience maker's first call in make_experience_batch, before
  the model forwards, the method's step (controller) and ppo_train (weights): a step whose samples' failure share
  is above `--recipe.guard.grade_failure_max` raises GradingStepSkipped carrying its logged statistics; the trainer
  (lead_recipes.training.openrlhf_plugin) logs it and writes no checkpoint for it.
- `use_recipe_generator(owner)` swaps an owner's (PPOTrainer's) generator for ours; `RecipeGenerateSamplesActorRemote`
  is the async mode's generator actor with ours (installed by the plug-in's async trainer).

What it does not do: change rewards, retry grading, or judge samples without a grading status (not our reward
function): they are neither counted nor a reason to skip.
"""
from __future__ import annotations

import ray
from openrlhf.trainer.ppo_trainer_async import GenerateSamplesActor
from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator

from lead_recipes.training.guard import (SHARE_KEY, SKIPPED_KEY, STATUSES, GradingGuard, SampleWindows, failure_share,
                                        status_counts)


class GradingStepSkipped(Exception):
    """This step's grading failed beyond the threshold: it is not trained (its `stats` are logged instead)."""

    def __init__(self, stats: dict[str, float]):
        super().__init__(f"step skipped: grading failed for {stats[SHARE_KEY]:.0%} of its samples")
        self.stats = stats

    def __reduce__(self):  # args hold the message, not the stats: rebuild from the stats (Ray, multiprocessing)
        return (GradingStepSkipped, (self.stats,))


def skip_failed_step(rollout_samples, recipe) -> None:
    """Raise GradingStepSkipped when the step's failure share is above the guard's threshold (see module doc)."""
    counts = status_counts([s.info for s in rollout_samples])
    share = None if counts is None else failure_share(counts)
    guard = GradingGuard.from_recipe(recipe)
    if share is not None and share > guard.max_share:
        stats = {f"recipe/grading/{s}_count": counts[s] for s in STATUSES}
        raise GradingStepSkipped({**stats, SHARE_KEY: share, SKIPPED_KEY: 1.0})


class RecipeSamplesGenerator(SamplesGenerator):
    """SamplesGenerator whose every graded training sample goes through the grading guard (see module doc)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        rollout = self.args.rollout
        self.grading_windows = SampleWindows(GradingGuard.from_recipe(getattr(self.args, "recipe", None)),
                                             rollout.batch_size * rollout.n_samples_per_prompt)
        self._in_eval = False

    def generate_eval_samples(self, **generate_kwargs):
        self._in_eval = True
        try:
            return super().generate_eval_samples(**generate_kwargs)
        finally:
            self._in_eval = False

    def _process_response_into_experience(self, response, **generate_kwargs):
        experience = super()._process_response_into_experience(response, **generate_kwargs)
        if not self._in_eval:
            self.grading_windows.add(experience.info)  # raises GradingFailure on the K-th failing window
        return experience


def use_recipe_generator(owner) -> None:
    """Replace `owner.samples_generator` (OpenRLHF's) by a RecipeSamplesGenerator over the same parts."""
    old = owner.samples_generator
    owner.samples_generator = RecipeSamplesGenerator(
        strategy=old.strategy, prompts_dataloader=old.prompts_dataloader, eval_dataloader=old.eval_dataloader,
        tokenizer=old.tokenizer, vllm_engines=old.vllm_engines)


class RecipeGenerateSamplesActor(GenerateSamplesActor.__ray_actor_class__):
    """The async mode's generator actor (its own Ray process) with a RecipeSamplesGenerator."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        use_recipe_generator(self)


RecipeGenerateSamplesActorRemote = ray.remote(RecipeGenerateSamplesActor)
