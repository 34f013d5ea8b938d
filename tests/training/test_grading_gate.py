"""A step whose grading failed trains nothing, and grading failures stop the run under dynamic filtering too: the
real sync RecipeTrainer (OpenRLHF's PPOTrainer.fit loop, its SamplesGenerator and experience maker) on a local Ray,
with a stand-in vLLM engine actor returning responses already graded (as OpenRLHF's rollout executor does), the
model forwards replaced by kl = 0 and ppo_train / the method's step recording their calls."""

from __future__ import annotations

import pytest
import ray
from support.trainer import CAP, PROMPTS_PER_STEP, GradedEngine, make_trainer, recording_trainer

from lead_recipes.training.guard import GradingFailure, grading_failure

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def checkpoints(ckpt):
    return sorted(p.name for p in (ckpt / "_actor").glob("global_step*"))


def test_failed_grading_steps_change_neither_weights_nor_controller_and_write_no_checkpoint(
    ray_local, tiny_qwen2, prompt_file, tmp_path
):
    ckpt = tmp_path / "ckpt"
    trainer, calls = recording_trainer(tiny_qwen2, prompt_file, ckpt, healthy=PROMPTS_PER_STEP)
    after_step_1 = {}
    save = trainer.save_logs_and_checkpoints

    def save_and_note(global_step, logs_dict=None, client_states=None):
        if global_step == 1:
            after_step_1.update(trainer.recipe_method.state_dict())
        return save(global_step, logs_dict, client_states)

    trainer.save_logs_and_checkpoints = save_and_note
    with pytest.raises(GradingFailure, match="3 consecutive steps"):
        trainer.fit()  # step 1 healthy, steps 2-4 graded `error` (save_steps 1: a checkpoint every trained step)
    assert calls == {"ppo_train": [0], "method_step": 1}  # only the healthy step reached the optimizer and method
    assert trainer.recipe_method.state_dict() == after_step_1
    assert checkpoints(ckpt) == ["global_step1"]  # none after the first failing step


def test_a_grading_outage_under_dynamic_filtering_stops_the_run_before_the_data_runs_out(
    ray_local, tiny_qwen2, prompt_file, tmp_path
):
    ckpt = tmp_path / "ckpt"
    trainer, calls = recording_trainer(
        tiny_qwen2, prompt_file, ckpt, healthy=0, extra=["--algo.dynamic_filtering_enable"]
    )
    # every group averages 0 and is filtered out: no step is ever trained, so only the generator sees the failures
    with pytest.raises(GradingFailure, match=r"grading failed for 100% of the samples \(32 error, 0 timeout of 32\)"):
        trainer.fit()
    assert calls == {"ppo_train": [], "method_step": 0} and checkpoints(ckpt) == []


def test_a_run_whose_data_runs_out_during_a_failing_streak_ends_with_the_guards_message(
    ray_local, tiny_qwen2, prompt_file, tmp_path
):
    ckpt = tmp_path / "ckpt"
    trainer, calls = recording_trainer(tiny_qwen2, prompt_file, ckpt, healthy=2 * PROMPTS_PER_STEP)
    # steps 1-2 healthy, steps 3-4 (the last) graded `error`: a streak of 2 < grade_failure_steps 3 when data ends
    with pytest.raises(GradingFailure, match=r"in the last 2 window\(s\) when the data ran out"):
        trainer.fit()
    assert calls["ppo_train"] == [0, 1] and checkpoints(ckpt) == ["global_step1", "global_step2"]


def test_a_filtered_outage_that_exhausts_the_data_ends_with_the_guards_message(
    ray_local, tiny_qwen2, prompt_file, tmp_path
):
    ckpt = tmp_path / "ckpt"
    trainer, calls = recording_trainer(
        tiny_qwen2,
        prompt_file,
        ckpt,
        healthy=0,
        extra=["--algo.dynamic_filtering_enable"],
        recipe_flags={"recipe.guard.grade_failure_steps": 5},
    )
    # 16 prompts = 4 windows, all `error` and all filtered out: the data runs out before the 5th window
    with pytest.raises(GradingFailure, match=r"grading failed for 100% .* in the last 4 window\(s\)"):
        trainer.fit()
    assert calls == {"ppo_train": [], "method_step": 0} and checkpoints(ckpt) == []


def _async_run(tiny, prompts, tmp_path, grade_failure_steps, extra=()):
    """OpenRLHF's async trainer (--train.async_enable) with the plug-in's generator and training actors, each its
    own Ray actor as in a real run; every sample graded `error`, so each step is skipped before the forwards."""
    from lead_recipes.training import openrlhf_plugin as plugin

    tb = tmp_path / "tb"
    sync = make_trainer(  # for the resolved strategy and the checkpoint stand-in group
        tiny,
        prompts,
        tmp_path / "ckpt",
        "lead",
        extra=["--train.async_enable", "--logger.tensorboard_dir", str(tb), *extra],
        recipe_flags={"recipe.guard.grade_failure_steps": grade_failure_steps},
    )
    trainer = plugin.RecipePPOTrainerAsync.remote(
        str(tiny),
        sync.strategy,
        sync.actor_model_group,
        None,
        None,
        None,
        [GradedEngine.remote(0)],
        do_sample=True,
        max_len=CAP + 256,
        max_new_tokens=CAP,
        temperature=1.0,
        top_p=1.0,
    )
    with pytest.raises(ray.exceptions.RayTaskError) as info:
        ray.get(trainer.fit.remote(), timeout=300)
    failure = grading_failure(info.value)
    assert failure is not None, info.value
    return str(failure), tb / "test"


def test_a_grading_failure_in_the_async_generator_actor_reaches_the_driver(
    ray_local, tiny_qwen2, prompt_file, tmp_path
):
    from cpu_e2e.checks import tensorboard_steps

    # window 1 fails (step 1 skipped by the training actor), window 2 fails while step 2 is generated: the generator
    # raises with the training actor waiting on its queue, and the error reaches the driver (no hang)
    message, tb = _async_run(tiny_qwen2, prompt_file, tmp_path, grade_failure_steps=2)
    assert "(32 error, 0 timeout of 32)" in message and "for 2 consecutive steps" in message
    assert tensorboard_steps(tb, "train/recipe/grading/step_skipped") == [1]
    assert checkpoints(tmp_path / "ckpt") == []


def test_an_async_run_whose_data_runs_out_during_a_failing_streak_ends_with_the_guards_message(
    ray_local, tiny_qwen2, prompt_file, tmp_path
):
    message, _ = _async_run(tiny_qwen2, prompt_file, tmp_path, grade_failure_steps=5)
    assert "in the last 4 window(s) when the data ran out" in message
    assert checkpoints(tmp_path / "ckpt") == []


def test_an_async_grading_outage_under_dynamic_filtering_stops_the_run_before_the_data_runs_out(
    ray_local, tiny_qwen2, prompt_file, tmp_path
):
    # every group averages 0 and is filtered out inside the generator actor, so no step reaches the training actor:
    # only the generator's count before the filter can stop the run
    message, tb = _async_run(
        tiny_qwen2, prompt_file, tmp_path, grade_failure_steps=2, extra=["--algo.dynamic_filtering_enable"]
    )
    assert "grading failed for 100% of the samples (32 error, 0 timeout of 32)" in message
    assert "when the data ran out" not in message
    assert checkpoints(tmp_path / "ckpt") == []
