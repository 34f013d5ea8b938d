"""OpenRLHF's real sync trainer (RecipeTrainer) on a local Ray with stand-ins for what needs a GPU: a DeepSpeed
checkpoint actor and, for `recording_trainer`, a vLLM engine actor whose responses come graded, model forwards with
kl = 0 and a `ppo_train` that records its calls. Used by the training tests of the grading guard, resume and step
order."""

from __future__ import annotations

import sys

import ray
import torch
from ray import cloudpickle

from lead_recipes.recipes import openrlhf_parser
from lead_recipes.reward.logs import REWARD_LOG_KEYS
from lead_recipes.training import openrlhf_plugin as plugin
from lead_recipes.training.args import with_recipe

N = 8  # samples per prompt in the shared rollouts
CAP = 768  # rollout cap for these tests (tiny tokenizer: many responses exceed it and count as truncated)
PROMPTS_PER_STEP = 4  # make_trainer's --rollout.batch_size (x n = 8 samples: one step, one guard window)

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray workers cannot import tests/support by name


@ray.remote
class DeepSpeedCheckpointStandIn:
    """Stands in for PolicyModelActor's checkpoint methods, which need a CUDA DeepSpeed engine: it keeps the
    client_states dict the trainer sends exactly as DeepSpeed's save_checkpoint(client_state=...) does (torch.save
    under <ckpt.path>/_actor/<tag>, a `latest` file) and, like init_model_from_pretrained with --ckpt.load_enable,
    loads the latest one at init for get_checkpoint_states."""

    def __init__(self, world_size, rank, master_addr, master_port):
        self.args, self.checkpoint_states = None, {}

    def init_model_from_pretrained(self, strategy, *args, **kwargs):
        import os

        self.args = strategy.args
        root = os.path.join(self.args.ckpt.path, "_actor")
        if self.args.ckpt.load_enable and os.path.exists(os.path.join(root, "latest")):
            tag = open(os.path.join(root, "latest")).read().strip()
            self.checkpoint_states = torch.load(os.path.join(root, tag, "client_states.pt"), weights_only=True)

    def save_checkpoint(self, tag, client_states=None, metric_value=None, metric_key=None):
        import os

        root = os.path.join(self.args.ckpt.path, "_actor")
        os.makedirs(os.path.join(root, tag), exist_ok=True)
        torch.save(client_states or {}, os.path.join(root, tag, "client_states.pt"))
        with open(os.path.join(root, "latest"), "w") as f:
            f.write(tag)

    def get_checkpoint_states(self):
        return self.checkpoint_states


def make_trainer(tiny, prompt_file, ckpt, method, load=False, save_steps=1, extra=(), recipe_flags=None, cls=None):
    import argparse

    from openrlhf.trainer.ray.launcher import RayActorGroup
    from openrlhf.utils import get_strategy

    from lead_recipes.flags import recipe_config

    recipe = recipe_config(argparse.Namespace(**{"recipe.method": method, **(recipe_flags or {})}))
    argv = [
        "--actor.model_name_or_path",
        str(tiny),
        "--data.prompt_dataset",
        str(prompt_file),
        "--data.input_key",
        "prompt",
        "--data.label_key",
        "label",
        "--rollout.n_samples_per_prompt",
        str(N),
        "--rollout.max_new_tokens",
        str(CAP),
        "--rollout.batch_size",
        "4",
        "--train.batch_size",
        "32",
        "--algo.advantage.estimator",
        "group_norm",
        "--reward.remote_url",
        "unused/reward_func.py",
        "--ckpt.path",
        str(ckpt),
        "--ckpt.save_steps",
        str(save_steps),
        "--actor.num_gpus_per_node",
        "1",
        "--logger.wandb.run_name",
        "test",
        *(["--ckpt.load_enable"] if load else []),
        *extra,
    ]
    args = with_recipe(openrlhf_parser.openrlhf_args(argv)[0], recipe, argv)
    strategy = get_strategy(args)
    group = RayActorGroup(1, 1, DeepSpeedCheckpointStandIn, pg=None, num_gpus_per_actor=0)
    ray.get(group.async_init_model_from_pretrained(strategy))
    return (cls or plugin.RecipeTrainer)(
        str(tiny),
        strategy,
        group,
        None,
        None,
        None,
        None,
        do_sample=True,
        max_len=CAP + 256,
        max_new_tokens=CAP,
        temperature=1.0,
        top_p=1.0,
    )


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


def recording_trainer(tiny, prompts, ckpt, healthy, extra=(), recipe_flags=None, method="lead", **kwargs):
    trainer = make_trainer(tiny, prompts, ckpt, method, extra=extra, recipe_flags=recipe_flags, **kwargs)
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
