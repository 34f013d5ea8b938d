"""A researcher's own data and model through `lead-recipes launch` (issue 36): `--set` of OpenRLHF's `data.*` keys,
run and job names that follow the recipe file and the model, `data.max_len` against the model's context (a real
config.json in a local model directory), and the one-line warnings for an unknown CPU count (a real `sinfo` that
fails, first on PATH) and a run that ends before its first checkpoint."""

from __future__ import annotations

import json
import shlex
from types import SimpleNamespace as ns

import pytest

from lead_recipes.recipes import launch
from lead_recipes.recipes.own_model import context_problem, model_context
from lead_recipes.recipes.recipe import load_recipe
from lead_recipes.training import preflight
from lead_recipes.training.context_check import check_args


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("LEAD_RECIPES_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("LEAD_RECIPES_RUN_DIR", str(tmp_path / "run"))


def rendered(capsys, *argv: str) -> tuple[list[str], list[str], str]:
    """(train command, submission, stderr) of a dry run that must succeed."""
    assert launch.main([*argv, "--run.dry_run_enable"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    cmd = shlex.split(lines[lines.index("# command:") + 1])
    sub = shlex.split(lines[lines.index("# submit:") + 1]) if "# submit:" in lines else []
    return cmd, sub, err


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def model_dir(tmp_path, **config) -> str:
    path = tmp_path / "my-model"
    path.mkdir(exist_ok=True)
    (path / "config.json").write_text(json.dumps(config))
    return str(path)


def own_recipe(tmp_path, body: str = "") -> str:
    path = tmp_path / "my-recipe.yaml"
    path.write_text("extends: lead-1.5b\n" + body)
    return str(path)


# ---------------------------------------------------------------- --set
def test_set_data_prompt_dataset_sets_openrlhfs_flag(capsys):
    cmd, _, _ = rendered(capsys, "lead-1.5b", "--set", "data.prompt_dataset=mine.jsonl")
    assert flag(cmd, "--data.prompt_dataset") == "mine.jsonl"


def test_the_did_you_mean_for_a_bare_key_is_a_spelling_that_works(capsys):
    assert launch.main(["lead-1.5b", "--run.dry_run_enable", "--set", "prompt_dataset=mine.jsonl"]) == 2
    err = capsys.readouterr().err
    suggested = err.split("did you mean '")[1].split("'")[0]
    cmd, _, _ = rendered(capsys, "lead-1.5b", "--set", f"{suggested}=mine.jsonl")
    assert flag(cmd, "--data.prompt_dataset") == "mine.jsonl"


def test_set_data_prepare_still_sets_the_recipes_data_section():
    recipe = load_recipe("lead-1.5b", ["data.prepare=[build, --output, x.jsonl]"])
    assert recipe.data["prepare"] == ["build", "--output", "x.jsonl"] and "data.prepare" not in recipe.openrlhf


# ---------------------------------------------------------------- names
def test_a_recipe_file_extending_ours_names_the_run_and_job_after_itself(capsys, tmp_path):
    cmd, sub, _ = rendered(capsys, own_recipe(tmp_path), "--launch.target", "slurm")
    assert flag(cmd, "--logger.wandb.run_name") == "my-recipe" and "--job-name=my-recipe" in sub


def test_another_model_by_set_is_appended_to_the_run_and_job_name(capsys):
    cmd, sub, _ = rendered(
        capsys, "lead-1.5b", "--launch.target", "slurm", "--set", "actor.model_name_or_path=Qwen/Qwen3-4B/"
    )
    assert flag(cmd, "--logger.wandb.run_name") == "lead-1.5b-Qwen3-4B" and "--job-name=lead-1.5b-Qwen3-4B" in sub


def test_a_run_name_the_file_or_set_states_wins(capsys, tmp_path):
    path = own_recipe(tmp_path, "openrlhf:\n  logger.wandb.run_name: mine\n")
    assert load_recipe(path).openrlhf["logger.wandb.run_name"] == "mine"
    cmd, sub, _ = rendered(capsys, "lead-1.5b", "--launch.target", "slurm", "--set", "logger.wandb.run_name=x")
    assert flag(cmd, "--logger.wandb.run_name") == "x" and "--job-name=x" in sub


def test_a_run_name_the_file_states_wins_over_a_model_given_by_set(capsys, tmp_path):
    model = model_dir(tmp_path, max_position_embeddings=32768)
    path = own_recipe(tmp_path, "openrlhf:\n  logger.wandb.run_name: mine\n")
    cmd, sub, _ = rendered(capsys, path, "--launch.target", "slurm", "--set", f"actor.model_name_or_path={model}")
    assert flag(cmd, "--logger.wandb.run_name") == "mine" and "--job-name=mine" in sub


def test_the_run_directory_follows_a_model_given_by_set(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("LEAD_RECIPES_RUN_DIR")
    monkeypatch.setenv("LEAD_RECIPES_RUNS", str(tmp_path / "runs"))
    model = model_dir(tmp_path, max_position_embeddings=32768)
    cmd, _, _ = rendered(capsys, "lead-1.5b", "--set", f"actor.model_name_or_path={model}")
    run = tmp_path / "runs" / "lead-1.5b-my-model"
    assert [flag(cmd, f) for f in ("--ckpt.path", "--ckpt.output_dir", "--logger.tensorboard_dir")] == [
        str(run / "ckpt"),
        str(run / "hf"),
        str(run / "tensorboard"),
    ]
    assert load_recipe("lead-1.5b", [f"actor.model_name_or_path={model}"]).run_dir == str(run)
    assert load_recipe("lead-1.5b").run_dir == str(tmp_path / "runs" / "lead-1.5b")


def test_train_with_another_model_writes_into_the_run_directory_that_follows_it(tmp_path, monkeypatch):
    from lead_recipes.training.args import flag_values, resolve
    from lead_recipes.training.cli import _our_parser

    monkeypatch.delenv("LEAD_RECIPES_RUN_DIR")
    monkeypatch.setenv("LEAD_RECIPES_RUNS", str(tmp_path / "runs"))
    argv = ["--actor.model_name_or_path", model_dir(tmp_path, max_position_embeddings=32768)]
    out = resolve([*argv, "--data.prompt_dataset", "d.jsonl"], _our_parser()).argv
    assert flag_values(out, "--ckpt.path") == [str(tmp_path / "runs" / "lead-1.5b-my-model" / "ckpt")]


def test_the_reference_recipe_keeps_its_own_name():
    assert load_recipe("lead-1.5b").run_name == "lead-1.5b"


# ---------------------------------------------------------------- context length
def test_max_len_above_a_local_models_context_is_refused_naming_both_and_the_fix(capsys, tmp_path):
    model = model_dir(tmp_path, max_position_embeddings=4096)
    assert launch.main(["lead-1.5b", "--run.dry_run_enable", "--set", f"actor.model_name_or_path={model}"]) == 2
    err = capsys.readouterr().err
    assert "data.max_len 5024" in err and "context of 4096" in err and "at most 4096" in err


def test_max_len_equal_to_the_context_is_accepted(tmp_path):
    model = model_dir(tmp_path, max_position_embeddings=5024)
    assert load_recipe("lead-1.5b", [f"actor.model_name_or_path={model}"]).openrlhf["data.max_len"] == 5024


def test_a_multimodal_configs_text_context_is_read(tmp_path):
    model = model_dir(tmp_path, text_config={"max_position_embeddings": 2048}, vision_config={})
    assert model_context(model) == (2048, "max_position_embeddings")
    assert "context of 2048" in context_problem(model, 4096)


def test_the_context_is_the_smallest_of_the_length_keys_as_vllm_takes_it(tmp_path):
    model = model_dir(tmp_path, max_position_embeddings=131072, seq_length=4096)
    assert model_context(model) == (4096, "seq_length")


def test_a_linear_rope_factor_multiplies_the_context(tmp_path):
    model = model_dir(tmp_path, max_position_embeddings=2048, rope_scaling={"type": "linear", "factor": 4.0})
    assert model_context(model)[0] == 8192 and context_problem(model, 8192) is None


YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "original_max_position_embeddings": 8192,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
}


def test_yarn_scales_its_original_positions_not_max_position_embeddings(tmp_path):
    model = model_dir(tmp_path, max_position_embeddings=40960, rope_scaling=YARN)
    assert model_context(model) == (131072, "original_max_position_embeddings x rope factor 4.0")


def test_llama3_rope_leaves_the_context_as_stated(tmp_path):
    assert model_context(model_dir(tmp_path, max_position_embeddings=131072, rope_scaling=LLAMA3))[0] == 131072


@pytest.mark.parametrize(
    "config",
    [
        {"max_position_embeddings": 131072, "seq_length": 4096},
        {"max_position_embeddings": 2048, "rope_scaling": {"type": "dynamic", "factor": 2.0}},
        {"max_position_embeddings": 40960, "rope_scaling": YARN},
        {"max_position_embeddings": 131072, "rope_scaling": LLAMA3},
    ],
)
def test_the_context_agrees_with_vllms_own_rule(tmp_path, config):
    from transformers import Qwen2Config
    from vllm.config.model import _get_and_verify_max_len
    from vllm.transformers_utils.config import patch_rope_parameters
    from vllm.transformers_utils.model_arch_config_convertor import ModelArchConfigConvertorBase

    hf = Qwen2Config(**config)
    patch_rope_parameters(hf)
    arch = ns(derived_max_model_len_and_key=ModelArchConfigConvertorBase(hf, hf).derive_max_model_len_and_key())
    assert model_context(model_dir(tmp_path, **config))[0] == _get_and_verify_max_len(hf, arch, None, None, False, None)


def test_a_model_whose_config_is_not_here_is_not_checked_and_the_preflight_says_so(tmp_path):
    assert context_problem("nobody/not-cached-model", 10**6) is None
    args = ns(actor=ns(model_name_or_path="nobody/not-cached-model"), data=ns(max_len=10**6))
    check = check_args(args)
    assert check.ok and "not checked" in check.detail


def test_the_preflight_runs_the_context_check(tmp_path):
    args = ns(actor=ns(model_name_or_path=model_dir(tmp_path, n_positions=1024)), data=ns(max_len=2048))
    skip = tuple(n for n in preflight.CHECK_NAMES if n != "context")
    (check,) = [c for c in preflight.run_preflight(args, skip=skip) if c.name == "context"]
    assert not check.ok and "context of 1024" in check.detail


# ---------------------------------------------------------------- warnings
@pytest.fixture
def failing_sinfo(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sinfo").write_text("#!/bin/sh\necho 'Unable to contact slurm controller' >&2\nexit 1\n")
    (bin_dir / "sinfo").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")


def test_a_failing_sinfo_without_cpus_per_node_warns_in_one_line(capsys, failing_sinfo):
    _, sub, err = rendered(capsys, "lead-1.5b", "--launch.target", "slurm")
    warned = [line for line in err.splitlines() if "CPUs per task" in line]
    assert len(warned) == 1 and "--slurm.cpus_per_node" in warned[0]
    assert not any(a.startswith("--cpus-per-task") for a in sub)


def test_cpus_per_node_given_means_no_warning(capsys, failing_sinfo):
    _, sub, err = rendered(capsys, "lead-1.5b", "--launch.target", "slurm", "--slurm.cpus_per_node", "32")
    assert "CPUs per task" not in err and "--cpus-per-task=32" in sub


def prompts(tmp_path, rows: int) -> str:
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"p{i}", "label": "1"}) + "\n" for i in range(rows)))
    return str(path)


def test_a_run_shorter_than_save_steps_warns_with_the_step_count(capsys, tmp_path):
    # lead-1.5b: 7 episodes x ceil(200 / 128) = 14 steps < ckpt.save_steps 20
    _, _, err = rendered(capsys, "lead-1.5b", "--set", f"data.prompt_dataset={prompts(tmp_path, 200)}")
    warned = [line for line in err.splitlines() if "checkpoint" in line]
    assert len(warned) == 1 and "takes 14 steps" in warned[0] and "ckpt.save_steps 20" in warned[0]


def test_a_run_that_reaches_its_first_checkpoint_does_not_warn(capsys, tmp_path):
    _, _, err = rendered(capsys, "lead-1.5b", "--set", f"data.prompt_dataset={prompts(tmp_path, 3 * 128)}")
    assert "checkpoint" not in err  # 7 x 3 = 21 steps


def test_train_with_another_model_names_the_run_after_the_base_recipe_and_the_model():
    from lead_recipes.training.args import flag_values, resolve
    from lead_recipes.training.cli import _our_parser

    argv = ["--actor.model_name_or_path", "Qwen/Qwen3-4B", "--data.prompt_dataset", "d.jsonl"]
    assert flag_values(resolve(argv, _our_parser()).argv, "--logger.wandb.run_name") == ["lead-1.5b-Qwen3-4B"]
    named = resolve([*argv, "--logger.wandb.run_name", "mine"], _our_parser()).argv
    assert flag_values(named, "--logger.wandb.run_name") == ["mine"]
    assert flag_values(resolve(["--data.prompt_dataset", "d"], _our_parser()).argv, "--logger.wandb.run_name") == [
        "lead-1.5b"
    ]


def test_a_short_last_batch_counts_as_a_step(capsys, tmp_path):
    # OpenRLHF 0.11.2 trains the partial last rollout batch: 7 episodes x ceil(257 / 128) = 21 steps >= 20
    _, _, err = rendered(capsys, "lead-1.5b", "--set", f"data.prompt_dataset={prompts(tmp_path, 257)}")
    assert "checkpoint" not in err


def test_a_prompt_file_with_no_rows_is_refused_before_anything_starts(capsys, tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(launch.subprocess, "call", lambda cmd: calls.append(cmd) or 0)
    argv = ["lead-1.5b", "--launch.target", "local", "--set", f"data.prompt_dataset={prompts(tmp_path, 0)}"]
    assert launch.main(argv) == 2 and calls == []
    err = capsys.readouterr().err
    assert "takes 0 training steps" in err and "has no rows" in err and "--no-launch.data_check_enable" in err
    assert launch.main([*argv, "--no-launch.data_check_enable"]) == 0 and len(calls) == 1
