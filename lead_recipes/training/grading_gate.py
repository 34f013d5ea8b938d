"""The grading guard where a failed grade is first seen, so a failed step trains nothing: `RecipeSamplesGenerator`
counts every graded training sample before dynamic filtering can drop it (the guard stops the run after its streak),
and `skip_failed_step` skips a step whose failure share is too high before the forwards, the method and ppo_train.
It does not change rewards or retry grading; eval samples and samples without a status are not counted. It also
marks each request train or eval for AdaptThink's executor (lead_recipes.training.adaptthink_executor).
See docs/training.md#when-grading-fails-the-run-stops.
"""

from __future__ import annotations

import ray
from openrlhf.trainer.ppo_trainer_async import GenerateSamplesActor
from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator

from lead_recipes.training.adaptthink_executor import marked_requests
from lead_recipes.training.guard import (
    SHARE_KEY,
    SKIPPED_KEY,
    STATUSES,
    GradingGuard,
    SampleWindows,
    failure_share,
    status_counts,
)


class GradingStepSkipped(Exception):
    """This step's grading failed beyond the threshold: it is not trained (its `stats` are logged instead)."""

    def __init__(self, stats: dict[str, float]):
        super().__init__(f"step skipped: grading failed for {stats[SHARE_KEY]:.0%} of its samples")
        self.stats = stats

    def __reduce__(self):  # args hold the message, not the stats: rebuild from the stats (Ray, multiprocessing)
        return (GradingStepSkipped, (self.stats,))


def skip_failed_step(rollout_samples, recipe) -> None:
    """Raise GradingStepSkipped when the step's failure share is above the guard's threshold:
    called before the model forwards, the method's step and ppo_train, so a failed step moves nothing."""
    counts = status_counts([s.info for s in rollout_samples])
    share = None if counts is None else failure_share(counts)
    guard = GradingGuard.from_recipe(recipe)
    if share is not None and share > guard.max_share:
        stats = {f"recipe/grading/{s}_count": counts[s] for s in STATUSES}
        raise GradingStepSkipped({**stats, SHARE_KEY: share, SKIPPED_KEY: 1.0})


class RecipeSamplesGenerator(SamplesGenerator):
    """SamplesGenerator whose every graded training sample goes through the grading guard as it is built, before
    dynamic filtering; eval samples are not counted."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        rollout = self.args.rollout
        self.grading_windows = SampleWindows(
            GradingGuard.from_recipe(getattr(self.args, "recipe", None)),
            rollout.batch_size * rollout.n_samples_per_prompt,
        )
        self._in_eval = False

    def generate_eval_samples(self, **generate_kwargs):
        self._in_eval = True
        try:
            return super().generate_eval_samples(**generate_kwargs)
        finally:
            self._in_eval = False

    def _dispatch_prompts_to_vllm(self, prompts, labels, *, images=None, **generate_kwargs):
        # AdaptThink's executor forces the first token of training requests only: each request says which it is
        with marked_requests(self.args, training=not self._in_eval):
            return super()._dispatch_prompts_to_vllm(prompts, labels, images=images, **generate_kwargs)

    def _process_response_into_experience(self, response, **generate_kwargs):
        experience = super()._process_response_into_experience(response, **generate_kwargs)
        if not self._in_eval:
            self.grading_windows.add(experience.info)  # raises GradingFailure on the K-th failing window
        return experience


def use_recipe_generator(owner) -> None:
    """Replace `owner.samples_generator` (OpenRLHF's) by a RecipeSamplesGenerator over the same parts."""
    old = owner.samples_generator
    owner.samples_generator = RecipeSamplesGenerator(
        strategy=old.strategy,
        prompts_dataloader=old.prompts_dataloader,
        eval_dataloader=old.eval_dataloader,
        tokenizer=old.tokenizer,
        vllm_engines=old.vllm_engines,
    )


class RecipeGenerateSamplesActor(GenerateSamplesActor.__ray_actor_class__):
    """The async mode's generator actor (its own Ray process) with a RecipeSamplesGenerator."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        use_recipe_generator(self)

    def fit(self, *args, **kwargs):
        super().fit(*args, **kwargs)
        self.samples_generator.grading_windows.finish()  # the data ran out while grading was failing: stop


RecipeGenerateSamplesActorRemote = ray.remote(RecipeGenerateSamplesActor)
