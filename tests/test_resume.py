"""A resumed run continues the run that saved the checkpoint: the method's resolved settings are saved with its
state, and a resume under other settings is refused naming every changed flag, unless explicitly allowed."""
from __future__ import annotations

import pytest

from lead_recipes.methods import build_method
from lead_recipes.methods.config import RecipeConfig, LeadConfig, LeashConfig
from lead_recipes.training import resume
from test_openrlhf_plugin import make_trainer, prompt_file, ray_local  # noqa: F401  (fixtures)


def _saved(method, cap=4000):
    return {"global_step": 2, "recipe": resume.recipe_client_state(method, None, resume.method_settings(method, cap))}


def test_settings_hold_every_field_of_the_methods_sections_and_the_cap_b_max_defaults_to():
    lead = resume.method_settings(build_method(RecipeConfig(method="lead")), 4000)
    assert lead["--recipe.method"] == "lead" and lead["--recipe.lead.beta_ema"] == 0.95
    assert lead["--rollout.max_new_tokens"] == 4000 and not any(k.startswith("--recipe.leash.") for k in lead)
    composed = resume.method_settings(build_method(RecipeConfig(method="composed")), 4000)
    assert {k.split(".")[1] for k in composed if k.startswith("--recipe.") and k != "--recipe.method"} == \
        {"composed", "lead", "grpo_lead", "leash"}
    assert "--rollout.max_new_tokens" not in resume.method_settings(build_method(RecipeConfig(method="leash")), 4000)


def test_a_resume_with_changed_settings_is_refused_naming_every_changed_flag():
    saved = _saved(build_method(RecipeConfig(method="lead")))
    now = build_method(RecipeConfig(method="lead", lead=LeadConfig(beta_ema=0.9, l_min=500.0)))
    with pytest.raises(RuntimeError) as info:
        resume.restore_recipe_state(now, saved, resume.method_settings(now, 8000))
    message = str(info.value)
    for changed in ("--recipe.lead.beta_ema 0.95 in the checkpoint, 0.9 now",
                    "--recipe.lead.l_min 1000.0 in the checkpoint, 500.0 now",
                    "--rollout.max_new_tokens 4000 in the checkpoint, 8000 now", resume.ALLOW_FLAG):
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


def test_a_checkpoint_saved_without_settings_is_restored_without_comparing():
    method = build_method(RecipeConfig(method="lead"))
    old = {"global_step": 2, "recipe": {**resume.recipe_client_state(method, None), "settings": None}}
    other = build_method(RecipeConfig(method="lead", lead=LeadConfig(beta_ema=0.9)))
    assert resume.restore_recipe_state(other, old, resume.method_settings(other, 4000)) == []


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
        ray_local, tiny_qwen2, prompt_file, tmp_path):  # noqa: F811
    ckpt = tmp_path / "ckpt"
    first = make_trainer(tiny_qwen2, prompt_file, ckpt, "lead")
    states = {"episode": 0, "global_step": 1, "total_consumed_prompts": 4, "data_loader_state_dict": {}}
    first.save_logs_and_checkpoints(1, {}, states)
    changed = {"recipe.lead.beta_ema": 0.9}
    second = make_trainer(tiny_qwen2, prompt_file, ckpt, "lead", load=True, recipe_flags=changed)
    with pytest.raises(RuntimeError, match=r"--recipe\.lead\.beta_ema 0\.95 in the checkpoint, 0\.9 now"):
        second.restore_best_checkpoint_state(second.init_checkpoint_states())
    allowed = make_trainer(tiny_qwen2, prompt_file, ckpt, "lead", load=True,
                           recipe_flags={**changed, "recipe.resume.settings_change_enable": True})
    allowed.restore_best_checkpoint_state(allowed.init_checkpoint_states())
    assert allowed.recipe_method.config.beta_ema == 0.9
