"""launchers/gpu_smoke.py is the one smoke driver of the GPU smoke and the CPU end-to-end tests: the two profiles are
the same `lead-recipes train` command except sizes and device layout, and both pass OpenRLHF's own validation."""

from __future__ import annotations

import json

import pytest
from cpu_e2e import harness

from lead_recipes.methods.config import METHODS
from lead_recipes.training import cli as train

gpu_smoke = harness.gpu_smoke
SIZE_FLAGS = {
    "--data.max_len",
    "--rollout.max_new_tokens",
    "--rollout.batch_size",
    "--rollout.n_samples_per_prompt",
    "--rollout.micro_batch_size",
    "--train.batch_size",
    "--train.micro_batch_size",
    "--actor.adam.lr",
}


def flags(argv):
    return {
        a: argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else None
        for i, a in enumerate(argv)
        if a.startswith("--")
    }


def argv_of(profile, tmp_path, method="lead", path="plain", model=None):
    """A smoke command; `model` a real model directory where the method reads its tokenizer (AdaptThink)."""
    return gpu_smoke.train_argv(
        profile,
        method,
        str(model or tmp_path / "model"),
        str(tmp_path / "p.jsonl"),
        str(tmp_path / "run"),
        "reward_func.py",
        1,
        path=path,
    )


def test_profiles_differ_only_in_sizes_and_layout(tmp_path):
    gpu, cpu = flags(argv_of("gpu", tmp_path)), flags(argv_of("cpu", tmp_path))
    layout = {a for p in gpu_smoke.PROFILES.values() for a in p["layout"] if a.startswith("--")}
    differing = {k for k in gpu.keys() | cpu.keys() if gpu.get(k, "absent") != cpu.get(k, "absent")}
    assert differing <= SIZE_FLAGS | layout | {"--recipe.lead.b_max", "--recipe.lead.l_min"}, differing
    assert gpu["--recipe.method"] == cpu["--recipe.method"] == "lead"


@pytest.mark.parametrize("method", METHODS)
def test_method_flags_are_accepted_by_the_recipe_parser(method, tmp_path, tiny_qwen2):
    ours, recipe, _, _ = train.parse_command_line(argv_of("cpu", tmp_path, method, model=tiny_qwen2))
    assert recipe.method == method


@pytest.mark.parametrize("profile", ["gpu", "cpu"])
def test_profile_command_passes_openrlhf_validation(profile, tmp_path, capsys):
    (tmp_path / "model").mkdir()
    rc = train.main(argv_of(profile, tmp_path) + ["--run.dry_run_enable"])
    out = capsys.readouterr()
    assert rc == 0, out.err[-3000:]
    assert "--recipe.method lead" in out.out


def test_a_path_overrides_the_profiles_value_in_place_and_never_duplicates_a_flag(tmp_path):
    for path in gpu_smoke.PATHS:
        argv = argv_of("cpu", tmp_path, path=path)
        flags = [a for a in argv if a.startswith("--")]
        assert len(flags) == len(set(flags)), (path, [f for f in flags if flags.count(f) > 1])
        for flag, value in gpu_smoke.PATHS[path].items():
            assert flag in argv, (path, flag)
            if value is not None:
                assert argv[argv.index(flag) + 1] == value.format(**gpu_smoke.PROFILES["cpu"]), (path, flag)


@pytest.mark.parametrize("method", METHODS)
def test_the_smoke_data_of_every_method_passes_the_preflights_data_check(method, tmp_path):
    from lead_recipes.recipes.openrlhf_parser import openrlhf_default
    from lead_recipes.training.data_check import check_data

    for profile in gpu_smoke.PROFILES:
        out = tmp_path / f"{profile}.jsonl"
        gpu_smoke.write_data(str(out), profile, method)
        result = check_data("data", str(out), "prompt", "label", openrlhf_default("data.prompt_split"), method)
        assert result.ok, (profile, result.detail)


def test_the_preflight_refuses_l1_methods_the_plain_smoke_prompts(tmp_path):
    # what the smoke did before: the data check above is the real one and can fail
    from lead_recipes.training.data_check import check_data

    gpu_smoke.write_data(str(tmp_path / "p.jsonl"), "gpu")
    for method in ("l1-exact", "l1-max"):
        result = check_data("data", str(tmp_path / "p.jsonl"), "prompt", "label", "train", method)
        assert not result.ok and "n_gold" in result.detail, result.detail


def test_l1_smoke_prompts_ask_for_the_target_their_label_carries(tmp_path):
    from lead_recipes.prompts import l1_suffix

    gpu_smoke.write_data(str(tmp_path / "p.jsonl"), "gpu", "l1-max")
    rows = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    cap = gpu_smoke.PROFILES["gpu"]["max_new_tokens"]
    assert {r["label"]["l1_mode"] for r in rows} == {"exact", "max"}
    for r in rows:
        n, mode = r["label"]["n_gold"], r["label"]["l1_mode"]
        assert r["prompt"].endswith(l1_suffix(n, mode)) and 0 < n <= cap, r


GPU_COUNTS = range(1, 9)


def _placed(path, gpus, tmp_path):
    return gpu_smoke.train_argv("gpu", "lead", "m", "d.jsonl", str(tmp_path), "r.py", 1, gpus, path=path)


def test_every_path_fits_every_gpu_count_it_can_run_on(tmp_path):
    """DeepSpeed's own batch assertion (its config class, world size = the actor's GPUs) and the recipes' layout
    check (OpenRLHF's colocation assertion, the GPUs every role takes) for 1..8 GPUs."""
    from deepspeed.runtime.config import DeepSpeedConfig

    for gpus in GPU_COUNTS:
        for path in gpu_smoke.PATHS:
            if gpus < gpu_smoke.min_gpus(path):
                continue
            argv = _placed(path, gpus, tmp_path)
            f = flags(argv)
            assert gpu_smoke.layout_problem(argv, gpus) is None, (gpus, path)
            actor, engines, tp = (
                int(f[k]) for k in ("--actor.num_gpus_per_node", "--vllm.num_engines", "--vllm.tensor_parallel_size")
            )
            assert actor + (0 if "--train.colocate_all" in f else engines * tp) <= gpus, (gpus, path)
            config = DeepSpeedConfig({"train_batch_size": 1, "train_micro_batch_size_per_gpu": 1})
            config.train_batch_size = int(f["--train.batch_size"])
            config.train_micro_batch_size_per_gpu = int(f["--train.micro_batch_size"])
            config.gradient_accumulation_steps, config.world_size = None, actor
            config._configure_train_batch_size()  # raises AssertionError on a batch the ranks cannot split
            samples = int(f["--rollout.batch_size"]) * int(f["--rollout.n_samples_per_prompt"])
            assert samples == config.train_batch_size and samples % actor == 0, (gpus, path)  # one step each


def test_the_old_fixed_batch_is_refused_on_three_gpus_by_deepspeed_and_the_layout_check(tmp_path):
    from deepspeed.runtime.config import DeepSpeedConfig

    argv = _placed("plain", 3, tmp_path)
    argv[argv.index("--train.batch_size") + 1] = "16"
    assert "not divisible" in gpu_smoke.layout_problem(argv, 3)
    config = DeepSpeedConfig({"train_batch_size": 1, "train_micro_batch_size_per_gpu": 1})
    config.train_batch_size, config.gradient_accumulation_steps, config.world_size = 16, None, 3
    with pytest.raises(AssertionError, match="train_batch_size is not equal"):
        config._configure_train_batch_size()


def test_a_path_that_needs_two_gpus_is_refused_on_one_naming_it():
    for path in gpu_smoke.PATHS:
        if gpu_smoke.min_gpus(path) > 1:
            with pytest.raises(ValueError, match=f"path {path} needs at least 2 GPUs"):
                gpu_smoke.placement("gpu", path, 1)
    assert {p for p in gpu_smoke.PATHS if gpu_smoke.min_gpus(p) > 1} == {"tp2", "non-colocated", "async"}


def test_separate_paths_give_vllm_gpus_of_its_own_and_colocated_ones_share_them(tmp_path):
    for path in gpu_smoke.PATHS:
        f = flags(_placed(path, 4, tmp_path))
        separate = path in gpu_smoke.SEPARATE
        assert ("--train.colocate_all" in f) is not separate and ("--vllm.enable_sleep" in f) is not separate, path
        if separate:  # OpenRLHF's async trainer asserts vLLM sleep is off; the reference shares the actor's GPUs
            assert "--train.colocate_actor_ref" in f and int(f["--actor.num_gpus_per_node"]) == 2, path


@pytest.mark.parametrize("gpus", GPU_COUNTS)
def test_every_path_command_passes_openrlhf_validation_on_each_gpu_count(gpus, tmp_path, capsys):
    (tmp_path / "model").mkdir()
    for path in gpu_smoke.PATHS:
        if gpus < gpu_smoke.min_gpus(path):
            continue
        argv = gpu_smoke.train_argv(
            "gpu", "lead", str(tmp_path / "model"), "d.jsonl", str(tmp_path), "reward_func.py", 2, gpus, path=path
        )
        rc = train.main(argv + ["--run.dry_run_enable"])
        assert rc == 0, (path, capsys.readouterr().err[-3000:])
