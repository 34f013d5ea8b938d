"""launchers/gpu_smoke.py is the one smoke driver of the GPU smoke and the CPU end-to-end tests: the two profiles are
the same `lead-recipes train` command except sizes and device layout, and both pass OpenRLHF's own validation."""

from __future__ import annotations

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


def argv_of(profile, tmp_path, method="lead", path="plain"):
    return gpu_smoke.train_argv(
        profile,
        method,
        str(tmp_path / "model"),
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
def test_method_flags_are_accepted_by_the_recipe_parser(method, tmp_path):
    ours, recipe, _, _ = train.parse_command_line(argv_of("cpu", tmp_path, method))
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
