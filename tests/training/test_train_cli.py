"""`lead-recipes train`: the command line parses into exactly the namespace OpenRLHF's own train_ppo_ray builds
(plus args.recipe), bad --recipe flags fail before anything heavy starts, OpenRLHF's validation stays in force,
--run.dry_run_enable resolves the embedded default recipe, and the preflight on this GPU-less machine names the
missing GPU."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import re
import runpy
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lead_recipes.methods.config import RecipeConfig
from lead_recipes.training import cli as train
from lead_recipes.training import preemption as preempt
from lead_recipes.training.args import reward_func_path
from lead_recipes.training.preflight import required_gpus

ROOT = Path(__file__).resolve().parents[2]


def base_flags(tmp_path, model="some/model", extra=()):
    return [
        "--actor.model_name_or_path",
        str(model),
        "--data.prompt_dataset",
        str(tmp_path / "p.jsonl"),
        "--data.input_key",
        "prompt",
        "--data.label_key",
        "label",
        "--rollout.n_samples_per_prompt",
        "8",
        "--rollout.max_new_tokens",
        "512",
        "--algo.advantage.estimator",
        "group_norm",
        "--reward.remote_url",
        reward_func_path(),
        "--reward.clip_range",
        "-5",
        "5",
        "--actor.num_gpus_per_node",
        "1",
        "--logger.wandb.run_name",
        "t",
        *extra,
        *NO_BASE,
    ]


NO_BASE = ["--recipe.name", "none"]  # a complete OpenRLHF command line, not overlaid on a base recipe


class _Stop(Exception):
    pass


def openrlhf_own_parse(argv):
    """OpenRLHF's train_ppo_ray run as a script on argv, stopped (by a trace hook, no patching) when its train()
    is entered; returns the args object train() receives."""
    captured = {}

    def tracer(frame, event, arg):
        if (
            event == "call"
            and frame.f_code.co_name == "train"
            and frame.f_code.co_filename.endswith("cli/train_ppo_ray.py")
        ):
            captured["args"] = frame.f_locals["args"]
            raise _Stop
        return None

    old = sys.argv
    sys.argv = ["train_ppo_ray.py", *argv]
    sys.settrace(tracer)
    try:
        runpy.run_module("openrlhf.cli.train_ppo_ray", run_name="__main__")
    except _Stop:
        pass
    finally:
        sys.settrace(None)
        sys.argv = old
    return captured["args"]


def test_parse_equals_openrlhf_own_parse_plus_recipe(tmp_path):
    """openrlhf_args runs OpenRLHF's __main__ block compiled from its file, without importing its trainer: it must
    give exactly what OpenRLHF's own script hands to train()."""
    from lead_recipes.recipes.openrlhf_parser import openrlhf_args
    from lead_recipes.training.args import with_recipe

    flags = base_flags(tmp_path, extra=["--train.colocate_all", "--vllm.num_engines", "1", "--ds.packing_samples"])
    ours, recipe, rest, _ = train.parse_command_line(
        flags[:6] + ["--recipe.method", "leash", "--recipe.leash.target_length", "3000"] + flags[6:]
    )
    assert rest == flags[:-2]
    args = with_recipe(openrlhf_args(rest)[0], recipe, rest)
    theirs = openrlhf_own_parse(flags[:-2])
    got = train.plain(args)
    assert got.pop("recipe") == train.plain(recipe)
    assert got.pop("recipe_save_request") == str(Path(args.ckpt.path).resolve() / preempt.REQUEST_FILE)
    assert got.pop("recipe_run_name_given") is ("--logger.wandb.run_name" in rest)
    assert got.pop("recipe_reward_url") == rest[rest.index("--reward.remote_url") + 1]
    assert got == train.plain(theirs)
    assert recipe.method == "leash" and recipe.leash.target_length == 3000.0


HEAVY = ("openrlhf", "ray", "vllm", "deepspeed", "torch")


def _run_cli(*argv, cwd=ROOT, with_stdout=False):
    """(exit code and heavy modules imported, stderr[, stdout without the result line]) of main(argv) in a fresh
    interpreter."""
    code = (
        "import sys, json; from lead_recipes.training.cli import main; rc = main(sys.argv[1:]); "
        f"print(json.dumps({{'rc': rc, 'heavy': [m for m in {HEAVY!r} if m in sys.modules]}}))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )
    lines = out.stdout.strip().splitlines()
    result = json.loads(lines[-1])
    return (result, out.stderr, "\n".join(lines[:-1])) if with_stdout else (result, out.stderr)


def _only_our_lines(err: str) -> list[str]:
    """stderr lines that are not `lead-recipes train…` or an indented continuation of one (third-party noise)."""
    foreign, ours = [], False
    for line in err.splitlines():
        ours = line.startswith(train.PROG) or (ours and line.startswith(" "))
        if not ours and line.strip():
            foreign.append(line)
    return foreign


def test_help_prints_only_the_help_and_imports_nothing_heavy():
    """--help builds and validates no method: that imports torch (1.7 s and torch's pynvml FutureWarning)."""
    result, err, out = _run_cli("--help", with_stdout=True)
    assert result == {"rc": 0, "heavy": []}
    assert err == "" and out.startswith("usage: lead-recipes train")


def test_dry_run_imports_no_trainer_and_prints_only_our_lines_with_openrlhfs_messages_in_todays_flag_names(tmp_path):
    """The dry run imports no trainer (~10 s of torch, DeepSpeed, vLLM), prints none of their banners and opens
    stdout with the resolved command; OpenRLHF's `[Warning] Set --rollout_max_tokens_per_gpu ...` (a pre-0.11
    flag name) reaches stderr in today's flag names."""
    result, err, out = _run_cli("--run.dry_run_enable", cwd=tmp_path, with_stdout=True)
    assert result == {"rc": 0, "heavy": []}
    assert out.startswith("# resolved command\n")
    assert _only_our_lines(err) == []
    assert (
        "lead-recipes train: OpenRLHF: Set --rollout.max_tokens_per_gpu to --train.max_tokens_per_gpu." in err
    )  # the embedded recipe turns on dynamic batching without a rollout token budget
    assert "rollout_max_tokens_per_gpu" not in out + err


def _train_recipes() -> list[str]:
    from lead_recipes.recipes.recipe import load_recipe, recipe_names

    return [n for n in recipe_names() if load_recipe(n).entrypoint == "train"]


@pytest.mark.parametrize("recipe", _train_recipes())
def test_every_recipes_dry_run_prints_only_our_lines(recipe, tmp_path):
    """leash-1.5b, leash-4b and shorter-better-1.5b inherit lead-1.5b's --recipe.lead.b_max with another cap; the
    dry run asks whether the method reads b_max without building it (torch's import prints a pynvml FutureWarning)."""
    result, err = _run_cli("--recipe.name", recipe, "--run.dry_run_enable", cwd=tmp_path)
    assert result["rc"] == 0 and _only_our_lines(err) == [], err


def test_a_value_openrlhfs_parser_refuses_is_one_line_not_its_usage_page(tmp_path):
    result, err = _run_cli(*base_flags(tmp_path), "--rollout.batch_size", "many", "--run.dry_run_enable")
    assert result == {"rc": 2, "heavy": []}
    assert err.strip().splitlines()[-1] == (
        "lead-recipes train: error: argument --rollout.batch_size: invalid int value: 'many'"
    )
    assert "usage:" not in err


def test_what_openrlhf_printed_before_refusing_is_shown_with_its_refusal(tmp_path, capsys):
    """Its validation turns packing on and then asserts on it: the first message explains the second (both in
    today's flag names)."""
    flags = base_flags(tmp_path, extra=["--ds.packing_samples", "--ds.attn_implementation", "sdpa"])
    assert train.main([*flags, "--vllm.num_engines", "0", "--run.dry_run_enable"]) == 2
    err = capsys.readouterr().err
    assert "OpenRLHF: [Warning] Please use --ds.attn_implementation with flash_attention" in err
    assert err.strip().splitlines()[-1] == (
        "lead-recipes train: error: OpenRLHF rejected the configuration: Only support `--ds.packing_samples` with vLLM."
    )


def test_openrlhfs_old_flag_names_map_to_flags_it_parses():
    from lead_recipes.recipes.openrlhf_parser import _old_names, current_flag_names, openrlhf_parser

    flags = {f for a in openrlhf_parser()._actions for f in a.option_strings}
    assert {f"--{new}" for new in _old_names().values()} <= flags
    assert not {f"--{old}" for old in _old_names()} & flags
    assert current_flag_names("[Warning] --ring_attn_size > 1 requires --packing_samples.") == (
        "[Warning] --ds.ring_attn_size > 1 requires --ds.packing_samples."
    )
    assert current_flag_names("--use_dynamic_batch, --local_rank, --no_such_flag") == (
        "--train.dynamic_batch_enable, --local_rank, --no_such_flag"
    )


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_preflight_failure_prints_only_our_lines_and_no_checkpoint_notice(tmp_path):
    """The preflight prints none of torch's, DeepSpeed's, vLLM's or Ray's start-up lines, and no SIGUSR1 checkpoint
    notice: --preflight.only_enable never trains."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": "", "HF_HUB_OFFLINE": "1"}
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run(
        [sys.executable, "-m", "lead_recipes.cli", "train", "--preflight.only_enable"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=280,
    )
    assert proc.returncode == 1
    assert all(re.match(r"\[\s*(ok|MISSING)\] ", line) for line in proc.stdout.splitlines()), proc.stdout
    assert _only_our_lines(proc.stderr) == []
    assert "cannot start training, missing: gpu: no CUDA GPU visible" in proc.stderr
    assert "request a checkpoint" not in proc.stderr


@pytest.mark.parametrize(
    "bad, message",
    [
        (["--recipe.method", "drpo"], "--recipe.method"),
        (["--recipe.lead.agregator", "median"], "did you mean --recipe.lead.aggregator"),
        (["--recipe.lead.beta_ema", "1.5"], "beta_ema"),
    ],
)
def test_bad_recipe_flags_fail_before_openrlhf_or_ray_is_imported(tmp_path, bad, message):
    result, err = _run_cli(*base_flags(tmp_path), *bad)
    assert result["rc"] == 2
    assert message in err
    assert result["heavy"] == []


def test_openrlhf_validation_stays_in_force(tmp_path, capsys):
    flags = base_flags(tmp_path)
    flags[flags.index("--rollout.n_samples_per_prompt") + 1] = "1"
    assert train.main(flags + ["--run.dry_run_enable"]) == 2
    assert "requires n_samples_per_prompt > 1" in capsys.readouterr().err


@pytest.mark.parametrize(
    "bad, message",
    [
        (
            ["--actor.model_name_or_pth", "m"],
            "unknown flag --actor.model_name_or_pth (did you mean --actor.model_name_or_path?)",
        ),
        (["--recipe.lead.agregator", "min_correct"], "(did you mean --recipe.lead.aggregator?)"),
        (["--no.such_flag"], "unknown flag --no.such_flag"),
        (["--rollout.max_new_tok", "9"], "unknown flag --rollout.max_new_tok (did you mean --rollout.max_new_tokens?)"),
    ],
)
def test_a_flag_neither_ours_nor_openrlhfs_fails_naming_the_closest_before_openrlhf_is_imported(tmp_path, bad, message):
    # the abbreviation --rollout.max_new_tok is refused too, although OpenRLHF's own parser would take it
    result, err = _run_cli(*base_flags(tmp_path), *bad, "--run.dry_run_enable")
    assert result["rc"] == 2 and result["heavy"] == []
    assert message in err and len(err.strip().splitlines()) == 1


def test_estimator_with_critic_is_refused_before_start(tmp_path, capsys):
    flags = base_flags(tmp_path)
    flags[flags.index("--algo.advantage.estimator") + 1] = "gae"
    assert train.main(flags) == 2
    assert "--algo.advantage.estimator gae" in capsys.readouterr().err


def test_dry_run_prints_resolved_command_and_configuration(tmp_path, capsys):
    import ray

    assert train.main(base_flags(tmp_path) + ["--recipe.method", "grpo-lead", "--run.dry_run_enable"]) == 0
    out = capsys.readouterr().out
    command = out.split("# resolved command\n")[1].split("\n")[0]
    assert command.startswith("lead-recipes train --actor.model_name_or_path some/model")
    assert "--recipe.method grpo-lead" in command and "--reward.clip_range -5 5" in command
    config = json.loads(out.split("# configuration after OpenRLHF's validation\n")[1].split("\n# ")[0])
    assert config["recipe"]["method"] == "grpo-lead"
    assert config["reward"]["clip_range"] == [-5.0, 5.0]
    assert config["critic"]["model_name_or_path"] is None  # set by OpenRLHF's own validation for group_norm
    assert not ray.is_initialized()


def test_no_openrlhf_flags_means_the_embedded_lead_recipe(capsys):
    assert train.main(["--run.dry_run_enable", "--recipe.lead.alpha", "0.5"]) == 0
    out = capsys.readouterr().out
    config = json.loads(out.split("# configuration after OpenRLHF's validation\n")[1].split("\n# ")[0])
    assert config["actor"]["model_name_or_path"] == "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B"
    assert config["recipe"]["method"] == "lead"
    assert config["recipe"]["lead"]["alpha"] == 0.5  # the user's flag wins over the recipe's 1.0
    assert config["rollout"]["max_new_tokens"] == 4000


def test_required_gpus_follows_openrlhf_placement():
    from types import SimpleNamespace as NS

    args = NS(
        actor=NS(num_nodes=1, num_gpus_per_node=4),
        ref=NS(num_nodes=1, num_gpus_per_node=4),
        vllm=NS(num_engines=2, tensor_parallel_size=2),
        algo=NS(kl=NS(init_coef=0.01)),
        train=NS(colocate_all=True, colocate_actor_ref=False, async_enable=False),
    )
    assert required_gpus(args) == 4
    args.train.colocate_all = False
    assert required_gpus(args) == 12
    args.train.colocate_actor_ref = True
    assert required_gpus(args) == 8


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_preflight_on_cpu_reports_missing_gpu_and_exits_nonzero(tmp_path, tiny_qwen2, shared_data, capsys):
    rows = [json.loads(x) for x in (shared_data / "train" / "math_level3to5.jsonl").open().readlines()[:4]]
    (tmp_path / "p.jsonl").write_text(
        "".join(json.dumps({"prompt": r["problem"], "label": r["answer"]}) + "\n" for r in rows)
    )
    flags = base_flags(
        tmp_path, model=tiny_qwen2, extra=["--ckpt.path", str(tmp_path / "ckpt"), "--ds.attn_implementation", "sdpa"]
    )
    rc = train.main(flags + ["--preflight.only_enable"])
    captured = capsys.readouterr()
    assert rc == 1
    status = {
        m.group(2): (m.group(1), m.group(3))
        for m in re.finditer(r"^\[\s*(ok|MISSING)\] (\S+)\s+(.*)$", captured.out, re.M)
    }
    assert status["gpu"][0] == "MISSING" and "no CUDA GPU visible" in status["gpu"][1]
    assert status["ray"][0] == "MISSING" and "0 GPU(s)" in status["ray"][1]
    for name in ("openrlhf", "data", "model", "reward", "ckpt", "flash-attn"):
        assert status[name][0] == "ok", status[name]
    assert "cannot start training, missing: gpu: no CUDA GPU visible" in captured.err


def test_dry_run_of_unrunnable_configuration_prints_only_the_error_and_exits_2(tmp_path, capsys):
    """Not the whole configuration ending in `# warning: ERROR ...`, which would bury the answer."""
    assert train.main(base_flags(tmp_path, extra=["--ckpt.disable_ds"]) + ["--run.dry_run_enable"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert (
        captured.err.strip()
        .splitlines()[-1]
        .startswith("lead-recipes train: error: --ckpt.disable_ds: OpenRLHF then writes no DeepSpeed checkpoint")
    )


def test_ckpt_disable_ds_is_refused_before_the_preflight_even_without_a_resume(tmp_path, capsys, monkeypatch):
    """With --ckpt.disable_ds a save on request would write the saved marker although nothing is saved."""
    monkeypatch.setattr(train, "run_preflight", lambda args: pytest.fail("preflight reached"))
    assert train.main(base_flags(tmp_path, extra=["--ckpt.disable_ds", "--ckpt.save_steps", "-1"])) == 2
    assert "drop --ckpt.disable_ds" in capsys.readouterr().err


def _config(out: str) -> dict:
    return json.loads(out.split("# configuration after OpenRLHF's validation\n")[1].split("\n# ")[0])


def test_the_command_a_user_types_overlays_the_method_reference_recipe(capsys):
    argv = ["--recipe.method", "leash", "--actor.model_name_or_path", "M", "--data.prompt_dataset", "D"]
    assert train.main(argv + ["--run.dry_run_enable"]) == 0
    captured = capsys.readouterr()
    config = _config(captured.out)
    assert (config["actor"]["model_name_or_path"], config["data"]["prompt_dataset"]) == ("M", "D")
    assert config["recipe"]["method"] == "leash" and config["recipe"]["leash"]["target_length"] == 4096.0
    assert config["rollout"]["max_new_tokens"] == 16384  # from leash-1.5b, the leash reference recipe
    assert config["reward"]["remote_url"] == [reward_func_path()]
    assert "base recipe leash-1.5b" in captured.err


def test_one_openrlhf_flag_no_longer_drops_the_rest_of_the_recipe(capsys):
    assert train.main(["--rollout.n_samples_per_prompt", "4", "--run.dry_run_enable"]) == 0
    config = _config(capsys.readouterr().out)
    assert config["rollout"]["n_samples_per_prompt"] == 4
    assert config["actor"]["model_name_or_path"] == "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B"
    assert config["recipe"]["lead"]["b_max"] == 4000


def test_without_a_base_recipe_the_method_defaults_are_filled_in_and_printed(capsys):
    argv = [
        "--recipe.name",
        "none",
        "--recipe.method",
        "leash",
        "--actor.model_name_or_path",
        "M",
        "--data.prompt_dataset",
        "D",
        "--run.dry_run_enable",
    ]
    assert train.main(argv) == 0
    captured = capsys.readouterr()
    config = _config(captured.out)
    assert config["algo"]["advantage"]["estimator"] == "group_norm"
    assert config["rollout"]["n_samples_per_prompt"] == 8 and config["rollout"]["max_new_tokens"] == 4000
    assert config["data"]["max_len"] == 5024
    assert (config["data"]["input_key"], config["data"]["label_key"]) == ("prompt", "label")
    assert config["reward"]["remote_url"] == [reward_func_path()]
    for flag in (
        "--algo.advantage.estimator group_norm",
        "--rollout.n_samples_per_prompt 8",
        "--rollout.max_new_tokens 4000",
        "--reward.remote_url",
    ):
        assert f"default {flag}" in captured.err


def test_a_recipe_switch_that_is_on_is_turned_off_from_the_command_line(capsys):
    stage2b = ["--recipe.name", "grpo-lead-14b-stage2b", "--run.dry_run_enable"]
    assert train.main(stage2b) == 0
    assert _config(capsys.readouterr().out)["recipe"]["grpo_lead"]["repetition_penalty_enable"] is True
    assert train.main(stage2b + ["--no-recipe.grpo_lead.repetition_penalty_enable"]) == 0
    out = capsys.readouterr().out
    assert _config(out)["recipe"]["grpo_lead"]["repetition_penalty_enable"] is False
    command = out.split("# resolved command\n")[1].split("\n")[0]
    assert "--no-recipe.grpo_lead.repetition_penalty_enable" in command  # so does the resolved command


def test_lead_cap_defaults_to_its_b_max():
    from lead_recipes.training.args import flag_values, resolve

    resolved = resolve(["--recipe.name", "none", "--recipe.lead.b_max", "3000"], train._our_parser())
    assert flag_values(resolved.argv, "--rollout.max_new_tokens") == ["3000"]
    assert flag_values(resolved.argv, "--data.max_len") == ["4024"]


def test_the_cap_defaults_to_lead_b_max_for_every_method_that_reads_it():
    from lead_recipes.methods import sections_read
    from lead_recipes.methods.config import METHODS
    from lead_recipes.training.args import flag_values, resolve

    readers = {m for m in METHODS if "lead" in sections_read(m)}
    assert {"lead", "composed", "gdpo", "grpo-scalarized"} <= readers < set(METHODS)
    for m in METHODS:
        argv = ["--recipe.name", "none", "--recipe.method", m, "--recipe.lead.b_max", "3000"]
        cap = flag_values(resolve(argv, train._our_parser()).argv, "--rollout.max_new_tokens")
        assert cap == (["3000"] if m in readers else ["4000"]), m


def test_every_missing_required_flag_is_named_in_one_message_before_openrlhf_is_imported():
    result, err = _run_cli("--recipe.name", "none", "--recipe.method", "leash", "--run.dry_run_enable")
    assert result["rc"] == 2 and result["heavy"] == []
    assert "--actor.model_name_or_path" in err and "--data.prompt_dataset" in err
    assert err.count("error:") == 1 and len(err[err.index("error:") :].strip().splitlines()) <= 2, err


def test_each_method_reference_recipe_runs_that_method():
    from lead_recipes.methods.config import REGISTRY
    from lead_recipes.recipes.recipe import load_recipe
    from lead_recipes.training.args import resolve

    for entry in REGISTRY:
        assert load_recipe(entry.recipe).recipe["method"] == entry.name
        resolved = resolve(["--recipe.method", entry.name], train._our_parser())
        assert resolved.base == entry.recipe and not resolved.missing


def test_a_rendered_recipe_command_takes_nothing_from_a_base_recipe():
    from lead_recipes.recipes.recipe import load_recipe, recipe_names
    from lead_recipes.training.args import resolve

    for name in recipe_names():
        recipe = load_recipe(name)
        if recipe.entrypoint == "sft":
            continue
        cmd = recipe.command()
        resolved = resolve(cmd[2:], train._our_parser())
        assert resolved.base is None, name
        assert resolved.argv[: len(cmd) - 2] == cmd[2:], name


def test_unknown_base_recipe_is_a_usage_error(capsys):
    assert train.main(["--recipe.name", "no-such-recipe", "--run.dry_run_enable"]) == 2
    assert "--recipe.name: unknown recipe 'no-such-recipe'" in capsys.readouterr().err


def test_http_reward_urls_are_routed_through_the_forwarding_reward_function(tmp_path, capsys, monkeypatch):
    from lead_recipes.training.args import REWARD_URLS_ENV

    monkeypatch.setenv(REWARD_URLS_ENV, "")  # main() exports the URLs; restored afterwards
    flags = base_flags(tmp_path)
    flags[flags.index("--reward.remote_url") + 1] = "http://a:1/get_reward,http://b:2/get_reward"
    assert train.main(flags + ["--run.dry_run_enable"]) == 0
    config = _config(capsys.readouterr().out)
    assert config["reward"]["remote_url"] == [reward_func_path().replace("reward_func", "remote_reward")]
    assert os.environ[REWARD_URLS_ENV] == "http://a:1/get_reward,http://b:2/get_reward"


def test_launch_runs_openrlhf_train_with_recipe_trainers_swapped_in(tmp_path, monkeypatch):
    """Launch mode up to train()'s first line (the rest needs GPUs): OpenRLHF's train() sees our trainer classes
    and args.recipe; everything is restored afterwards."""
    import openrlhf.trainer.ppo_trainer as pt
    import openrlhf.trainer.ppo_trainer_async as pta
    import ray

    from lead_recipes.training import openrlhf_plugin as plugin

    seen = {}

    class Seen(Exception):
        pass

    def first_line_of_train():
        seen["sync"], seen["async"] = pt.PPOTrainer, pta.PPOTrainerAsync
        raise Seen

    monkeypatch.setattr(ray, "is_initialized", first_line_of_train)
    _, recipe, rest, _ = train.parse_command_line(base_flags(tmp_path) + ["--recipe.method", "gdpo"])
    original = pt.PPOTrainer
    with pytest.raises(Seen):
        plugin.run_openrlhf(rest, recipe)
    assert seen["sync"] is plugin.RecipePPOTrainer and seen["async"] is plugin.RecipePPOTrainerAsync
    assert pt.PPOTrainer is original


# ------------------------------------------------------------------ launchers/gpu_smoke.sh (its checker runs here)
def _gpu_smoke(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        ["bash", str(ROOT / "launchers" / "gpu_smoke.sh"), *args], capture_output=True, text=True, env=env
    )


def test_gpu_smoke_script_is_shellcheck_clean_and_refuses_without_gpu():
    shellcheck = Path(sys.executable).parent / "shellcheck"
    assert (
        subprocess.run([str(shellcheck), str(ROOT / "launchers" / "gpu_smoke.sh")], capture_output=True).returncode == 0
    )
    assert "--smoke.methods" in _gpu_smoke("--help").stdout
    out = _gpu_smoke("--smoke.gpus=0")
    assert out.returncode == 1 and "needs at least one" in out.stderr


def test_gpu_smoke_runs_every_registered_method_by_default_and_refuses_an_unknown_one_first():
    from lead_recipes.methods.config import METHODS

    out = _gpu_smoke("--smoke.gpus", "0")  # stops at the GPU check, after naming its methods
    assert f"gpu_smoke.sh: methods: {' '.join(METHODS)}\n" in out.stdout and "composed" in METHODS
    out = _gpu_smoke("--smoke.methods", "lead nosuch", "--smoke.gpus", "0")
    assert out.returncode == 2 and "unknown method(s) nosuch" in out.stderr and "needs at least one" not in out.stderr


def _launcher(name: str):
    sys.path.insert(0, str(ROOT / "launchers"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)


def test_gpu_smoke_checks_the_controller_of_every_method_that_has_one():
    from lead_recipes.methods import build_method
    from lead_recipes.methods.config import METHODS, RecipeConfig

    smoke_check = _launcher("smoke_check")
    expected = {m for m in METHODS if build_method(RecipeConfig(method=m)).state_dict() is not None}
    assert {m for m in METHODS if smoke_check.stateful(m)} == expected and {"lead", "leash", "composed"} <= expected


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_gpu_smoke_dry_run_passes_openrlhfs_validation_and_the_data_check_on_cpu(tmp_path):
    # composed and l1-max (L1 data), taken from the registry like every method, and every path on the dry run's 2
    # GPUs: each command through `train --run.dry_run_enable`, each run's prompts through the preflight's data check
    out = _gpu_smoke("--smoke.dry_run_enable", "--smoke.methods", "composed l1-max", "--smoke.workdir", str(tmp_path))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines, summary = out.stdout.split("==== gpu_smoke summary")
    for method in ("composed", "l1-max"):
        assert f"ok {method}: the preflight's data check" in lines
        assert lines.count(f"ok {method}: the command passed") == lines.count(f"ok {method} resume: the com") == 1
    for path in _launcher("gpu_smoke").PATHS:
        assert f"ok {path} (lead): the command passed OpenRLHF's validation" in lines, path
    assert "all checks passed (dry run)" in summary and "FAIL" not in out.stdout
    resumed = (tmp_path / "plain" / "composed" / "train.log.resume").read_text()
    assert "--ckpt.load_enable" in resumed and "--recipe.method composed" in resumed
    assert "openrlhf 0.11.2" in summary and "ok async (lead)" in summary  # versions and every result line


def test_gpu_smoke_skips_the_two_gpu_paths_on_one_gpu_with_a_line_saying_why(tmp_path):
    out = _gpu_smoke(
        "--smoke.dry_run_enable",
        "--smoke.gpus",
        "1",
        "--smoke.methods",
        "",
        "--smoke.paths",
        "tp2 async",
        "--smoke.workdir",
        str(tmp_path),
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    for path in ("tp2", "async"):
        assert f"skip {path}: needs >= 2 GPUs" in out.stdout and f"ok {path}" not in out.stdout
    out = _gpu_smoke("--smoke.paths", "tp2 nosuch", "--smoke.gpus", "0")
    assert out.returncode == 2 and "unknown path(s) nosuch" in out.stderr


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_gpu_smoke_reports_a_failed_run_as_a_fail_line_in_its_summary_and_exits_1(tmp_path):
    # a real (not dry) run on this GPU-less machine: the preflight refuses it, which must not read as a pass
    (tmp_path / "model").mkdir()
    out = _gpu_smoke(
        "--smoke.gpus",
        "1",
        "--smoke.model",
        str(tmp_path / "model"),
        "--smoke.methods",
        "lead",
        "--smoke.paths",
        "",
        "--smoke.workdir",
        str(tmp_path / "work"),
    )
    assert out.returncode == 1 and "gpu_smoke.sh: FAILED" in out.stdout, out.stdout[-3000:] + out.stderr[-3000:]
    lines, summary = out.stdout.split("==== gpu_smoke summary")
    assert "FAIL lead: training exited non-zero" in lines and "FAIL lead: training exited non-zero" in summary
    assert "ok lead: the preflight's data check" in summary and "no CUDA GPU visible" in lines


def _fake_run(root, method, controllers, steps, problems_steps):
    """A run directory as a real smoke run leaves it: DeepSpeed model_states with client_states merged in,
    TensorBoard scalars, recipe_problems.jsonl."""
    import torch
    from torch.utils.tensorboard import SummaryWriter

    for step, ctrl in zip(steps, controllers):
        d = root / "ckpt" / "_actor" / f"global_step{step}"
        d.mkdir(parents=True)
        torch.save(
            {"module": {}, "recipe": {"version": 1, "method": method, "controller": ctrl}},
            d / "mp_rank_00_model_states.pt",
        )
    writer = SummaryWriter(str(root / "tb" / method))
    for step in steps:
        for tag in (
            "recipe/correct_rate",
            "recipe/length_mean",
            "recipe/grading/timeout_count",
            "recipe/grading/error_count",
            f"recipe/{method}/lambda_c",
        ):
            writer.add_scalar(f"train/{tag}", 0.5, step)
    writer.close()
    with open(root / "ckpt" / "recipe_problems.jsonl", "a") as f:
        for step in problems_steps:
            f.write(
                json.dumps(
                    {"step": step, "problem": "p", "prompt_sha1": "x", "correct": 1, "total": 4, "mean_length": 9.0}
                )
                + "\n"
            )


def test_gpu_smoke_checker_accepts_a_good_run_and_names_each_defect(tmp_path):
    smoke_check = _launcher("smoke_check")
    good = tmp_path / "good"
    _fake_run(good, "lead", [{"w_c": 0.5, "step": 1}, {"w_c": 0.52, "step": 2}], [1, 2], [1, 2])
    assert smoke_check.check(str(good), "lead", [1, 2], None) == []
    frozen = tmp_path / "frozen"
    _fake_run(frozen, "lead", [{"w_c": 0.5, "step": 1}, {"w_c": 0.5, "step": 1}], [1, 2], [1])
    problems = smoke_check.check(str(frozen), "lead", [1, 2], None)
    assert any("did not move" in p for p in problems) and any("lacks steps [2]" in p for p in problems)
    restarted = tmp_path / "restarted"
    _fake_run(
        restarted,
        "lead",
        [{"w_c": 0.5, "step": 2}, {"w_c": 0.5, "step": 1}, {"w_c": 0.6, "step": 2}],
        [2, 3, 4],
        [3, 4],
    )
    assert any("restarted" in p for p in smoke_check.check(str(restarted), "lead", [3, 4], 2))


def _scalars(kl: dict, grad: dict) -> dict:
    return {"train/vllm_kl": kl, "train/actor_grad_norm": grad}


def test_gpu_smoke_sync_check_passes_a_synced_run_and_fails_a_stale_vllm_with_the_values():
    sync = _launcher("smoke_check").sync_problems
    bound = _launcher("smoke_check").VLLM_KL_BOUND
    assert sync(_scalars({1: 1e-3, 2: 2e-3, 3: 1e-3, 4: 3e-3}, {1: 0.5, 2: 0.0, 3: 0.7, 4: 0.2})) == []
    stale = sync(_scalars({1: 1e-3, 2: 0.4, 3: 1e-3, 4: 0.2}, {1: 0.5, 2: 0.0, 3: 0.7, 4: 0.2}))
    assert len(stale) == 1 and "steps [2, 4]" in stale[0] and "0.4" in stale[0] and str(bound) in stale[0]


def test_gpu_smoke_sync_check_counts_only_steps_after_a_real_gradient_and_refuses_a_vacuous_run():
    sync = _launcher("smoke_check").sync_problems
    # step 3 follows a zero-gradient step: its vllm_kl says nothing about the sync and is not held to the bound
    assert sync(_scalars({2: 1e-3, 3: 0.5}, {1: 0.5, 2: 0.0})) == []
    vacuous = sync(_scalars({1: 1e-3, 2: 1e-3}, {1: 0.0, 2: 0.0}))
    assert len(vacuous) == 1 and "unchecked" in vacuous[0] and "no step followed a real gradient" in vacuous[0]


def test_gpu_smoke_path_check_adds_the_sync_check_except_on_the_lagged_async_path(tmp_path, capsys):
    smoke_check = _launcher("smoke_check")
    _fake_run(tmp_path, "lead", [{"w_c": 0.5, "step": 1}, {"w_c": 0.52, "step": 2}], [1, 2], [1, 2])  # no vllm_kl
    assert smoke_check.main(["check", str(tmp_path), "lead", "--smoke.steps", "1,2", "--smoke.path", "async"]) == 0
    assert "ok async (lead): steps 1,2; train/vllm_kl not checked: its rollouts lag" in capsys.readouterr().out
    assert smoke_check.main(["check", str(tmp_path), "lead", "--smoke.steps", "1,2", "--smoke.path", "packing"]) == 1
    assert "FAIL packing (lead): weight sync unchecked" in capsys.readouterr().out


# ------------------------------------------------------------------ preemption: signals request a checkpoint
def _driver_in_preflight(tmp_path, env):
    """A real `lead-recipes train` driver held in its preflight: the reward URL is a socket that accepts and never
    answers, so the reward probe waits (10 s timeout) while the test signals the process."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    (tmp_path / "p.jsonl").write_text(json.dumps({"prompt": "1+1?", "label": "2"}) + "\n")
    flags = base_flags(tmp_path, extra=["--ckpt.path", str(tmp_path / "ckpt")])
    flags[flags.index("--reward.remote_url") + 1] = f"http://127.0.0.1:{silent.getsockname()[1]}/get_reward"
    proc = subprocess.Popen(
        [sys.executable, "-m", "lead_recipes.cli", "train", *flags],  # a real run; it stops in the preflight
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    ready = ""
    while "request a checkpoint" not in ready:  # the handlers are installed when this line is printed
        line = proc.stderr.readline()
        assert line, f"driver exited early: {proc.wait()} {proc.stdout.read()}"
        ready += line
    return proc, silent


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_sigusr1_to_train_driver_writes_the_save_request_under_ckpt_path(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != preempt.SAVE_REQUEST_ENV}
    stale = tmp_path / "ckpt" / preempt.REQUEST_FILE
    stale.parent.mkdir()
    stale.write_text('{"signal": "from a previous run"}')
    proc, silent = _driver_in_preflight(tmp_path, env)
    with silent:
        assert not stale.exists()  # removed at start: a previous run's request must not stop this one
        proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 20
        while not stale.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        request = json.loads(stale.read_text())
        assert proc.poll() is None  # a request, not an exit
        proc.kill()
        proc.wait()
    assert (request["signal"], request["pid"]) == ("SIGUSR1", proc.pid)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_second_sigterm_ends_the_driver_after_the_first_requested_a_checkpoint(tmp_path):
    path = tmp_path / "elsewhere" / "req.json"
    proc, silent = _driver_in_preflight(tmp_path, {**os.environ, preempt.SAVE_REQUEST_ENV: str(path)})
    with silent:
        proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 20
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert json.loads(path.read_text())["signal"] == "SIGTERM" and proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == -signal.SIGTERM


def test_dry_run_masks_reward_url_token_and_wandb_key(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LEAD_RECIPES_REWARD_URLS", "")  # main() exports the URLs; restored afterwards
    flags = base_flags(tmp_path, extra=["--logger.wandb.key", "wandb-secret-key-123"])
    flags[flags.index("--reward.remote_url") + 1] = "http://10.0.0.1:5432/get_reward?token=s3cr3t-t0ken"
    assert train.main(flags + ["--run.dry_run_enable"]) == 0
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert "s3cr3t-t0ken" not in text and "wandb-secret-key-123" not in text
    assert "/get_reward?token=***" in captured.err  # routed through remote_reward.py, named in its line


def test_missing_dataset_hint_is_the_prepare_command_of_the_recipe_using_that_path(tmp_path, monkeypatch):
    monkeypatch.setenv("LEAD_RECIPES_DATA", str(tmp_path))
    hint = train.prepare_hint(str(tmp_path / "dapo_math_r1.jsonl"), recipe=None)
    assert "(recipe leash-1.5b)" in hint
    command = shlex.split(hint.split(" with: ", 1)[1])
    assert command[:3] == ["lead-recipes", "data", "build"]
    assert command[command.index("--output") + 1] == str(tmp_path / "dapo_math_r1.jsonl")
    assert train.prepare_hint(str(tmp_path / "no_recipe_uses_this.jsonl"), recipe=None) is None


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_main_job_builds_its_missing_prompt_data_from_the_source_before_the_preflight(tmp_path, shared_data):
    """`lead-recipes train` with no flags (the embedded lead-1.5b recipe), its prompt data absent and the recipe's
    source present under $LEAD_RECIPES_SOURCES: the data is built first, so the preflight's data line is ok (the
    run still stops there on this GPU-less machine)."""
    sources, data = tmp_path / "sources", tmp_path / "data"
    sources.mkdir()
    (sources / "math_level3to5.jsonl").symlink_to(shared_data / "train" / "math_level3to5.jsonl")
    env = {
        **{k: v for k, v in os.environ.items() if k != preempt.SAVE_REQUEST_ENV},
        "LEAD_RECIPES_SOURCES": str(sources),
        "LEAD_RECIPES_DATA": str(data),
        "LEAD_RECIPES_RUN_DIR": str(tmp_path / "run"),  # ckpt.path; kept out of the repository
        "LEAD_RECIPES_BENCHMARKS_DIR": str(shared_data / "benchmarks"),
        "HF_HUB_OFFLINE": "1",
    }
    out = subprocess.run(
        [sys.executable, "-m", "lead_recipes.cli", "train"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
    )
    built = data / "math_l35_lead.jsonl"
    assert out.returncode == 1, out.stderr
    assert f"prompt data {built} is missing; building it (recipe lead-1.5b)" in out.stdout
    rows = [json.loads(x) for x in built.read_text().splitlines()]
    assert 8500 <= len(rows) < 8600 and {"prompt", "label"} <= rows[0].keys()
    assert json.loads(Path(f"{built}.report.json").read_text())["written"] == len(rows)
    status = {
        m.group(2): (m.group(1), m.group(3))
        for m in re.finditer(r"^\[\s*(ok|MISSING)\] (\S+)\s+(.*)$", out.stdout, re.M)
    }
    assert status["data"] == ("ok", str(built))
    assert status["gpu"][0] == "MISSING" and "build the prompt data" not in out.stderr


def test_missing_dataset_hint_names_the_recipe_being_run_when_several_share_the_path(tmp_path, monkeypatch):
    """grpo-lead-14b-stage1 extends grpo-lead-7b's prompt data: the hint names the recipe being run, not the first
    of the two in the recipe folder."""
    monkeypatch.setenv("LEAD_RECIPES_DATA", str(tmp_path))
    path = str(tmp_path / "deepscaler_d25.jsonl")
    assert "(recipe grpo-lead-7b)" in train.prepare_hint(path, recipe="grpo-lead-7b")
    assert "(recipe grpo-lead-14b-stage1)" in train.prepare_hint(path, recipe="grpo-lead-14b-stage1")


def test_a_missing_monitor_set_is_hinted_and_built_from_the_recipes_prepare_eval(tmp_path, monkeypatch):
    """Laser-D's eval dataset (its monitor set) has its own command, data.prepare_eval: the hint names it, and a
    real run builds it as it builds the prompt data (with that command; `data build` itself is tested elsewhere)."""
    monkeypatch.setenv("LEAD_RECIPES_SOURCES", str(tmp_path))
    monkeypatch.setenv("LEAD_RECIPES_DATA", str(tmp_path))
    monitor = tmp_path / "deepscaler_laser_monitor500.jsonl"
    hint = train.prepare_hint(str(monitor), recipe="laser-d-1.5b-l4096", key="eval.dataset")
    assert "build the eval data (recipe laser-d-1.5b-l4096) with: lead-recipes data build" in hint
    assert "--limit 500" in hint and shlex.split(hint.split(" with: ", 1)[1].splitlines()[0])[-1] == str(monitor)
    (tmp_path / "deepscaler.jsonl").write_text("{}\n")
    from lead_recipes import data

    ran = []

    def build(argv):
        ran.append(argv)
        monitor.write_text("{}\n")
        return 0

    monkeypatch.setattr(data, "main", build)
    assert train.build_missing_data(str(monitor), recipe="laser-d-1.5b-l4096", key="eval.dataset") is True
    assert ran == [shlex.split(hint.split(" with: lead-recipes data ", 1)[1].splitlines()[0])]


def test_missing_source_hint_names_the_file_and_where_sources_are_expected(tmp_path, monkeypatch):
    monkeypatch.setenv("LEAD_RECIPES_SOURCES", str(tmp_path / "no_sources_here"))
    monkeypatch.setenv("LEAD_RECIPES_DATA", str(tmp_path))
    hint = train.prepare_hint(str(tmp_path / "math_l35_lead.jsonl"), recipe="lead-1.5b")
    assert "build the prompt data (recipe lead-1.5b) with: lead-recipes data build" in hint
    assert (
        f"math_level3to5.jsonl is missing: expected at {tmp_path / 'no_sources_here' / 'math_level3to5.jsonl'}" in hint
    )
    assert "$LEAD_RECIPES_SOURCES, default ./data/sources" in hint


def test_auto_build_never_writes_a_dataset_path_other_than_the_recipe_prepare_output(
    tmp_path, shared_data, monkeypatch
):
    """The user pointed --data.prompt_dataset elsewhere: the recipe's prepare command builds another file, so
    nothing is built (the preflight then reports the path missing)."""
    (tmp_path / "math_level3to5.jsonl").symlink_to(shared_data / "train" / "math_level3to5.jsonl")
    monkeypatch.setenv("LEAD_RECIPES_SOURCES", str(tmp_path))
    monkeypatch.setenv("LEAD_RECIPES_DATA", str(tmp_path))
    assert train.build_missing_data(str(tmp_path / "mine.jsonl"), recipe="lead-1.5b") is False
    assert sorted(p.name for p in tmp_path.iterdir()) == ["math_level3to5.jsonl"]


def test_a_grading_failure_in_the_trainer_ends_the_driver_with_its_message_and_exit_1(monkeypatch, capsys):
    from types import SimpleNamespace as NS

    from ray.exceptions import RayTaskError

    from lead_recipes.training.guard import GradingFailure

    class FakeSeam:
        @staticmethod
        def run_openrlhf(argv, recipe):
            cause = GradingFailure("grading failed for 100% of the samples (64 error, 0 timeout of 64)")
            raise RayTaskError("RecipeTrainer.fit", "Traceback ...", cause).as_instanceof_cause()

    import lead_recipes.training

    monkeypatch.setattr(lead_recipes.training, "openrlhf_plugin", FakeSeam, raising=False)
    monkeypatch.setattr(train, "build_missing_data", lambda *a, **k: False)
    monkeypatch.setattr(train, "run_preflight", lambda args, skip=(): [])
    monkeypatch.setattr(train, "forward_env_to_actors", contextlib.nullcontext)
    ours = NS(preflight=False, preflight_skip=())
    resolved = NS(base=None, user_flags=set())
    args = NS(data=NS(prompt_dataset="p.jsonl"), logger=NS(wandb=NS(key=None)))
    assert train._preflight_and_train(ours, RecipeConfig(), [], resolved, args) == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == (
        "lead-recipes train: error: grading failed for 100% of the samples (64 error, 0 timeout of 64)"
    )


def test_a_larger_cap_over_a_base_recipe_gets_a_max_len_that_keeps_the_prompt():
    from lead_recipes.training.args import PROMPT_BUDGET, flag_values, resolve

    resolved = resolve(["--rollout.max_new_tokens", "8000"], train._our_parser())  # over lead-1.5b (max_len 5024)
    assert flag_values(resolved.argv, "--data.max_len") == [str(8000 + PROMPT_BUDGET)]
    assert any(f.startswith(f"--data.max_len {8000 + PROMPT_BUDGET} ") for f in resolved.filled)


def test_a_cap_without_a_base_recipe_too_large_for_openrlhfs_max_len_gets_one_that_keeps_the_prompt(capsys):
    """docs/training.md's `--recipe.name none ... --rollout.max_new_tokens 4000` runs: OpenRLHF's default
    --data.max_len 2048 would leave -1952 prompt tokens. A cap that fits OpenRLHF's default keeps it."""
    from lead_recipes.training.args import PROMPT_BUDGET, flag_values, resolve

    argv = [*NO_BASE, "--actor.model_name_or_path", "M", "--data.prompt_dataset", "D", "--rollout.max_new_tokens"]
    resolved = resolve([*argv, "4000"], train._our_parser())
    assert flag_values(resolved.argv, "--data.max_len") == [str(4000 + PROMPT_BUDGET)]
    assert any(f.startswith(f"--data.max_len {4000 + PROMPT_BUDGET} ") for f in resolved.filled)
    assert flag_values(resolve([*argv, "512"], train._our_parser()).argv, "--data.max_len") is None
    assert train.main([*argv, "4000", "--run.dry_run_enable"]) == 0
    assert _config(capsys.readouterr().out)["data"]["max_len"] == 4000 + PROMPT_BUDGET


def test_max_len_leaving_no_prompt_room_is_refused_naming_both_flags(capsys):
    argv = ["--rollout.max_new_tokens", "8000", "--data.max_len", "8000", "--run.dry_run_enable"]
    assert train.main(argv) == 2
    err = capsys.readouterr().err
    assert "--data.max_len 8000" in err and "--rollout.max_new_tokens 8000" in err and "leaves 0 prompt" in err


def test_max_len_leaving_little_prompt_room_is_warned_naming_both_flags(capsys):
    argv = ["--rollout.max_new_tokens", "8000", "--data.max_len", "8100", "--run.dry_run_enable"]
    assert train.main(argv) == 0
    out = capsys.readouterr().out
    assert "--data.max_len 8100 minus --rollout.max_new_tokens 8000 leaves 100 prompt" in out


def test_a_set_reward_clip_range_is_warned_to_have_no_effect(capsys):
    assert train.main(["--reward.clip_range", "-3", "3", "--run.dry_run_enable"]) == 0
    assert "--reward.clip_range -3.0 3.0 has no effect" in capsys.readouterr().out
    assert train.main(["--run.dry_run_enable"]) == 0
    warned = [line for line in capsys.readouterr().out.splitlines() if line.startswith("# warning")]
    assert not any("clip_range" in line for line in warned)


def test_dapo_overlong_at_the_paper_values_is_accepted_and_its_composition_announced(capsys):
    argv = ["--rollout.max_new_tokens", "20480", "--reward.overlong_buffer_len", "4096", "--run.dry_run_enable"]
    assert train.main([*argv, "--reward.overlong_penalty_factor", "1.0"]) == 0
    out = capsys.readouterr().out
    assert '"overlong_buffer_len": 4096.0' in out and "adds its per-sample reward change to its length channel" in out


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--reward.overlong_buffer_len", "5000"], "--reward.overlong_buffer_len 5000.0 must be > 0"),
        (["--reward.overlong_buffer_len", "0"], "(0 never penalises)"),
        (["--reward.overlong_buffer_len", "1024", "--reward.overlong_penalty_factor", "-1"], "a negative factor"),
        (["--reward.stop_properly_penalty_coef", "1.5"], "must be in [0, 1]"),
    ],
)
def test_overlong_flags_that_would_not_do_what_they_say_are_refused_before_start(capsys, flags, message):
    assert train.main(["--rollout.max_new_tokens", "4096", *flags, "--run.dry_run_enable"]) == 2
    assert message in capsys.readouterr().err


def test_stop_properly_is_refused_before_start_unless_the_method_is_grpo(capsys):
    """ProRL's stop-properly coef rescales the reward function's 0/1 reward: with thinkprune a cut response holding
    the right answer would get R = −1 and a cut wrong one 0 (tests/training/test_openrlhf_plugin.py has the per-method
    check)."""
    argv = ["--rollout.max_new_tokens", "4096", "--reward.stop_properly_penalty_coef", "0.0", "--run.dry_run_enable"]
    assert train.main([*argv, "--recipe.method", "thinkprune"]) == 2
    assert "--reward.stop_properly_penalty_coef with --recipe.method thinkprune" in capsys.readouterr().err
    assert train.main([*argv, "--recipe.method", "grpo"]) == 0


def test_a_recipe_flag_of_a_section_the_method_does_not_read_is_warned_to_have_no_effect(capsys):
    argv = ["--recipe.method", "thinkprune", "--run.dry_run_enable"]
    assert train.main([*argv, "--recipe.lead.b_max", "3000"]) == 0
    assert "--recipe.lead.b_max 3000 has no effect: --recipe.method thinkprune does not read" in capsys.readouterr().out
    assert train.main(argv) == 0  # its reference recipe extends lead-1.5b, whose lead section it does not carry
    assert "has no effect" not in capsys.readouterr().out


def test_an_overlong_factor_without_a_buffer_is_warned_to_have_no_effect(capsys):
    assert train.main(["--reward.overlong_penalty_factor", "0.5", "--run.dry_run_enable"]) == 0
    assert "--reward.overlong_penalty_factor 0.5 has no effect without" in capsys.readouterr().out


def test_overlong_without_max_new_tokens_is_refused_as_it_would_under_penalise_truncated_samples(tmp_path):
    """docs/training.md#dapos-overlong-penalty: without --rollout.max_new_tokens OpenRLHF measures the buffer from
    data.max_len. The `lead-recipes train` command line always fills the cap (args.py), so this is the check on
    OpenRLHF's own validated arguments, as OpenRLHF's own validation resolves them for any caller of the plug-in."""
    from lead_recipes.recipes.openrlhf_parser import openrlhf_args
    from lead_recipes.training.args import flag_values, with_recipe

    argv = [a for a in base_flags(tmp_path, extra=["--reward.overlong_buffer_len", "1024"]) if a not in NO_BASE]
    i = argv.index("--rollout.max_new_tokens")
    argv = argv[:i] + argv[i + 2 :] + ["--data.max_len", "4608"]
    args = with_recipe(openrlhf_args(argv)[0], RecipeConfig(method="grpo"), argv)
    assert args.rollout.max_new_tokens is None and args.reward.overlong_buffer_len == 1024
    errors, _ = train.recipe_conflicts(args)
    assert any("--reward.overlong_buffer_len without --rollout.max_new_tokens" in e for e in errors), errors
    *_, resolved = train.parse_command_line(["--reward.overlong_buffer_len", "1024"])
    assert flag_values(resolved.argv, "--rollout.max_new_tokens")  # the command line never leaves it unset


def _kl_run(root, kl: dict) -> None:
    """A 4-step lead run (controller moving) whose TensorBoard also holds train/vllm_kl KL and a grad norm that is
    zero at step 2 only, so steps 2 and 4 follow a real gradient and step 3 does not."""
    from torch.utils.tensorboard import SummaryWriter

    _fake_run(root, "lead", [{"w_c": 0.5 + s / 100, "step": s} for s in (1, 2, 3, 4)], [1, 2, 3, 4], [1, 2, 3, 4])
    writer = SummaryWriter(str(root / "tb" / "sync"))
    for step, value in kl.items():
        writer.add_scalar("train/vllm_kl", value, step)
        writer.add_scalar("train/actor_grad_norm", 0.0 if step == 2 else 0.5, step)
    writer.close()


def test_gpu_smoke_sync_line_prints_the_checked_vllm_kl_and_the_step_1_floor_beside_the_bound(tmp_path, capsys):
    """What a first GPU run calibrates VLLM_KL_BOUND from: the checked steps' values (not step 3's, which follows
    no gradient) and step 1's, where vLLM and the actor hold the same weights, on the ok and on the FAIL line."""
    smoke_check = _launcher("smoke_check")
    _kl_run(tmp_path / "synced", {1: 3e-5, 2: 2e-4, 3: 0.5, 4: 4e-3})
    argv = ["lead", "--smoke.steps", "1,2,3,4", "--smoke.path", "packing"]
    assert smoke_check.main(["check", str(tmp_path / "synced"), *argv]) == 0
    values = "train/vllm_kl at the checked steps {2: 2.0e-04, 4: 4.0e-03}, step 1 (noise floor) 3.0e-05, bound 0.01"
    assert values in capsys.readouterr().out
    _kl_run(tmp_path / "stale", {1: 3e-5, 2: 2e-4, 3: 1e-4, 4: 0.3})
    assert smoke_check.main(["check", str(tmp_path / "stale"), *argv]) == 1
    out = capsys.readouterr().out
    assert out.startswith("FAIL packing (lead): train/vllm_kl >= 0.01 after a gradient step at steps [4]")
    assert "{2: 2.0e-04, 4: 3.0e-01}, step 1 (noise floor) 3.0e-05, bound 0.01]" in out
    # async is not held to the bound (its lag: docs/training.md), but its line shows every step's value
    assert (
        smoke_check.main(
            ["check", str(tmp_path / "stale"), "lead", "--smoke.steps", "1,2,3,4", "--smoke.path", "async"]
        )
        == 0
    )
    assert "(by step: {1: 3.0e-05, 2: 2.0e-04, 3: 1.0e-04, 4: 3.0e-01})" in capsys.readouterr().out


def test_laser_d_runs_on_its_recipes_monitor_set_and_is_refused_without_a_period_or_with_async(capsys):
    """The reference recipe gives Laser-D its monitor set (--eval.dataset, --eval.steps 20); without a period, or
    under the async trainer, whose evaluation the monitor seam cannot reach, it is refused before start."""
    argv = ["--recipe.method", "laser-d", "--run.dry_run_enable"]
    assert train.main(argv) == 0
    capsys.readouterr()
    assert train.main([*argv, "--eval.steps", "-1"]) == 2
    assert "--recipe.method laser-d needs --eval.steps > 0" in capsys.readouterr().err
    bare = ["--recipe.name", "none", "--actor.model_name_or_path", "m", "--data.prompt_dataset", "d.jsonl"]
    monitor = ["--eval.dataset", "m.jsonl", "--eval.steps", "20"]  # the recipe's layout sleeps vLLM: no async there
    assert train.main([*argv, *bare, *monitor, "--train.async_enable"]) == 2
    assert "--recipe.method laser-d does not run with --train.async_enable" in capsys.readouterr().err
    assert train.main([*argv, *bare]) == 2
    assert "--recipe.method laser-d needs a monitor set: give --eval.dataset" in capsys.readouterr().err
