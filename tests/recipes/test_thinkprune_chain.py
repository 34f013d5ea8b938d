"""ThinkPrune's 4000 -> 3000 -> 2000 schedule (arXiv 2504.01296; the authors' run scripts in
github.com/UCSB-NLP-Chang/ThinkPrune) as a `launch` chain: each round is a run of its own from the previous round's
final model (a fresh optimizer), with the tighter limit as the rollout cap, as the method's limit and in the system
prompt of its own prompt data."""

from __future__ import annotations

import shlex

import pytest

from lead_recipes.recipes import launch
from lead_recipes.recipes.recipe import load_recipe

ROUNDS = [("thinkprune-1.5b", 4000), ("thinkprune-1.5b-3k", 3000), ("thinkprune-1.5b-2k", 2000)]


@pytest.fixture(autouse=True)
def dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("LEAD_RECIPES_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("LEAD_RECIPES_RUNS", str(tmp_path / "runs"))
    monkeypatch.delenv("LEAD_RECIPES_RUN_DIR", raising=False)
    return tmp_path


def _flag(argv, name):
    return argv[argv.index(name) + 1]


@pytest.mark.parametrize("name, limit", ROUNDS)
def test_a_round_states_its_limit_in_the_cap_the_method_and_its_own_prompt_data(name, limit):
    r = load_recipe(name)
    prepare = [str(a) for a in r.data["prepare"]]
    assert r.openrlhf["rollout.max_new_tokens"] == limit == r.recipe["thinkprune.limit"]
    assert _flag(prepare, "--prompt.length_limit") == str(limit) and _flag(prepare, "--prompt.system") == "thinkprune"
    assert r.openrlhf["data.prompt_dataset"] == _flag(prepare, "--output")
    assert r.openrlhf["data.max_len"] - limit == 768  # the authors' prompt room


def test_each_round_starts_from_the_previous_rounds_final_model(dirs):
    for (before, _), (after, _) in zip(ROUNDS, ROUNDS[1:]):
        prev, nxt = load_recipe(before), load_recipe(after)
        assert nxt.after == before and prev.openrlhf["ckpt.output_dir"] == str(dirs / "runs" / before / "hf")
        assert nxt.openrlhf["actor.model_name_or_path"] == prev.openrlhf["ckpt.output_dir"]
        assert nxt.openrlhf["ckpt.path"] != prev.openrlhf["ckpt.path"]  # no optimizer state carries over


def test_launch_chain_dry_run_shows_the_three_rounds_in_order(dirs, capsys):
    assert launch.main(["thinkprune-1.5b-2k", "--launch.chain_enable", "--run.dry_run_enable"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "# chain: thinkprune-1.5b -> thinkprune-1.5b-3k -> thinkprune-1.5b-2k" in lines
    # each step header is followed by its command; a `# missing input` note may sit between them
    commands = [i for i, line in enumerate(lines) if line and not line.startswith("#")]
    steps = [
        (line.split()[3], shlex.split(lines[next(j for j in commands if j > i)]))
        for i, line in enumerate(lines)
        if line.startswith("# step")
    ]
    assert [kind for kind, _ in steps] == ["data", "train"] * 3  # no prompt data yet: each round builds its own
    data = [cmd for kind, cmd in steps if kind == "data"]
    train = [cmd for kind, cmd in steps if kind == "train"]
    assert [_flag(c, "--prompt.length_limit") for c in data] == ["4000", "3000", "2000"]
    assert [_flag(c, "--rollout.max_new_tokens") for c in train] == ["4000", "3000", "2000"]
    assert [_flag(c, "--recipe.thinkprune.limit") for c in train] == ["4000", "3000", "2000"]
    models = [_flag(c, "--actor.model_name_or_path") for c in train]
    assert models[1:] == [
        str(dirs / "runs" / "thinkprune-1.5b" / "hf"),
        str(dirs / "runs" / "thinkprune-1.5b-3k" / "hf"),
    ]
    assert [_flag(c, "--data.prompt_dataset") for c in train] == [_flag(c, "--output") for c in data]
