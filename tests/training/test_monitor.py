"""The monitor seam of Laser-D/-DE (lead_recipes.training.monitor) inside OpenRLHF's real sync `PPOTrainer.fit`, with
support.trainer's stand-ins for what needs a GPU (a graded vLLM engine actor, the model forwards, ppo_train and
DeepSpeed's checkpoint save): one pass before step 1 and one after each --eval.steps-th step, made before that
step's checkpoint and reused by fit's own evaluate; a resume restores the saved targets (or re-monitors, the
authors' way); eval samples become (correct, response tokens) per prompt; what the seam needs is refused at launch."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from openrlhf.trainer.ppo_utils.experience import Experience
from support.trainer import recording_trainer

from lead_recipes.recipes import openrlhf_parser
from lead_recipes.training import openrlhf_plugin as plugin
from lead_recipes.training.args import monitor_errors
from lead_recipes.training.grading_gate import GradingStepSkipped
from lead_recipes.training.guard import SHARE_KEY, SKIPPED_KEY, STATUSES, GradingFailure
from lead_recipes.training.monitor import MonitorMixin, monitor_pass

# GradedEngine's 8 samples of a prompt: 4 correct, 3..10 response tokens. Every prompt is in the medium band
# (accuracy 1/2), whose target needs coverage ≥ 1/2: grid [7, 1024, …] ⇒ 7 (covers 3..7, 5 of 8)
LASER_D = {"recipe.laser_d.grid_lower": 7}
TARGETS = {"low": None, "medium": 7, "high": None}


def sample(prompt, correct, tokens):
    return Experience(
        action_mask=torch.tensor([[True] * tokens + [False] * 3]),
        prompts=[prompt],
        info={"correct": torch.tensor([float(correct)])},
    )


def test_monitor_pass_groups_n_samples_per_prompt_and_counts_response_tokens():
    samples = [sample("p", j < 3, 5 + j) for j in range(4)] + [sample("q", j == 0, 9) for j in range(4)]
    correct, lengths = monitor_pass(samples, 4)
    assert correct.tolist() == [[True, True, True, False], [True, False, False, False]]
    assert lengths.tolist() == [[5, 6, 7, 8], [9, 9, 9, 9]]


def test_monitor_pass_refuses_samples_that_are_not_n_per_prompt():
    samples = [sample("p", True, 5), sample("q", True, 5)]
    with pytest.raises(ValueError, match="not the n = 2 samples of one prompt"):
        monitor_pass(samples, 2)
    with pytest.raises(ValueError, match="not a positive multiple of n = 4"):
        monitor_pass(samples, 4)


def test_monitor_pass_without_grades_names_the_reward_function():
    s = sample("p", True, 5)
    del s.info["correct"]
    with pytest.raises(ValueError, match="reward function must be lead-recipes'"):
        monitor_pass([s, s], 2)


def graded(prompt, status, tokens=5):
    s = sample(prompt, status == "correct", tokens)
    s.info.update({f"status_{k}": torch.tensor([float(k == status)]) for k in STATUSES})
    return s


def monitor_of(samples):
    """A MonitorMixin over stand-ins: an eval generator returning `samples`, a method recording what it observes."""
    seen = []

    class Method:
        def observe_monitor(self, correct, lengths, step=None):
            seen.append(step)
            return dict.fromkeys(("low", "medium", "high"))

    class Generator:
        def generate_eval_samples(self, **_):
            return samples

    trainer = MonitorMixin()
    trainer.args = SimpleNamespace(eval=SimpleNamespace(temperature=0.6, n_samples_per_prompt=2, steps=2))
    trainer.generate_kwargs, trainer.samples_generator, trainer.recipe_method = {}, Generator(), Method()
    return trainer, seen


def test_a_monitor_pass_whose_grading_failed_stops_instead_of_setting_targets():
    """Failed grades (error/timeout) read correct = 0: a pass made in a grader outage would put every prompt in
    the low band and its targets would hold for --eval.steps steps (and in the checkpoint). Above the guard's
    --recipe.guard.grade_failure_max it stops the run before the targets change; below it, it is used."""
    failed = [graded("p", "error"), graded("p", "correct"), graded("q", "timeout"), graded("q", "error")]
    trainer, seen = monitor_of(failed)
    with pytest.raises(GradingFailure, match="monitor pass at global step 2"):
        trainer._recipe_monitor(2)
    assert seen == []
    trainer, seen = monitor_of(
        [graded("p", "error"), graded("p", "correct"), graded("q", "wrong"), graded("q", "wrong")]
    )
    trainer._recipe_monitor(2)
    assert seen == [2]


def args_of(*flags):
    base = [
        "--actor.model_name_or_path",
        "m",
        "--data.prompt_dataset",
        "d.jsonl",
        "--algo.advantage.estimator",
        "group_norm",
    ]
    base += ["--reward.remote_url", "r.py", "--rollout.n_samples_per_prompt", "8", *flags]
    return openrlhf_parser.openrlhf_args(base)[0]


def test_laser_d_without_an_eval_dataset_or_period_is_refused_naming_both():
    errors = monitor_errors(args_of(), "laser-d")
    assert any("needs a monitor set: give --eval.dataset" in e for e in errors)
    assert any("needs --eval.steps > 0" in e for e in errors)
    assert monitor_errors(args_of("--eval.dataset", "m.jsonl", "--eval.steps", "20"), "laser-de") == []
    assert monitor_errors(args_of(), "laser") == []  # a method without monitor passes needs none


def test_laser_de_refuses_the_async_trainer():
    args = args_of("--eval.dataset", "m.jsonl", "--eval.steps", "20", "--train.async_enable")
    assert monitor_errors(args, "laser-de") == [
        "--recipe.method laser-de does not run with --train.async_enable: its monitor passes are made in the sync "
        "trainer's step (docs/training.md#the-monitor-seam-laser-d-laser-de); drop the flag"
    ]


def monitored(tiny, prompts, ckpt, load=False, recipe_flags=None):
    """A recording trainer of laser-d with the monitor seam: 16 prompts, 4 per step ⇒ 4 steps; the monitor set is
    the prompt file, 8 samples each, every 2 steps; a checkpoint every 2 steps. Records each pass's step."""
    extra = ["--eval.dataset", str(prompts), "--eval.steps", "2", "--eval.n_samples_per_prompt", "8"]
    trainer, calls = recording_trainer(
        tiny,
        prompts,
        ckpt,
        healthy=10_000,
        extra=[*extra, *(["--ckpt.load_enable"] if load else [])],
        recipe_flags={**LASER_D, **(recipe_flags or {})},
        method="laser-d",
        cls=plugin.RecipeMonitorTrainer,
    )
    trainer.args.ckpt.save_steps = 2
    calls["passes"], calls["generated"] = [], 0
    # stand-in: a resumed fit() first syncs the restored weights to vLLM (DeepSpeed and vLLM need a GPU); noted so
    # the order of that sync and the first pass shows
    trainer.broadcast_to_vllm = lambda: calls["passes"].append("weights")
    observe, generate = trainer.recipe_method.observe_monitor, trainer.samples_generator.generate_eval_samples

    def observe_and_note(correct, lengths, step=None):
        calls["passes"].append(step)
        return observe(correct, lengths, step)

    def generate_and_count(**kwargs):
        calls["generated"] += 1
        return generate(**kwargs)

    trainer.recipe_method.observe_monitor = observe_and_note
    trainer.samples_generator.generate_eval_samples = generate_and_count
    return trainer, calls


def saved(ckpt, tag):
    return torch.load(ckpt / "_actor" / tag / "client_states.pt", weights_only=True)["recipe"]["controller"]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_fit_monitors_before_step_1_and_before_each_periodic_checkpoint_and_evaluates_once(
    ray_local, tiny_qwen2, prompt_file, tmp_path
):
    trainer, calls = monitored(tiny_qwen2, prompt_file, tmp_path / "ckpt")
    trainer.fit()
    assert calls["method_step"] == 4 and calls["passes"] == [0, 2, 4]
    assert calls["generated"] == 3  # fit's evaluate at steps 2 and 4 reused the pass, it did not sample again
    # the step-2 checkpoint holds the step-2 pass (fit saves before it evaluates)
    assert saved(tmp_path / "ckpt", "global_step2") == {"targets": TARGETS, "last_monitor_step": 2, "step": 2}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_pass_due_at_a_skipped_step_runs_before_the_next_steps_advantages(
    ray_local, tiny_qwen2, prompt_file, tmp_path
):
    """Step 2 is skipped (its grading failed): its pass is not lost for a whole period but made before step 3's
    advantages, on the same weights (a skipped step trains nothing)."""
    trainer, calls = monitored(tiny_qwen2, prompt_file, tmp_path / "ckpt")
    make, batches = trainer.experience_maker.make_experience_batch, []

    def skip_step_2(rollout_samples):
        batches.append(len(batches) + 1)
        if len(batches) == 2:
            raise GradingStepSkipped({SHARE_KEY: 1.0, SKIPPED_KEY: 1.0})
        return make(rollout_samples)

    trainer.experience_maker.make_experience_batch = skip_step_2
    trainer.fit()
    assert calls["method_step"] == 3 and calls["passes"] == [0, 2, 4]
    assert not (tmp_path / "ckpt" / "_actor" / "global_step2").exists()


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("remonitor", [False, True])
def test_a_resume_restores_the_saved_targets_or_remonitors_as_the_authors(
    ray_local, tiny_qwen2, prompt_file, tmp_path, remonitor
):
    ckpt = tmp_path / "ckpt"
    flags = {"recipe.laser_d.ref_code_remonitor_on_resume_enable": remonitor}  # a setting the resume keeps
    first, _ = monitored(tiny_qwen2, prompt_file, ckpt, recipe_flags=flags)
    first.fit()
    uninterrupted, step_4 = first.recipe_method.state_dict(), saved(ckpt, "global_step4")
    (ckpt / "_actor" / "latest").write_text("global_step2")  # resume from step 2 (as if stopped after it)
    resumed, calls = monitored(tiny_qwen2, prompt_file, ckpt, load=True, recipe_flags=flags)
    resumed.fit()
    assert calls["method_step"] == 2  # steps 3 and 4
    # the authors' re-monitor runs on the resumed weights, before step 3's advantages
    assert calls["passes"] == (["weights", 2, 4] if remonitor else ["weights", 4])
    assert resumed.recipe_method.state_dict() == uninterrupted and saved(ckpt, "global_step4") == step_4
