"""A step whose grading failed trains nothing, and grading failures stop the run under dynamic filtering too: the
real sync RecipeTrainer (OpenRLHF's PPOTrainer.fit loop, its SamplesGenerator and experience maker) on a local Ray,
with a stand-in vLLM engine actor returning responses already graded (as OpenRLHF's rollout executor does), the
model forwards replaced by kl = 0 and ppo_train / the method's step recording their calls."""

from __future__ import annotations

import pytest
import ray
import torch
from ray import cloudpickle
from test_openrlhf_plugin import make_trainer, prompt_file, ray_local  # noqa: F401  (fixtures)

from lead_recipes.grading.grader import REWARD_LOG_KEYS
from lead_recipes.training.guard import GradingFailure

cloudpickle.register_pickle_by_value(__import__(__name__))  # Ray workers cannot import this test module by name
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
PROMPTS_PER_STEP = 4  # make_trainer's --rollout.batch_size (x n = 8 samples: one step, one guard window)


@ray.remote
class GradedEngine:
    """Stands in for a vLLM engine actor: the first `healthy` prompts it serves get half correct, half wrong
    samples; every later one is graded `error` for all samples (a grader outage)."""

    def __init__(self, healthy: int):
        self.healthy, self.served = healthy, 0

    def get_num_unfinished_requests(self):
        return 0

    def generate_responses(self, prompt, label, sampling_params, max_length, hf_tokenizer, num_samples=1, images=None):
        ok, self.served = self.served < self.healthy, self.served + 1
        out = []
        for j in range(num_samples):
            status = ("correct" if j % 2 == 0 else "wrong") if ok else "error"
            logs = dict.fromkeys(REWARD_LOG_KEYS, 0.0)
            logs.update({"correct": float(status == "correct"), f"status_{status}": 1.0})
            reward = logs["correct"]
            out.append(
                {
                    "observation_tokens": [11] * 4 + [12 + j] * (3 + j),
                    "action_ranges": [(4, 7 + j)],
                    "reward": reward,
                    "scores": reward,
                    "extra_logs": logs,
                    "rollout_log_probs": None,
                    "prompt": prompt,
                    "label": label,
                    "truncated": False,
                }
            )
        return out


def recording_trainer(tiny, prompts, ckpt, healthy, extra=()):
    trainer = make_trainer(tiny, prompts, ckpt, "lead", extra=extra)
    trainer.samples_generator.vllm_engines = [GradedEngine.remote(healthy)]
    calls = {"ppo_train": [], "method_step": 0}

    def forwards(samples_list):  # what the actor/reference forwards attach, without a reference model: kl = 0
        for e in samples_list:
            e.kl = torch.zeros(e.action_mask.shape)
        return samples_list

    def ppo_train(global_steps):
        calls["ppo_train"].append(global_steps)
        return {}

    method, method_step = trainer.recipe_method, trainer.recipe_method.step

    def step(batch):
        calls["method_step"] += 1
        return method_step(batch)

    trainer.experience_maker.make_experience = forwards
    trainer.actor_model_group.async_run_method_batch = lambda **_: []  # the replay buffer append feeds ppo_train only
    trainer.ppo_train = ppo_train
    method.step = step
    return trainer, calls


def checkpoints(ckpt):
    return sorted(p.name for p in (ckpt / "_actor").glob("global_step*"))


def test_failed_grading_steps_change_neither_weights_nor_controller_and_write_no_checkpoint(
    ray_local, tiny_qwen2, prompt_file, tmp_path
):  # noqa: F811
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
):  # noqa: F811
    ckpt = tmp_path / "ckpt"
    trainer, calls = recording_trainer(
        tiny_qwen2, prompt_file, ckpt, healthy=0, extra=["--algo.dynamic_filtering_enable"]
    )
    # every group averages 0 and is filtered out: no step is ever trained, so only the generator sees the failures
    with pytest.raises(GradingFailure, match=r"grading failed for 100% of the samples \(32 error, 0 timeout of 32\)"):
        trainer.fit()
    assert calls == {"ppo_train": [], "method_step": 0} and checkpoints(ckpt) == []
