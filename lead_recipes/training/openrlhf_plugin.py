"""The plug-in into OpenRLHF 0.11.2 (subclass and swap, never fork; with grading_gate and step_order the only OpenRLHF
importers): `RecipeExperienceMaker` replaces only the group step of `compute_advantages_and_returns` with the
`--recipe.method` Method; the trainer classes install it, save and restore its state in `client_states["recipe"]`,
log its statistics and per-problem records; `run_openrlhf()` runs OpenRLHF's own `train_ppo_ray` with them swapped
in (after the version pin check of lead_recipes.recipes.openrlhf_parser), the sync one with training.monitor's seam for
a method needing monitor passes. No method math, grading or --recipe.* parsing.
See docs/training.md#what-the-openrlhf-plug-in-changes-in-openrlhf-and-what-it-does-not.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.metadata
import itertools
import json
import os
import runpy
import sys

import ray
import torch
from openrlhf.models.utils import compute_reward
from openrlhf.trainer.ppo_trainer import BasePPOTrainer, PPOTrainer
from openrlhf.trainer.ppo_trainer_async import PPOTrainerAsync, TrainingActor
from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker
from openrlhf.trainer.ppo_utils.length_penalty import apply_length_penalties
from openrlhf.utils.logging_utils import init_logger

from lead_recipes.methods import build_method
from lead_recipes.methods.base import Method
from lead_recipes.methods.config import RecipeConfig, entry
from lead_recipes.progress import StepProgress
from lead_recipes.recipes.openrlhf_parser import check_openrlhf
from lead_recipes.training import preemption as preempt
from lead_recipes.training.args import length_penalty_errors, monitor_errors, with_recipe
from lead_recipes.training.first_token import adaptthink_errors, importance_sample_first_token
from lead_recipes.training.grading_gate import (
    GradingStepSkipped,
    RecipeGenerateSamplesActorRemote,
    skip_failed_step,
    use_recipe_generator,
)
from lead_recipes.training.guard import logged_share
from lead_recipes.training.monitor import MonitorMixin
from lead_recipes.training.preemption import SaveOnRequestMixin
from lead_recipes.training.resume import (
    ALLOW_FLAG,
    StepOnceWandbLogger,
    keep_run_name,
    method_settings,
    prepare_wandb_resume,
    purge_tensorboard_from,
    recipe_client_state,
    restore_recipe_state,
)
from lead_recipes.training.step_order import RecipePolicyModelActorRemote, balanced_then_shuffled
from lead_recipes.training.step_stats import (
    finite,
    laser_repetition,
    one_intra_op_thread,
    problem_records,
    rollout_batch,
    row_chunks,
    step_stats,
    truncate_problem_records,
)

logger = init_logger(__name__)
init_logger(preempt.__name__)  # the save-on-request mixin's messages go through OpenRLHF's handler too
init_logger(restore_recipe_state.__module__)  # so do lead_recipes.training.resume's
init_logger(MonitorMixin.__module__)  # and the monitor seam's

GROUP_ESTIMATORS = ("group_norm", "dr_grpo")  # no critic, no batch whitening upstream: the method owns the step
PROBLEMS_FILE = "recipe_problems.jsonl"
CHUNK_ROWS = 512  # rows per batched compute_reward/returns call: 512 x 4k tokens x 4 B = 8 MiB per tensor


class RecipeExperienceMaker(RemoteExperienceMaker):
    """OpenRLHF's experience maker with the group step replaced by a lead-recipes Method."""

    def __init__(self, *args, method: Method | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        if self.advantage_estimator not in GROUP_ESTIMATORS:
            raise ValueError(
                f"--recipe.method needs --algo.advantage.estimator group_norm (or dr_grpo), got "
                f"{self.advantage_estimator!r}: other estimators add a critic or batch whitening"
            )
        self.method = method if method is not None else build_method(RecipeConfig.of(self.args.recipe))
        # `lead-recipes train` checked them too
        errors = length_penalty_errors(self.args, self.method.name) + monitor_errors(self.args, self.method.name)
        errors += adaptthink_errors(self.args) if self.method.name == "adaptthink" else []
        if errors:
            raise ValueError("; ".join(errors))
        self.last_stats: dict[str, float] = {}
        self.last_problems: list[dict] = []

    def make_experience_batch(self, rollout_samples):
        # a step whose grading failed is skipped here: before the forwards, the method's step and ppo_train
        skip_failed_step(rollout_samples, getattr(self.args, "recipe", None))
        return super().make_experience_batch(rollout_samples)

    @torch.no_grad()
    def compute_advantages_and_returns(self, experiences):
        with one_intra_op_thread():
            return self._compute_advantages_and_returns(experiences)

    def _compute_advantages_and_returns(self, experiences):
        args = self.strategy.args
        n = args.rollout.n_samples_per_prompt
        for experience in experiences:  # upstream: at least fp32 for penalties and group statistics
            experience.rewards = experience.rewards.to(torch.promote_types(experience.rewards.dtype, torch.float32))
        before = torch.cat([e.rewards.reshape(-1) for e in experiences])
        apply_length_penalties(experiences, args)
        penalty = torch.cat([e.rewards.reshape(-1) for e in experiences]) - before

        # regroup exactly as upstream: scatter into prompt order by `index`, then rows of n
        exp_len = [len(e.index) for e in experiences]
        indices = torch.tensor(list(itertools.chain.from_iterable(e.index for e in experiences)))
        total = len(indices)
        if total % n or not torch.equal(indices.sort().values, torch.arange(total)):
            raise ValueError(
                f"experience indices are not a permutation of 0..{total - 1} in groups of n={n}; "
                "samples cannot be regrouped by prompt"
            )

        def grouped(values: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(values)
            out[indices] = values
            return out.reshape(-1, n)

        if n > 1:  # upstream's logged group_reward_std: of the rewards after the length penalties, as upstream
            rewards = grouped(before + penalty)
            stds = rewards.std(-1, keepdim=True).repeat(1, n).reshape(-1)[indices].split(exp_len)
            for experience, std in zip(experiences, stds):
                experience.info["group_reward_std"] = std

        # the penalties are a reward term: the method adds them to its length channel (else its reward) before its
        # group normalisation, as upstream's estimators do (docs/training.md#dapos-overlong-penalty), never to the final
        # advantage
        cap = args.rollout.max_new_tokens or args.data.max_len
        if self.method.name == "adaptthink":  # the old log-prob of its forced first token (training.first_token)
            importance_sample_first_token(experiences, self.method.config.rho)
        batch, extra = rollout_batch(experiences, grouped, cap, grouped(penalty))
        if getattr(self.method.config, "repetition_guard_enable", False):  # Laser-DE's guard: Laser's own detector
            batch.repetitive = laser_repetition(experiences, grouped)
        out = self.method.step(batch)
        adv = finite("method advantages", out.advantages.to(torch.float32))
        shaped = finite("method rewards", out.rewards.to(torch.float32))

        # per-sample values back in micro-batch order (upstream's reshape(-1)[indices].split pattern)
        per_sample = {name: t.reshape(-1)[indices].split(exp_len) for name, t in (("adv", adv), ("reward", shaped))}
        gamma = args.algo.advantage.gamma
        if gamma != 1.0:  # upstream forces γ = 1 for every group estimator, with this warning
            logger.warning(f"gamma is set to 1.0 for {self.advantage_estimator}")
            gamma = args.algo.advantage.gamma = 1.0
        for i, experience in enumerate(experiences):
            experience.info["recipe_reward"] = per_sample["reward"][i].clone()
            experience.info["recipe_advantage"] = per_sample["adv"][i].clone()
        for chunk in row_chunks(experiences, CHUNK_ROWS):
            self._token_returns([experiences[i] for i in chunk], [per_sample["adv"][i] for i in chunk], gamma)

        self.last_stats = step_stats(self.method.name, batch, out, shaped, penalty, extra)
        self.last_problems = problem_records(experiences, indices, batch, n)
        return experiences

    def _token_returns(self, experiences, advantages, gamma):
        """Upstream's per-token loop body (compute_reward → returns → advantages = returns, info["return"]) on
        several micro-batches at once: right-padded to a common width (padding has mask 0 and KL 0, and every op
        is row-wise, so each row's values are unchanged), then sliced back. Fewer, larger tensor ops."""
        width = max(e.action_mask.shape[1] for e in experiences)
        pad = torch.nn.functional.pad
        mask = torch.cat([pad(e.action_mask, (0, width - e.action_mask.shape[1])) for e in experiences])
        kl = torch.cat([pad(e.kl, (0, width - e.kl.shape[1])) for e in experiences])
        # no reward_clip_range: upstream clips its group-normalised reward there, but the method's advantage is
        # final (LEAD/GDPO whiten over the batch and reach |A| of 16-22 exactly on the rare correct samples when
        # most groups are all wrong); the KL term is added as upstream.
        reward = compute_reward(torch.cat(advantages), self.kl_ctl.value, kl, action_mask=mask, reward_clip_range=None)
        returns = self.get_cumulative_returns(reward, mask, gamma)
        totals = reward.sum(dim=-1)
        start = 0
        for e in experiences:
            rows, w = e.action_mask.shape
            e.returns = returns[start : start + rows, :w].clone()
            e.advantages = e.returns.clone()
            e.info["return"] = totals[start : start + rows].clone()
            e.kl = None
            start += rows

    @torch.no_grad()
    def get_cumulative_returns(self, rewards, action_mask, gamma):
        """γ = 1: returns[:, t] = Σ_{s ≥ t} mask·r — a reversed cumsum, accumulated in the loop's dtype."""
        if gamma != 1.0:
            return super().get_cumulative_returns(rewards, action_mask, gamma)
        masked = action_mask * rewards if action_mask is not None else rewards
        acc = torch.promote_types(masked.dtype, torch.float32)  # upstream accumulates in an fp32 (or wider) tensor
        return masked.to(acc).flip(-1).cumsum(-1).flip(-1).to(rewards.dtype)


class _RecipeTrainerMixin(SaveOnRequestMixin):
    """Shared by the sync trainer and the async training actor (both BasePPOTrainer subclasses)."""

    def __init__(self, *args, **kwargs):
        strategy = kwargs["strategy"] if "strategy" in kwargs else args[1]
        keep_run_name(strategy.args)  # before BasePPOTrainer starts its loggers, as the W&B run id
        self.recipe_wandb_run_id = prepare_wandb_resume(strategy.args)
        super().__init__(*args, **kwargs)
        self.experience_maker = RecipeExperienceMaker(
            self.actor_model_group,
            self.critic_model_group,
            self.reward_model_group,
            self.reference_model_group,
            self.kl_ctl,
            self.strategy,
            self.tokenizer,
        )
        if hasattr(self, "samples_generator"):  # the sync trainer generates in-process (async: its generator actor)
            use_recipe_generator(self)
        if self.wandb_logger is not None:  # a resumed run logs each global step once (lead_recipes.training.resume)
            self.wandb_logger = StepOnceWandbLogger(
                self.wandb_logger, self.args.ckpt.path, self.recipe_wandb_run_id, self.args.ckpt.load_enable
            )

    recipe_step_skipped = False  # the last train_step was skipped (grading failed): no checkpoint for it

    @property
    def recipe_method(self) -> Method:
        return self.experience_maker.method

    def train_step(self, rollout_samples, global_step):
        # lead_recipes.training.grading_gate: the generator stops the run; the experience maker skips a failed step.
        # Optimizer steps see every length, not sorted extremes then middles (lead_recipes.training.step_order).
        order = functools.partial(balanced_then_shuffled, seed=int(self.args.train.seed) * 1_000_003 + global_step)
        try:
            with _patched(sys.modules[BasePPOTrainer.__module__], "balance_experiences", order):
                status, next_step = super().train_step(rollout_samples, global_step)
        except GradingStepSkipped as skipped:
            logger.warning(f"lead-recipes: global step {global_step + 1} not trained ({skipped}); no checkpoint")
            self.recipe_step_skipped = True
            return dict(skipped.stats), global_step + 1
        self.recipe_step_skipped = False
        status.update(self.experience_maker.last_stats)
        status.update(logged_share(status))
        self._append_problems(next_step)
        return status, next_step

    def _append_problems(self, step: int) -> None:
        if not self.experience_maker.last_problems:
            return
        os.makedirs(self.args.ckpt.path, exist_ok=True)
        with open(os.path.join(self.args.ckpt.path, PROBLEMS_FILE), "a", encoding="utf-8") as f:
            for record in self.experience_maker.last_problems:
                f.write(json.dumps({"step": int(step), **record}) + "\n")

    def save_logs_and_checkpoints(self, global_step, logs_dict=None, client_states=None):
        if self.recipe_step_skipped:  # logs only: no checkpoint (nor a pending save request) after a failed step
            with _patched(self.args.ckpt, "save_steps", float("inf")):
                logged = BasePPOTrainer.save_logs_and_checkpoints(self, global_step, logs_dict, client_states)
            self._log_progress(global_step, client_states)
            return logged
        # same dict object flows on to save_best_checkpoint in fit(), so best checkpoints carry it too
        client_states = {} if client_states is None else client_states
        client_states["recipe"] = recipe_client_state(
            self.recipe_method, self.recipe_wandb_run_id, self._recipe_settings()
        )
        # a pending save request makes the save happen now (SaveOnRequestMixin, then OpenRLHF's own save path)
        saved = super().save_logs_and_checkpoints(global_step, logs_dict, client_states)
        self._log_progress(global_step, client_states)
        return saved

    recipe_progress: StepProgress | None = None  # set when fit() restores (or starts) the run

    def _start_progress(self, checkpoint_states) -> None:
        """Counted from here: a resumed run's time per step and ETA are its own, not the checkpoint's run's."""
        loader = getattr(self, "prompts_dataloader", None)  # the async trainer's loader lives in its generator
        total = len(loader) * int(self.args.train.num_episodes) if loader is not None else None
        states = checkpoint_states or {}
        self.recipe_progress = StepProgress(
            total, int(states.get("global_step", 0)), int(states.get("total_consumed_prompts", 0))
        )

    def _log_progress(self, global_step, client_states) -> None:
        if self.recipe_progress is not None and "total_consumed_prompts" in (client_states or {}):
            logger.info(self.recipe_progress.line(int(global_step), int(client_states["total_consumed_prompts"])))

    def save_best_checkpoint(self, eval_metrics, global_step, client_states=None):
        if not self.recipe_step_skipped:
            return super().save_best_checkpoint(eval_metrics, global_step, client_states)

    def _recipe_settings(self) -> dict:
        return method_settings(self.recipe_method, self.args.rollout.max_new_tokens or self.args.data.max_len)

    def restore_best_checkpoint_state(self, checkpoint_states):
        super().restore_best_checkpoint_state(checkpoint_states)
        # validate (a refused resume raises here) before the side effects on the refused run's curves and records
        allow = RecipeConfig.of(getattr(self.args, "recipe", None)).resume.settings_change_enable
        changes = restore_recipe_state(self.recipe_method, checkpoint_states, self._recipe_settings(), allow)
        self._start_progress(checkpoint_states)
        step = int((checkpoint_states or {}).get("global_step", 0))
        tb = getattr(self, "tensorboard_logger", None)
        if tb is not None and step > 0:
            purge_tensorboard_from(tb, step + 1)  # the steps logged again
        if checkpoint_states and "global_step" in checkpoint_states:
            # steps after the checkpoint are trained again: drop their records so each (step, prompt) stays once
            dropped = truncate_problem_records(os.path.join(self.args.ckpt.path, PROBLEMS_FILE), step)
            if dropped:
                logger.info(f"lead-recipes: dropped {dropped} {PROBLEMS_FILE} records of steps > {step} (retrained)")
        if changes:
            logger.warning(f"lead-recipes: resuming under changed settings ({ALLOW_FLAG}): {'; '.join(changes)}")
        if changes is not None:
            logger.info(
                f"lead-recipes: restored {self.recipe_method.name} state at global_step {step}: "
                f"{checkpoint_states['recipe']['controller']}"
            )
            saved_id = checkpoint_states["recipe"].get("wandb_run_id")
            if saved_id and self.recipe_wandb_run_id and saved_id != self.recipe_wandb_run_id:
                logger.warning(
                    f"checkpoint was logged to W&B run {saved_id}, this run logs to "
                    f"{self.recipe_wandb_run_id} (WANDB_RUN_ID overrides the saved id)"
                )


class RecipeTrainer(_RecipeTrainerMixin, PPOTrainer.__ray_actor_class__):
    """The sync PPOTrainer with the recipe installed."""

    def fit(self, global_step: int = 0) -> None:
        super().fit(global_step)
        self.samples_generator.grading_windows.finish()  # the data ran out while grading was failing: stop


class RecipeMonitorTrainer(MonitorMixin, RecipeTrainer):
    """The sync trainer for a method whose registry entry needs monitor passes (lead_recipes.training.monitor)."""


class RecipeTrainingActor(_RecipeTrainerMixin, TrainingActor.__ray_actor_class__):
    """The async mode's training actor with the recipe installed (saves on request but does not stop)."""

    stop_on_save_request = False

    def broadcast_to_vllm(self):
        # Must be defined on this class: inherited as is, TrainingActor.broadcast_to_vllm's zero-argument super()
        # raises "super(type, obj): obj must be an instance or subtype of type" inside the Ray actor at the first
        # weight sync of a --train.async_enable run (tests/e2e/test_e2e_cpu.py's async run).
        return super().broadcast_to_vllm()


RecipePPOTrainer, RecipeMonitorPPOTrainer = ray.remote(RecipeTrainer), ray.remote(RecipeMonitorTrainer)
RecipeTrainingActorRemote = ray.remote(RecipeTrainingActor)


class RecipeAsyncTrainer(PPOTrainerAsync.__ray_actor_class__):
    """PPOTrainerAsync builds `TrainingActor` by a module-global lookup inside its own Ray process, so the swap has
    to happen there (a patch in the driver does not reach a fresh worker)."""

    def __init__(self, *args, **kwargs):
        module = importlib.import_module("openrlhf.trainer.ppo_trainer_async")
        module.TrainingActor, module.GenerateSamplesActor = RecipeTrainingActorRemote, RecipeGenerateSamplesActorRemote
        super().__init__(*args, **kwargs)


RecipePPOTrainerAsync = ray.remote(RecipeAsyncTrainer)


@contextlib.contextmanager
def _patched(obj, name, value):
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


def _reported_already(*_args, **_kwargs) -> None:
    """`print` for train_ppo_ray's module code: its validation messages were printed (in current flag names) when
    lead-recipes train resolved the same argv (lead_recipes.recipes.openrlhf_parser.openrlhf_args)."""


def run_openrlhf(openrlhf_argv: list[str], recipe: RecipeConfig):
    """Run `openrlhf.cli.train_ppo_ray` as __main__ on `openrlhf_argv` (its own parser and validation) with
    `args.recipe = recipe` attached by hierarchize and our trainer classes installed."""
    check_openrlhf()
    config = importlib.import_module("openrlhf.utils.config")
    original = config.hierarchize

    def hierarchize_with_recipe(flat):
        return with_recipe(original(flat), recipe, openrlhf_argv)

    pt, pta, ppo_actor = (
        importlib.import_module("openrlhf.trainer.ppo_trainer"),
        importlib.import_module("openrlhf.trainer.ppo_trainer_async"),
        importlib.import_module("openrlhf.trainer.ray.ppo_actor"),  # train_ppo_ray imports PolicyModelActor from it
    )
    argv = ["openrlhf.cli.train_ppo_ray", *openrlhf_argv]
    with contextlib.ExitStack() as stack:
        stack.enter_context(_patched(config, "hierarchize", hierarchize_with_recipe))
        stack.enter_context(_patched(sys, "argv", argv))
        trainer = RecipeMonitorPPOTrainer if entry(recipe.method).monitor else RecipePPOTrainer
        stack.enter_context(_patched(pt, "PPOTrainer", trainer))
        stack.enter_context(_patched(ppo_actor, "PolicyModelActor", RecipePolicyModelActorRemote))
        stack.enter_context(_patched(pta, "PPOTrainerAsync", RecipePPOTrainerAsync))
        quiet = {"print": _reported_already}
        runpy.run_module("openrlhf.cli.train_ppo_ray", run_name="__main__", alter_sys=False, init_globals=quiet)
