"""AdaptThink's loss on OpenRLHF (docs/methods.md#adaptthink-outside-the-advantage-step): the first-token
old-log-prob override under OpenRLHF 0.11.2's own GSPO `PolicyLoss` gives the authors' loss and gradients (spec §9.3
G-AT4, executed against `compute_policy_loss(adjust_old_log_prob=True)`); the settings under which it would not are
refused by `lead-recipes train`'s checks, each naming its fix; the executor's split per prompt is round(G·ρ)."""

from __future__ import annotations

import math

import pytest
import torch
from openrlhf.models.loss import PolicyLoss
from openrlhf.trainer.ppo_utils.experience import Experience

from lead_recipes.methods.config import RecipeConfig
from lead_recipes.recipes.openrlhf_parser import openrlhf_args
from lead_recipes.training.adaptthink_executor import AgentExecutor, request_extra_args
from lead_recipes.training.args import with_recipe
from lead_recipes.training.cli import recipe_conflicts
from lead_recipes.training.first_token import EXECUTOR_FILE, importance_sample_first_token


def test_g_at4_first_token_override_under_gspo_gives_the_authors_loss_and_gradients():
    probs = torch.tensor([[0.02, 0.5, 0.6, 0.9], [0.97, 0.4, 0.7, 0.8]], dtype=torch.float64)
    log_probs = probs.log().requires_grad_(True)
    mask = torch.ones(2, 4, dtype=torch.long)
    e = Experience(action_mask=mask, action_log_probs=probs.log(), info={"nothink": torch.tensor([1.0, 0.0])})
    importance_sample_first_token([e], rho=0.5)
    adv = torch.tensor([[0.3], [-0.75]], dtype=torch.float64).expand(2, 4)
    loss = PolicyLoss(0.2, 0.2, policy_loss_type="gspo")(log_probs, e.action_log_probs, adv, action_mask=mask)[0]
    loss.backward()
    assert float(loss.detach()) == pytest.approx(0.375488, abs=1e-6)
    assert log_probs.grad[0].tolist() == pytest.approx([-0.016771] * 4, abs=1e-6)
    assert log_probs.grad[1].tolist() == pytest.approx([0.110642] * 4, abs=1e-6)


def test_override_hits_the_first_action_token_of_each_row_and_nothing_else():
    mask = torch.tensor([[0, 0, 1, 1], [0, 1, 1, 0], [0, 0, 0, 0]])
    e = Experience(action_mask=mask, action_log_probs=torch.zeros(3, 4), info={"nothink": torch.tensor([1.0, 0, 1])})
    importance_sample_first_token([e], rho=0.25)
    want = torch.zeros(3, 4)
    want[0, 2], want[1, 1] = math.log(0.25), math.log(0.75)
    assert torch.equal(e.action_log_probs, want)


def test_override_without_the_executors_flag_is_refused_naming_the_executor():
    e = Experience(action_mask=torch.ones(1, 2), action_log_probs=torch.zeros(1, 2), info={})
    with pytest.raises(ValueError, match="agent_func_path"):
        importance_sample_first_token([e], rho=0.5)


GOOD = [
    "--actor.model_name_or_path", "m", "--reward.remote_url", "r.py", "--train.agent_func_path", EXECUTOR_FILE,
    "--actor.policy_loss_type", "gspo", "--algo.kl.init_coef", "0", "--rollout.batch_size", "4",
    "--rollout.n_samples_per_prompt", "4", "--train.batch_size", "16", "--rollout.max_new_tokens", "64",
    "--algo.advantage.estimator", "group_norm",
]  # fmt: skip


def conflicts(*flags):
    argv = GOOD + list(flags)
    return recipe_conflicts(with_recipe(openrlhf_args(argv)[0], RecipeConfig.of({"method": "adaptthink"}), argv))[0]


def test_the_authors_settings_pass_and_grade_with_the_reward_file_given():
    assert conflicts() == []


@pytest.mark.parametrize(
    "flags, fix",
    [
        (["--actor.policy_loss_type", "ppo"], "--actor.policy_loss_type gspo"),
        (["--actor.eps_clip_low_high", "0.2", "0.28"], "clips at 0.2 0.2"),
        (["--actor.dual_clip", "3"], "no dual clip"),
        (["--algo.kl.init_coef", "0.01"], "--algo.kl.init_coef 0"),
        (["--train.batch_size", "8"], "--train.batch_size 16"),
        (["--train.max_epochs", "2"], "--train.max_epochs 1"),
        (["--train.agent_func_path", "other.py"], "AdaptThink's executor"),
        (["--actor.entropy_coef", "0.001"], "no entropy term"),
        (["--algo.advantage.is_correction_level", "token"], "--algo.advantage.is_correction_level off"),
        (["--train.async_enable"], "drop --train.async_enable"),
    ],
)
def test_settings_that_change_the_authors_loss_are_refused_naming_the_fix(flags, fix):
    errors = conflicts(*flags)
    assert len(errors) == 1 and fix in errors[0]


def test_executor_forces_round_g_rho_calls_per_prompt_to_no_think_in_order():
    args = with_recipe(
        openrlhf_args(GOOD)[0], RecipeConfig.of({"method": "adaptthink", "adaptthink": {"rho": 0.3}}), GOOD
    )
    forcing = request_extra_args(args, training=True)["lead_recipes_adaptthink"]
    ex = AgentExecutor()
    calls = [ex.forced_token(p, forcing) for p in ["a"] * 4 + ["b"] * 4 + ["a"] * 4]
    cfg = RecipeConfig().adaptthink
    nothink, think = (cfg.nothink_token_id, True), (cfg.think_token_id, False)
    assert calls == [nothink, think, think, think] * 3  # round(4 · 0.3) = 1 per group of 4


def test_evaluation_requests_carry_no_forcing():
    args = with_recipe(openrlhf_args(GOOD)[0], RecipeConfig.of({"method": "adaptthink"}), GOOD)
    extra = request_extra_args(args, training=False)
    assert extra == {"lead_recipes_rollout": "eval", "lead_recipes_reward": "r.py"}


def test_under_the_executor_the_run_grades_with_the_reward_file_given_not_openrlhfs_agent():
    from lead_recipes.training.args import graded_by

    args = with_recipe(openrlhf_args(GOOD)[0], RecipeConfig.of({"method": "adaptthink"}), GOOD)
    assert args.reward.remote_url == ["agent"] and graded_by(args) == ["r.py"]
