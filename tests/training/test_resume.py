"""A resumed run continues the run that saved the checkpoint: the method's resolved settings are saved with its
state, and a resume under other settings is refused naming every changed flag, unless explicitly allowed."""

from __future__ import annotations

import pytest
from support.trainer import make_trainer

from lead_recipes.methods import build_method
from lead_recipes.methods.config import LeadConfig, LeashConfig, RecipeConfig
from lead_recipes.training import resume
from lead_recipes.training.guard import SKIPPED_KEY


def _saved(method, cap=4000):
    return {"global_step": 2, "recipe": resume.recipe_client_state(method, None, resume.method_settings(method, cap))}


def test_settings_hold_every_field_of_the_methods_sections_and_the_cap_b_max_defaults_to():
    lead = resume.method_settings(build_method(RecipeConfig(method="lead")), 4000)
    assert lead["--recipe.method"] == "lead" and lead["--recipe.lead.beta_ema"] == 0.95
    assert lead["--rollout.max_new_tokens"] == 4000 and not any(k.startswith("--recipe.leash.") for k in lead)
    composed = resume.method_settings(build_method(RecipeConfig(method="composed")), 4000)
    assert {k.split(".")[1] for k in composed if k.startswith("--recipe.") and k != "--recipe.method"} == {
        "composed",
        "lead",
        "grpo_lead",
        "leash",
    }
    assert "--rollout.max_new_tokens" not in resume.method_settings(build_method(RecipeConfig(method="leash")), 4000)


def test_a_resume_with_changed_settings_is_refused_naming_every_changed_flag():
    saved = _saved(build_method(RecipeConfig(method="lead")))
    now = build_method(RecipeConfig(method="lead", lead=LeadConfig(beta_ema=0.9, l_min=500.0)))
    with pytest.raises(RuntimeError) as info:
        resume.restore_recipe_state(now, saved, resume.method_settings(now, 8000))
    message = str(info.value)
    for changed in (
        "--recipe.lead.beta_ema 0.95 in the checkpoint, 0.9 now",
        "--recipe.lead.l_min 1000.0 in the checkpoint, 500.0 now",
        "--rollout.max_new_tokens 4000 in the checkpoint, 8000 now",
        resume.ALLOW_FLAG,
    ):
        assert changed in message, message
    assert "aggregator" not in message  # unchanged flags are not named


def test_the_flag_allows_the_change_restores_the_controller_and_returns_the_changes():
    method = build_method(RecipeConfig(method="leash"))
    saved = _saved(method)
    now = build_method(RecipeConfig(method="leash", leash=LeashConfig(lr=0.05)))
    changes = resume.restore_recipe_state(now, saved, resume.method_settings(now, 4000), allow_change=True)
    assert changes == ["--recipe.leash.lr 0.01 in the checkpoint, 0.05 now"]
    assert now.state_dict() == method.state_dict()
    assert resume.restore_recipe_state(now, saved, resume.method_settings(method, 4000)) == []  # same settings


def test_a_checkpoint_without_settings_is_refused_like_one_with_other_settings():
    method = build_method(RecipeConfig(method="lead"))
    bare = {"global_step": 2, "recipe": {**resume.recipe_client_state(method, None), "settings": None}}
    with pytest.raises(RuntimeError, match=r"--recipe\.lead\.beta_ema '\(absent\)' in the checkpoint"):
        resume.restore_recipe_state(method, bare, resume.method_settings(method, 4000))


@pytest.mark.parametrize("field,value", [("method", "leash"), ("version", 2)])
def test_recipe_state_of_another_method_or_version_is_refused(field, value):
    method = build_method(RecipeConfig(method="lead"))
    state = {**resume.recipe_client_state(method, None, resume.method_settings(method, 4000)), field: value}
    with pytest.raises(RuntimeError, match=f"version {state['version']} of method {state['method']!r}"):
        resume.restore_recipe_state(method, {"global_step": 3, "recipe": state}, resume.method_settings(method, 4000))


def test_the_allow_flag_is_a_recipe_flag_off_by_default():
    import argparse

    from lead_recipes.flags import add_recipe_flags, recipe_config

    parser = argparse.ArgumentParser()
    add_recipe_flags(parser)
    assert recipe_config(parser.parse_args([])).resume.settings_change_enable is False
    assert recipe_config(parser.parse_args([resume.ALLOW_FLAG])).resume.settings_change_enable is True


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_trainer_resumed_with_another_beta_ema_refuses_and_with_the_flag_continues(
    ray_local, tiny_qwen2, prompt_file, tmp_path
):
    ckpt = tmp_path / "ckpt"
    first = make_trainer(tiny_qwen2, prompt_file, ckpt, "lead")
    states = {"episode": 0, "global_step": 1, "total_consumed_prompts": 4, "data_loader_state_dict": {}}
    first.save_logs_and_checkpoints(1, {}, states)
    changed = {"recipe.lead.beta_ema": 0.9}
    second = make_trainer(tiny_qwen2, prompt_file, ckpt, "lead", load=True, recipe_flags=changed)
    with pytest.raises(RuntimeError, match=r"--recipe\.lead\.beta_ema 0\.95 in the checkpoint, 0\.9 now"):
        second.restore_best_checkpoint_state(second.init_checkpoint_states())
    allowed = make_trainer(
        tiny_qwen2,
        prompt_file,
        ckpt,
        "lead",
        load=True,
        recipe_flags={**changed, "recipe.resume.settings_change_enable": True},
    )
    allowed.restore_best_checkpoint_state(allowed.init_checkpoint_states())
    assert allowed.recipe_method.config.beta_ema == 0.9


def test_tensorboard_shows_each_step_once_with_the_resumed_values_after_a_purge(tmp_path):
    from types import SimpleNamespace as NS

    from cpu_e2e.checks import tensorboard_steps
    from openrlhf.utils.logging_utils import TensorboardLogger

    args = NS(logger=NS(tensorboard_dir=str(tmp_path), wandb=NS(run_name="run")))
    first = TensorboardLogger(args)  # OpenRLHF's own logger: steps 1-4, then a crash
    for step in (1, 2, 3, 4):
        first.log_train(step, {"x": float(step)})
    first.close()
    resumed = TensorboardLogger(args)  # resumed from global_step2: steps 3-4 again
    resume.purge_tensorboard_from(resumed, 3)
    for step in (3, 4):
        resumed.log_train(step, {"x": 10.0 * step})
    resumed.close()
    assert tensorboard_steps(tmp_path / "run", "train/x") == [1, 2, 3, 4]
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tmp_path / "run"))
    acc.Reload()
    assert [e.value for e in acc.Scalars("train/x")] == [1.0, 2.0, 30.0, 40.0]


class _Recorder:
    def __init__(self):
        self.train, self.eval, self.closed, self.records = [], [], False, []

    def log_train(self, step, logs):
        self.train.append(step)
        self.records.append((step, "skipped" if logs.get(SKIPPED_KEY) else "trained"))

    def log_eval(self, step, logs):
        self.eval.append(step)

    def close(self):
        self.closed = True


def test_wandb_logs_each_global_step_once_across_a_resume_of_the_same_run(tmp_path):
    first = resume.StepOnceWandbLogger(_Recorder(), str(tmp_path), "abc", resuming=False)
    for step in (1, 2, 3, 4):
        first.log_train(step, {})
        first.log_eval(step, {})
    resumed = resume.StepOnceWandbLogger(_Recorder(), str(tmp_path), "abc", resuming=True)  # from global_step2
    for step in (3, 4, 5):
        resumed.log_train(step, {})
        resumed.log_eval(step, {})
    assert (first.inner.train, resumed.inner.train, resumed.inner.eval) == ([1, 2, 3, 4], [5], [5])
    resumed.close()
    assert resumed.inner.closed
    other = resume.StepOnceWandbLogger(_Recorder(), str(tmp_path), "new-id", resuming=True)  # another W&B run
    other.log_train(3, {})
    fresh = resume.StepOnceWandbLogger(_Recorder(), str(tmp_path), "abc", resuming=False)  # a fresh run: no skip
    fresh.log_train(1, {})
    assert other.inner.train == [3] and fresh.inner.train == [1]


def test_wandb_does_not_record_a_skipped_step_so_its_retrained_step_is_logged_after_a_resume(tmp_path):
    first = resume.StepOnceWandbLogger(_Recorder(), str(tmp_path), "abc", resuming=False)
    first.log_train(1, {"x": 1.0})
    first.log_train(2, {SKIPPED_KEY: 1.0})  # grading outage: logged, not trained, no checkpoint; then a crash
    first.log_train(3, {SKIPPED_KEY: 1.0})
    resumed = resume.StepOnceWandbLogger(_Recorder(), str(tmp_path), "abc", resuming=True)  # from global_step1
    for step in (2, 3):
        resumed.log_train(step, {SKIPPED_KEY: 0.0, "x": 2.0})
        resumed.log_eval(step, {})
    assert (first.inner.train, resumed.inner.train, resumed.inner.eval) == ([1, 2, 3], [2, 3], [2, 3])


def test_an_explicit_b_max_leaves_the_rollout_cap_out_of_the_settings_so_changing_it_is_allowed():
    method = build_method(RecipeConfig(method="lead", lead=LeadConfig(b_max=3000)))
    settings = resume.method_settings(method, 4000)
    assert settings["--recipe.lead.b_max"] == 3000 and "--rollout.max_new_tokens" not in settings
    assert resume.restore_recipe_state(method, _saved(method, 4000), resume.method_settings(method, 8000)) == []
    composed = build_method(RecipeConfig(method="composed", lead=LeadConfig(b_max=3000)))
    assert "--rollout.max_new_tokens" not in resume.method_settings(composed, 4000)


def test_a_refused_resume_leaves_tensorboard_and_the_problem_records_untouched(tmp_path):
    """Validation before side effects: a resume refused for changed settings must not have purged the curves or
    dropped the per-problem records of the run it refused to continue."""
    import json
    from types import SimpleNamespace as NS

    from cpu_e2e.checks import tensorboard_steps
    from openrlhf.utils.logging_utils import TensorboardLogger

    from lead_recipes.training import openrlhf_plugin as plugin

    args = NS(logger=NS(tensorboard_dir=str(tmp_path / "tb"), wandb=NS(run_name="run")))
    first = TensorboardLogger(args)  # the first run: steps 1-4 logged and recorded, checkpoint at global_step 2
    for step in (1, 2, 3, 4):
        first.log_train(step, {"x": float(step)})
    first.close()
    problems = tmp_path / plugin.PROBLEMS_FILE
    problems.write_text("".join(json.dumps({"step": s, "problem": "a"}) + "\n" for s in (1, 2, 3, 4)))
    saved = _saved(build_method(RecipeConfig(method="lead")))

    class Resumed(plugin._RecipeTrainerMixin, plugin.BasePPOTrainer):
        def __init__(self):  # no Ray, no models: what restore uses, with another --recipe.lead.beta_ema
            recipe = RecipeConfig(method="lead", lead=LeadConfig(beta_ema=0.9))
            self.args = NS(ckpt=NS(path=str(tmp_path)), rollout=NS(max_new_tokens=4000), data=NS(max_len=4000))
            self.args.recipe = recipe
            self.experience_maker = NS(method=build_method(recipe))
            self.tensorboard_logger = TensorboardLogger(args)

    trainer = Resumed()
    with pytest.raises(RuntimeError, match="--recipe.lead.beta_ema 0.95 in the checkpoint, 0.9 now"):
        trainer.restore_best_checkpoint_state(saved)
    trainer.tensorboard_logger.close()
    assert tensorboard_steps(tmp_path / "tb" / "run", "train/x") == [1, 2, 3, 4]
    assert [json.loads(x)["step"] for x in problems.read_text().splitlines()] == [1, 2, 3, 4]


def _runs_against_one_wandb_run(tmp_path, rng, runs=6, save_steps=2):
    """Several starts of one training against one W&B run id, as the trainer drives them: each start resumes from
    the latest checkpoint, trains or skips (grading failed: logged, no checkpoint) steps, evaluates every third
    step, checkpoints trained steps that are multiples of save_steps and crashes at a random point. Returns what
    W&B received and the steps some start trained."""
    wandb, latest, trained = _Recorder(), 0, set()
    for run in range(runs):
        logger = resume.StepOnceWandbLogger(wandb, str(tmp_path), "abc", resuming=run > 0)
        step = latest
        for _ in range(rng.randint(1, 6)):
            step += 1
            skipped = rng.random() < 0.3
            trained |= set() if skipped else {step}
            logger.log_train(step, {SKIPPED_KEY: 1.0} if skipped else {"x": 1.0})
            if step % 3 == 0:
                logger.log_eval(step, {})
            if not skipped and step % save_steps == 0:
                latest = step
    return wandb, trained


@pytest.mark.parametrize("seed", range(200))
def test_wandb_shows_each_trained_step_once_across_several_resumes(tmp_path, seed):
    """Whatever the crash points and skipped steps: every step trained in some start has exactly one trained
    point in W&B (the first), nothing is logged at a step after its trained point, a skipped step is logged at
    most once as skipped, and each eval step once."""
    import random

    wandb, trained = _runs_against_one_wandb_run(tmp_path, random.Random(seed))
    for i, (step, kind) in enumerate(wandb.records):
        later = [k for s, k in wandb.records[i + 1 :] if s == step]
        assert not (kind == "trained" and later), (step, wandb.records)
        assert not (kind == "skipped" and "skipped" in later), (step, wandb.records)
    trained_points = [s for s, k in wandb.records if k == "trained"]
    assert sorted(trained_points) == sorted(trained), wandb.records
    assert len(wandb.eval) == len(set(wandb.eval)), wandb.eval


def test_a_step_skipped_then_trained_below_the_highest_logged_step_is_logged_after_a_resume(tmp_path):
    """Steps 1-3 trained (checkpoint at 2), 4 skipped, 5 trained, crash; the resume from global_step2 trains 3-5
    again: step 4 is trained for the first time and its values reach W&B; 3 and 5 keep their first values."""
    first = resume.StepOnceWandbLogger(_Recorder(), str(tmp_path), "abc", resuming=False)
    for step in (1, 2, 3, 4, 5):
        first.log_train(step, {SKIPPED_KEY: 1.0} if step == 4 else {"x": 1.0})
    resumed = resume.StepOnceWandbLogger(_Recorder(), str(tmp_path), "abc", resuming=True)
    for step in (3, 4, 5, 6):
        resumed.log_train(step, {"x": 2.0})
    assert resumed.inner.records == [(4, "trained"), (6, "trained")]


def test_a_resume_reuses_the_stopped_runs_default_run_name_so_tensorboard_continues_in_its_directory(tmp_path):
    """OpenRLHF's default run name is the start time (`ppo_%m%dT%H:%M`) and names the TensorBoard directory: a
    resume keeps the stopped run's name unless --logger.wandb.run_name was given."""
    from types import SimpleNamespace as NS

    def args(name, load, given=False):
        return NS(
            ckpt=NS(path=str(tmp_path), load_enable=load),
            logger=NS(tensorboard_dir=str(tmp_path / "tb"), wandb=NS(run_name=name)),
            recipe_run_name_given=given,
        )

    first = args("ppo_0102T10:00", load=True)  # first start of a requeueable job: nothing to resume yet
    resume.keep_run_name(first)
    assert first.logger.wandb.run_name == "ppo_0102T10:00"
    (tmp_path / "_actor").mkdir()  # it wrote checkpoints, then stopped
    resumed = args("ppo_0102T11:07", load=True)
    resume.keep_run_name(resumed)
    assert resumed.logger.wandb.run_name == "ppo_0102T10:00"
    named = args("my-run", load=True, given=True)  # an explicit name wins
    resume.keep_run_name(named)
    assert named.logger.wandb.run_name == "my-run"
    fresh = args("ppo_0102T12:00", load=False)  # a fresh run in the same directory keeps its own name
    resume.keep_run_name(fresh)
    assert fresh.logger.wandb.run_name == "ppo_0102T12:00"
    again = args("ppo_0102T13:00", load=True)  # and is the one a later resume continues
    resume.keep_run_name(again)
    assert again.logger.wandb.run_name == "ppo_0102T12:00"
