"""Recipes (lead_recipes/recipes/recipe.py + launchers/recipes/*.yaml): every recipe renders and is accepted by the real
parsers (the installed OpenRLHF CLI's and our --recipe.* flags); broken recipes fail naming the key."""

from __future__ import annotations

import re
import textwrap

import pytest
import yaml

from lead_recipes.recipes import RecipeError
from lead_recipes.recipes.openrlhf_parser import openrlhf_parser
from lead_recipes.recipes.recipe import load_recipe, recipe_names, recipe_parser

NAMES = recipe_names()
PAPER_SETUPS = {
    "lead-1.5b",
    "lead-7b",
    "lead-1.5b-static",
    "lead-1.5b-agg-min",
    "lead-1.5b-agg-median",
    "lead-1.5b-agg-mean-all",
    "grpo-lead-7b",
    "grpo-lead-14b-sft",
    "grpo-lead-14b-stage1",
    "grpo-lead-14b-stage2a",
    "grpo-lead-14b-stage2b",
    "leash-1.5b",
    "leash-4b",
    "grpo-1.5b",
    "gdpo-1.5b",
    "shorter-better-1.5b",
    "arora-zanette-1.5b",
    "l1-exact-1.5b",
    "l1-max-1.5b",
    "kimi-1.5b",
    "thinkprune-1.5b",
}


def split_argv(argv):
    """(OpenRLHF flags, --recipe.* flags) of a rendered argv."""
    ours, theirs, i = [], [], 0
    while i < len(argv):
        j = i + 1
        while j < len(argv) and not argv[j].startswith("--"):
            j += 1
        (ours if argv[i].startswith("--recipe.") else theirs).extend(argv[i:j])
        i = j
    return theirs, ours


def write(tmp_path, text: str, name: str = "broken.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_every_paper_setup_has_a_recipe():
    assert PAPER_SETUPS <= set(NAMES), f"missing: {sorted(PAPER_SETUPS - set(NAMES))}"


@pytest.mark.parametrize("name", NAMES)
def test_recipe_argv_is_accepted_by_the_real_parsers_with_the_recipe_values(name):
    recipe = load_recipe(name)
    theirs, ours = split_argv(recipe.train_argv())
    parsed = vars(openrlhf_parser(recipe.entrypoint).parse_args(theirs))
    for key, value in recipe.openrlhf.items():
        got = parsed[key]
        assert (list(got) if isinstance(got, tuple) else got) == value, key
    if recipe.entrypoint == "train":
        flags = vars(recipe_parser().parse_args(ours))
        for key, value in recipe.recipe.items():
            assert flags[f"recipe.{key}"] == value, key
    else:
        assert ours == [] and recipe.command()[:3] == ["deepspeed", "--module", "openrlhf.cli.train_sft"]


@pytest.mark.parametrize("name", [n for n in NAMES if load_recipe(n).entrypoint == "train"])
def test_every_train_recipe_builds_its_method_through_contract_b(name):
    from lead_recipes import flags
    from lead_recipes.methods import build_method

    recipe = load_recipe(name)
    ns = flags.recipe_config(recipe_parser().parse_args(split_argv(recipe.train_argv())[1]))
    assert build_method(ns).name == recipe.recipe["method"]


def test_default_recipe_is_lead_on_math_level_3_to_5_with_r1_distill_1_5b_at_4k():
    r = load_recipe("lead-1.5b")
    assert r.recipe["method"] == "lead" and r.recipe["lead.aggregator"] == "mean_correct"
    assert r.openrlhf["actor.model_name_or_path"] == "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B"
    assert r.openrlhf["rollout.max_new_tokens"] == 4000 == r.recipe["lead.b_max"]
    assert (r.openrlhf["rollout.n_samples_per_prompt"], r.openrlhf["rollout.batch_size"]) == (8, 128)
    assert r.openrlhf["data.prompt_dataset"].endswith("math_l35_lead.jsonl")
    assert r.data["prepare"][:3] == ["build", "--data.preset", "math-l35"]


def test_grpo_lead_stage2_keeps_stage1_settings_for_2a_and_turns_length_off_repetition_on_for_2b():
    s1, s2a, s2b = (load_recipe(f"grpo-lead-14b-{n}") for n in ("stage1", "stage2a", "stage2b"))
    assert s1.recipe == s2a.recipe and s1.recipe["grpo_lead.alpha"] == 0.05
    assert not s2a.recipe.get("grpo_lead.repetition_penalty_enable")
    assert s2b.recipe["grpo_lead.alpha"] == 0.0 and s2b.recipe["grpo_lead.repetition_penalty_enable"] is True
    assert s2b.recipe["grpo_lead.repetition_reward"] == -1.5
    assert s2a.data["prepare"][0] == s2b.data["prepare"][0] == "curriculum"


def test_leash_targets_match_the_paper_setups():
    assert load_recipe("leash-1.5b").recipe["leash.target_length"] == 4096
    assert load_recipe("leash-4b").recipe["leash.target_length"] == 12288


def test_extends_keeps_the_base_and_changes_only_the_deltas(monkeypatch, tmp_path):
    monkeypatch.setenv("LEAD_RECIPES_RUN_DIR", str(tmp_path))  # else each recipe gets its own ./runs/<name>
    base, agg = load_recipe("lead-1.5b"), load_recipe("lead-1.5b-agg-min")
    assert agg.recipe == {**base.recipe, "lead.aggregator": "min_correct"}
    assert {k: v for k, v in agg.openrlhf.items() if k != "logger.wandb.run_name"} == {
        k: v for k, v in base.openrlhf.items() if k != "logger.wandb.run_name"
    }


def test_override_changes_the_rendered_flag():
    argv = load_recipe("lead-1.5b", ["recipe.lead.aggregator=median_correct", "actor.adam.lr=2e-6"]).train_argv()
    assert argv[argv.index("--recipe.lead.aggregator") + 1] == "median_correct"
    assert argv[argv.index("--actor.adam.lr") + 1] == "2e-06"


def test_to_dict_written_back_as_yaml_renders_the_same_command(tmp_path, monkeypatch):
    monkeypatch.setenv("LEAD_RECIPES_RUN_DIR", str(tmp_path))
    r = load_recipe("grpo-lead-14b-stage2b")
    d = r.to_dict()
    copy = {k: d[k] for k in ("description", "entrypoint", "data", "resources", "openrlhf", "recipe")}
    path = tmp_path / "copy.yaml"
    path.write_text(yaml.safe_dump(copy, sort_keys=False))
    assert load_recipe(str(path)).train_argv() == r.train_argv()


@pytest.mark.parametrize(
    "body, key",
    [
        ("openrlhf:\n  actor.adam.lrate: 1.0e-6\n", "actor.adam.lrate"),
        ("recipe:\n  lead.agregator: min_correct\n", "lead.agregator"),
        ("resources:\n  gpu_per_node: 4\n", "gpu_per_node"),
        ("hyperparams:\n  x: 1\n", "hyperparams"),
        ("data:\n  prepair: []\n", "prepair"),
    ],
)
def test_unknown_key_fails_naming_the_key_and_the_file(tmp_path, body, key):
    path = write(tmp_path, "extends: lead-1.5b\n" + body)
    with pytest.raises(RecipeError, match=rf"{path}.*'{key}'"):
        load_recipe(path)


@pytest.mark.parametrize(
    "override, key",
    [
        ("actor.adam.lr=fast", "actor.adam.lr"),
        ("algo.advantage.estimator=lead", "algo.advantage.estimator"),
        ("recipe.lead.aggregator=max_correct", "lead.aggregator"),
        ("recipe.lead.beta_ema=1.5", "beta_ema"),
        ("train.colocate_all=maybe", "train.colocate_all"),
        ("resources.nodes=two", "resources.nodes"),
        ("recipe.method=drpo", "method"),
    ],
)
def test_invalid_value_fails_naming_the_key(override, key):
    with pytest.raises(RecipeError, match=key.replace(".", r"\.")):
        load_recipe("lead-1.5b", [override])


@pytest.mark.parametrize(
    "overrides, key",
    [
        (["vllm.num_engines=2"], "vllm.num_engines"),  # 2 engines x TP1 != 4 actor GPUs
        (["vllm.tensor_parallel_size=2"], "vllm.num_engines"),  # 4 x 2 != 4
        (["resources.gpus_per_node=2"], "actor.num_gpus_per_node"),  # 4 actor GPUs on a 2-GPU node
        (["train.colocate_all=false", "resources.gpus_per_node=8"], "resources.gpus_per_node"),  # 4+4+4 > 8
        (["ref.num_gpus_per_node=2"], "ref.num_gpus_per_node"),  # colocated ref must match actor
        (
            ["actor.num_nodes=2", "ref.num_nodes=2", "vllm.num_engines=8", "resources.gpus_per_node=8"],
            "actor.num_nodes",
        ),
        (["train.dynamic_batch_enable=false", "train.batch_size=100"], "train.batch_size"),
        (
            ["train.colocate_all=false", "vllm.num_engines=1", "vllm.tensor_parallel_size=8", "resources.nodes=4"],
            "vllm.tensor_parallel_size",
        ),  # TP 8 on 4-GPU nodes
        (["train.batch_size=384"], "train.batch_size"),  # does not divide 128 x 8
        (["rollout.max_new_tokens=5024"], "rollout.max_new_tokens"),  # = data.max_len
        (["recipe.lead.b_max=8000"], "lead.b_max"),  # B_max above the rollout cap
        (["ckpt.disable_ds=true"], "ckpt.disable_ds"),  # resume needs DS checkpoints
    ],
)
def test_impossible_layout_fails_before_anything_starts_naming_the_key(overrides, key):
    with pytest.raises(RecipeError, match=rf"key '{re.escape(key)}'"):
        load_recipe("lead-1.5b", overrides)


@pytest.mark.parametrize("name", ["gdpo-1.5b", "grpo-1.5b", "composed-1.5b"])
def test_b_max_above_the_rollout_cap_is_refused_for_every_method_that_reads_it(name):
    # gdpo, grpo-scalarized and composed read --recipe.lead.* too (methods.sections_read), not only lead
    with pytest.raises(RecipeError, match=r"key 'lead\.b_max'"):
        load_recipe(name, ["recipe.lead.b_max=8000"])


def test_b_max_set_for_a_method_that_does_not_read_it_is_refused_as_unread_not_as_above_the_cap():
    with pytest.raises(RecipeError, match=r"does not read --recipe\.lead\.\*") as refused:
        load_recipe("leash-1.5b", ["recipe.lead.b_max=8000"])
    assert "cap" not in str(refused.value)


def test_a_consistent_multi_node_layout_is_accepted():
    r = load_recipe("lead-1.5b", ["actor.num_nodes=2", "ref.num_nodes=2", "vllm.num_engines=8", "resources.nodes=2"])
    assert r.actor_gpus() == 8


def test_placeholders_expand_from_the_environment_and_unknown_ones_are_named(tmp_path, monkeypatch):
    monkeypatch.setenv("LEAD_RECIPES_DATA", str(tmp_path / "d"))
    monkeypatch.setenv("LEAD_RECIPES_RUN_DIR", str(tmp_path / "r"))
    r = load_recipe("lead-1.5b")
    assert r.openrlhf["data.prompt_dataset"] == str(tmp_path / "d" / "math_l35_lead.jsonl")
    assert r.openrlhf["ckpt.path"] == str(tmp_path / "r" / "ckpt")
    assert r.openrlhf["reward.remote_url"].endswith("lead_recipes/reward/reward_func.py")
    path = write(tmp_path, "extends: lead-1.5b\nopenrlhf:\n  ckpt.path: ${scratch}/ckpt\n")
    with pytest.raises(RecipeError, match=r"ckpt\.path.*\$\{scratch\}"):
        load_recipe(path)


def test_unknown_recipe_name_lists_the_known_ones():
    with pytest.raises(RecipeError, match="lead-1.5b"):
        load_recipe("lead-3b")


def test_extends_cycle_is_an_error(tmp_path):
    write(tmp_path, "extends: " + str(tmp_path / "b.yaml") + "\n", "a.yaml")
    write(tmp_path, "extends: " + str(tmp_path / "a.yaml") + "\n", "b.yaml")
    with pytest.raises(RecipeError, match="cycle"):
        load_recipe(str(tmp_path / "a.yaml"))


@pytest.mark.parametrize("name", [n for n in NAMES if load_recipe(n).data.get("prepare")])
def test_recipe_data_prepare_is_a_valid_lead_recipes_data_command(name):
    from lead_recipes.data import build_parser

    recipe = load_recipe(name)
    args = build_parser().parse_args(recipe.data["prepare"])
    assert args.out == recipe.openrlhf["data.prompt_dataset" if recipe.entrypoint == "train" else "data.dataset"]


# ------------------------------------------------------------- a recipe carries only the sections its method reads
@pytest.mark.parametrize("name", [n for n in NAMES if load_recipe(n).entrypoint == "train"])
def test_a_recipe_renders_only_the_recipe_sections_its_method_reads(name):
    """thinkprune-1.5b-2k extends lead-1.5b yet renders no --recipe.lead.b_max 4000 beside its 2,000-token cap: a
    flag its method never reads, on the command line a reader takes for the run's settings."""
    from lead_recipes.methods.config import entry

    r = load_recipe(name)
    reads = entry(r.recipe.get("method", "lead")).sections
    assert {k.split(".")[0] for k in r.recipe if "." in k} <= set(reads), name
    assert all(f.split(".")[1] in reads for f in split_argv(r.train_argv())[1][::2] if f.count(".") == 2), name


def test_setting_a_section_the_method_does_not_read_is_refused_naming_the_key_and_the_method(tmp_path):
    with pytest.raises(RecipeError, match=r"--set recipe.lead.b_max=3000: key 'lead.b_max'.*thinkprune does not"):
        load_recipe("thinkprune-1.5b", ["recipe.lead.b_max=3000"])
    path = write(tmp_path, "extends: thinkprune-1.5b\nrecipe:\n  leash.lr: 0.1\n")
    with pytest.raises(RecipeError, match=rf"{re.escape(path)}: key 'leash.lr'.*thinkprune does not"):
        load_recipe(path)


def test_another_method_set_over_a_recipe_drops_the_sections_only_the_old_method_read():
    r = load_recipe("leash-1.5b", ["recipe.method=grpo"])
    assert r.recipe == {"method": "grpo"}
    assert load_recipe("lead-1.5b", ["recipe.method=gdpo"]).recipe["lead.b_max"] == 4000  # gdpo reads lead's
