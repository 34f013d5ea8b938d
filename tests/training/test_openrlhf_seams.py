"""The installed OpenRLHF still has every seam the plug-in patches or relies on: the parameter names of the methods
it overrides or calls, the Ray actor classes it subclasses, and the lines of OpenRLHF's source it patches around.
At start-up only the version pin is checked (openrlhf_parser.check_openrlhf); an OpenRLHF upgrade fails here,
naming what changed."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest
from openrlhf.trainer.ppo_trainer import BasePPOTrainer, PPOTrainer
from openrlhf.trainer.ppo_trainer_async import GenerateSamplesActor, PPOTrainerAsync, TrainingActor
from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker
from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator
from openrlhf.trainer.ray.ppo_actor import ActorPPOTrainer, PolicyModelActor

from lead_recipes.recipes.openrlhf_parser import SUPPORTED_OPENRLHF, check_openrlhf

# (owner, method) -> the parameter names the plug-in relies on
SIGNATURES = {
    (RemoteExperienceMaker, "__init__"): [
        "self",
        "actor_model_group",
        "critic_model_group",
        "reward_model_group",
        "initial_model_group",
        "kl_controller",
        "strategy",
        "tokenizer",
        "kwargs",
    ],
    (RemoteExperienceMaker, "compute_advantages_and_returns"): ["self", "experiences"],
    (RemoteExperienceMaker, "get_cumulative_returns"): ["self", "rewards", "action_mask", "gamma"],
    (RemoteExperienceMaker, "make_experience_batch"): ["self", "rollout_samples"],
    (SamplesGenerator, "_process_response_into_experience"): ["self", "response", "generate_kwargs"],
    (BasePPOTrainer, "save_best_checkpoint"): ["self", "eval_metrics", "global_step", "client_states"],
    (BasePPOTrainer, "save_logs_and_checkpoints"): ["self", "global_step", "logs_dict", "client_states"],
    (BasePPOTrainer, "restore_best_checkpoint_state"): ["self", "checkpoint_states"],
    (BasePPOTrainer, "train_step"): ["self", "rollout_samples", "global_step"],
    (BasePPOTrainer, "init_checkpoint_states"): ["self"],
    (PPOTrainer.__ray_actor_class__, "fit"): ["self", "global_step"],
    (TrainingActor.__ray_actor_class__, "fit"): ["self", "global_step"],
    (GenerateSamplesActor.__ray_actor_class__, "fit"): ["self", "episode", "total_consumed_prompts"],
    (PolicyModelActor.__ray_actor_class__, "fit"): ["self", "kl_ctl"],
    (ActorPPOTrainer, "ppo_train"): ["self", "kl_ctl"],
}
# (where, line the plug-in depends on, why)
SOURCE_LINES = [
    (
        "openrlhf.cli.train_ppo_ray",
        "from openrlhf.utils.config import hierarchize",
        "run_openrlhf wraps hierarchize, imported at call time",
    ),
    (
        "openrlhf.cli.train_ppo_ray",
        "from openrlhf.trainer.ppo_trainer import PPOTrainer",
        "run_openrlhf swaps PPOTrainer, imported inside train()",
    ),
    (
        "openrlhf.cli.train_ppo_ray",
        "import PPOTrainerAsync as PPOTrainer",
        "run_openrlhf swaps PPOTrainerAsync, imported inside train()",
    ),
    (
        "openrlhf.cli.train_ppo_ray",
        "if not ray.is_initialized():",
        "--run.dry_run_enable stops at train()'s first line",
    ),
    (
        BasePPOTrainer.train_step,
        "balance_experiences(experiences, self.args)",
        "the trainer replaces balance_experiences by lead_recipes.training.step_order",
    ),
    (
        "openrlhf.cli.train_ppo_ray",
        "from openrlhf.trainer.ray.ppo_actor import PolicyModelActor",
        "run_openrlhf swaps PolicyModelActor (per-epoch deal), imported when train_ppo_ray runs",
    ),
    (
        PolicyModelActor.__ray_actor_class__.fit,
        "status = self.trainer.ppo_train(kl_ctl)",
        "the policy actor runs one ppo_train pass per epoch through self.trainer.ppo_train",
    ),
    (
        ActorPPOTrainer.ppo_train,
        "self.replay_buffer.setup_dynamic_batch(self.strategy)",
        "each one-epoch ppo_train pass cuts the newly dealt buffer into steps",
    ),
    (
        BasePPOTrainer.save_logs_and_checkpoints,
        "if global_step % self.args.ckpt.save_steps == 0:",
        "a save on request sets save_steps = 1 to save now (training/preemption.py)",
    ),
]


def test_the_plugin_is_pinned_to_the_openrlhf_version_the_project_installs():
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert re.search(rf'"openrlhf\[vllm\]=={re.escape(SUPPORTED_OPENRLHF)}"', pyproject)
    check_openrlhf()


@pytest.mark.parametrize("owner,name", SIGNATURES, ids=[f"{o.__qualname__}.{n}" for o, n in SIGNATURES])
def test_each_patched_openrlhf_method_keeps_its_parameters(owner, name):
    assert hasattr(owner, name), f"{owner.__module__}.{owner.__name__}.{name} is gone"
    # Ray's actor decorator adds a `_ray_trace_ctx` keyword to the methods of decorated classes and their bases
    got = [p for p in inspect.signature(getattr(owner, name)).parameters if p != "_ray_trace_ctx"]
    assert got == SIGNATURES[owner, name], f"{owner.__module__}.{owner.__name__}.{name} parameters changed"


@pytest.mark.parametrize(
    "cls",
    [PPOTrainer, PPOTrainerAsync, TrainingActor, PolicyModelActor],
    ids=["PPOTrainer", "PPOTrainerAsync", "TrainingActor", "PolicyModelActor"],
)
def test_the_subclassed_trainers_are_ray_actor_classes(cls):
    assert hasattr(cls, "__ray_actor_class__"), f"{cls!r} is no longer a Ray actor class"


@pytest.mark.parametrize("where,line,why", SOURCE_LINES, ids=[why for _, _, why in SOURCE_LINES])
def test_openrlhf_source_still_has_each_line_the_plugin_patches_around(where, line, why):
    obj = importlib.import_module(where) if isinstance(where, str) else where
    assert line in inspect.getsource(obj), f"{getattr(obj, '__qualname__', where)} no longer contains {line!r} ({why})"
