"""The grading guard: a run whose grader keeps failing stops with a message naming what failed, the failure share is
logged every step, steps it cannot judge never stop a run, and a failed step is skipped untrained (its end to end
check, through OpenRLHF's fit loop: test_grading_gate.py)."""

from __future__ import annotations

import pickle

import pytest

from lead_recipes.training import guard
from lead_recipes.training.guard import GradingFailure, GradingGuard


def step(correct=0, wrong=0, no_answer=0, timeout=0, error=0, missing=0.0):
    stats = {
        f"recipe/grading/{k}_count": float(v)
        for k, v in dict(correct=correct, wrong=wrong, no_answer=no_answer, timeout=timeout, error=error).items()
    }
    stats["recipe/grading/status_missing"] = missing
    return stats


def test_failure_share_above_threshold_for_k_consecutive_steps_stops_with_the_counts():
    g = GradingGuard(0.5, 3)
    assert g.observe(step(error=64)) == {guard.SHARE_KEY: 1.0}
    g.observe(step(timeout=40, wrong=24))
    with pytest.raises(GradingFailure) as info:
        g.observe(step(error=50, timeout=10, correct=4))
    message = str(info.value)
    assert "50 error, 10 timeout of 64" in message and "3 consecutive steps" in message
    assert "--recipe.guard.grade_failure_max 0.5" in message


def test_one_healthy_step_resets_the_streak():
    g = GradingGuard(0.5, 2)
    g.observe(step(error=64))
    g.observe(step(error=10, correct=54))
    g.observe(step(error=64))  # one bad step after a good one: streak 1, no stop
    with pytest.raises(GradingFailure):
        g.observe(step(error=64))


def test_share_equal_to_threshold_does_not_count_and_wrong_answers_are_not_failures():
    g = GradingGuard(0.5, 1)
    assert g.observe(step(error=32, correct=32)) == {guard.SHARE_KEY: 0.5}
    assert g.observe(step(wrong=60, no_answer=4)) == {guard.SHARE_KEY: 0.0}


def test_steps_without_grading_status_are_skipped_not_stopped():
    g = GradingGuard(0.0, 1)
    assert g.observe(step(error=64, missing=1.0)) == {}
    assert g.observe({"recipe/correct_rate": 0.0}) == {}
    assert g.observe(step()) == {}


@pytest.mark.parametrize(
    "share, steps, flag",
    [
        (1.5, 3, "grade_failure_max"),
        (-0.1, 3, "grade_failure_max"),
        (0.5, 0, "grade_failure_steps"),
        (0.5, 2.5, "grade_failure_steps"),
    ],
)
def test_out_of_range_settings_are_refused_naming_the_flag(share, steps, flag):
    with pytest.raises(ValueError, match=f"--recipe.guard.{flag}"):
        GradingGuard(share, steps)


def test_windows_feed_the_guard_one_steps_worth_of_graded_samples_at_a_time():
    g = GradingGuard(0.5, 2)
    windows = guard.SampleWindows(g, 4)
    failed, ok = (
        {f"status_{s}": float(s == "error") for s in guard.STATUSES},
        {f"status_{s}": float(s == "wrong") for s in guard.STATUSES},
    )
    for info in [failed] * 4 + [failed, ok, failed]:
        windows.add(info)  # window 1 failed (streak 1); window 2 is 3 samples in: not judged yet
    assert g.streak == 1
    windows.add({"correct": 0.0})  # no grading status: not counted
    with pytest.raises(GradingFailure, match="3 error, 0 timeout of 4"):
        windows.add(failed)


def test_failure_is_found_behind_a_ray_task_error_and_survives_pickling():
    from ray.exceptions import RayTaskError

    failure = GradingFailure("grading failed for 100% of the samples")
    assert str(pickle.loads(pickle.dumps(failure))) == str(failure)
    wrapped = RayTaskError("RecipeTrainer.fit", "traceback text", failure).as_instanceof_cause()
    assert guard.grading_failure(wrapped) is failure
    assert guard.grading_failure(RuntimeError("other")) is None


def test_a_step_above_the_threshold_is_skipped_with_its_share_and_one_at_it_is_not():
    import torch

    gate = pytest.importorskip("lead_recipes.training.grading_gate")
    from types import SimpleNamespace as NS

    recipe = NS(guard=NS(grade_failure_max=0.5, grade_failure_steps=3))

    def samples(error, ok):
        return [
            NS(info={f"status_{s}": torch.tensor([float(s == st)]) for s in guard.STATUSES})
            for st in ["error"] * error + ["correct"] * ok
        ]

    gate.skip_failed_step(samples(4, 4), recipe)  # 0.5 is not above 0.5
    gate.skip_failed_step([NS(info={"correct": torch.tensor([0.0])})], recipe)  # no grading status: not judged
    with pytest.raises(gate.GradingStepSkipped) as info:
        gate.skip_failed_step(samples(5, 3), recipe)
    assert info.value.stats[guard.SHARE_KEY] == 5 / 8 and info.value.stats[gate.SKIPPED_KEY] == 1.0


def test_plugin_train_step_returns_a_skipped_step_untrained_and_marks_it_for_no_checkpoint(tmp_path):
    from types import SimpleNamespace as NS

    plugin = pytest.importorskip("lead_recipes.training.openrlhf_plugin")
    from lead_recipes.training.grading_gate import GradingStepSkipped

    class Upstream:  # stands in for OpenRLHF's BasePPOTrainer.train_step, whose experience maker skipped the step
        def train_step(self, rollout_samples, global_step):
            raise GradingStepSkipped({guard.SHARE_KEY: 1.0})

    class Trainer(plugin._RecipeTrainerMixin, Upstream):
        pass

    trainer = object.__new__(Trainer)  # no Ray, no models: only train_step's own logic runs
    trainer.args = NS(ckpt=NS(path=str(tmp_path)), train=NS(seed=42))
    status, step = trainer.train_step(None, 4)
    assert (status, step, trainer.recipe_step_skipped) == ({guard.SHARE_KEY: 1.0}, 5, True)


def test_guard_flags_are_recipe_flags_with_their_defaults_and_checked_at_the_command_line(tmp_path):
    import argparse

    from lead_recipes.flags import add_recipe_flags, recipe_config
    from lead_recipes.training import cli as train

    parser = argparse.ArgumentParser()
    add_recipe_flags(parser)
    ns = recipe_config(parser.parse_args(["--recipe.guard.grade_failure_steps", "5"]))
    assert (ns.guard.grade_failure_max, ns.guard.grade_failure_steps) == (0.5, 5)
    with pytest.raises(train.UsageError, match="--recipe.guard.grade_failure_max"):
        train.parse_command_line(["--recipe.guard.grade_failure_max", "2"])


def test_a_grader_failing_in_every_worker_stops_training_on_the_third_step(monkeypatch):
    """The package reward function with a broken grader, through the plug-in's per-step statistics, into the guard."""
    from types import SimpleNamespace as NS

    import torch

    from lead_recipes.methods import build_method
    from lead_recipes.methods.config import RecipeConfig
    from lead_recipes.reward import reward_func
    from lead_recipes.training.step_stats import rollout_batch, step_stats

    def broken():
        raise RuntimeError("grader pool could not start")

    monkeypatch.setattr(reward_func, "get_grader", broken)
    recipe = RecipeConfig(method="lead")
    method, g = build_method(recipe), GradingGuard.from_recipe(recipe)
    n, steps = 4, []
    with pytest.raises(GradingFailure, match=r"8 error, 0 timeout of 8"):
        for step_no in range(1, 4):
            steps.append(step_no)
            logs = [
                reward_func.reward_func([f"q{i} \\boxed{{1}}"], [f"q{i} "], ["1"])["extra_logs"] for i in range(2 * n)
            ]
            info = {k: torch.tensor([d[k] for d in logs]) for k in logs[0]}
            exp = NS(
                info=info,
                action_mask=torch.ones(2 * n, 5),
                truncated=torch.zeros(2 * n),
                index=list(range(2 * n)),
                prompts=[f"q{i // n}" for i in range(2 * n)],
                labels=["1"] * (2 * n),
            )
            batch, extra = rollout_batch([exp], lambda t: t.reshape(-1, n), 16)
            out = method.step(batch)
            stats = step_stats(method.name, batch, out, out.rewards, torch.zeros(2 * n), extra)
            assert stats["recipe/correct_rate"] == 0.0  # silently all wrong, as LEAD would train on
            g.observe(stats)
    assert steps == [1, 2, 3]  # the default 3 consecutive steps, not earlier


def test_a_skipped_step_survives_a_pickle_round_trip_with_its_stats():
    gate = pytest.importorskip("lead_recipes.training.grading_gate")
    stats = {guard.SHARE_KEY: 0.75, guard.SKIPPED_KEY: 1.0}
    back = pickle.loads(pickle.dumps(gate.GradingStepSkipped(stats)))  # as it crosses Ray's task boundary
    assert isinstance(back, gate.GradingStepSkipped) and back.stats == stats
    assert str(back) == "step skipped: grading failed for 75% of its samples"


def test_fit_closes_the_trackers_when_grading_fails_so_the_last_logs_are_flushed():
    from types import SimpleNamespace as NS

    from lead_recipes.training.preemption import SavedOnRequest, SaveOnRequestMixin

    class Tracker:
        closed = 0

        def close(self):
            self.closed += 1

    class Upstream:  # OpenRLHF's fit: closes its trackers only on a normal end
        def __init__(self, error):
            self.error, self.args = error, NS()
            self.wandb_logger, self.tensorboard_logger = Tracker(), Tracker()

        def fit(self):
            if self.error:
                raise self.error
            self.wandb_logger.close()
            self.tensorboard_logger.close()

    class Trainer(SaveOnRequestMixin, Upstream):
        pass

    for error in (GradingFailure("outage"), SavedOnRequest(3, "global_step3"), KeyboardInterrupt()):
        trainer = Trainer(error)
        with pytest.raises(type(error)):
            trainer.fit()
        assert (trainer.wandb_logger.closed, trainer.tensorboard_logger.closed) == (1, 1), error
    trainer = Trainer(None)
    trainer.fit()  # a normal end: upstream closed them, once
    assert (trainer.wandb_logger.closed, trainer.tensorboard_logger.closed) == (1, 1)
    trainer = Trainer(GradingFailure("outage"))
    trainer.tensorboard_logger = None  # a tracker may be off; and a failing close does not hide the error
    trainer.wandb_logger.close = lambda: (_ for _ in ()).throw(OSError("wandb gone"))
    with pytest.raises(GradingFailure):
        trainer.fit()
