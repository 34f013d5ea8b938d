"""`lead-recipes replay`: JSONL in → per-step rewards/advantages/controller out (matching Method.step exactly), a PNG
and a table; --replay.from_rollouts grades the shared rollouts file with the real package grader; bad input is named."""

from __future__ import annotations

import json

import pytest
import torch

from lead_recipes.cli import main as cli_main
from lead_recipes.methods import build_method
from lead_recipes.methods.base import RolloutBatch
from lead_recipes.methods.config import RecipeConfig

STEPS = [
    {
        "step": 1,
        "groups": [
            {"correct": [True, False, True, False], "lengths": [1200, 3000, 1800, 4000]},
            {"correct": [False, False, False, False], "lengths": [500, 900, 2000, 4000]},
        ],
    },
    {
        "step": 2,
        "groups": [
            {"correct": [True, True, True, False], "lengths": [900, 1500, 1300, 2200]},
            {"correct": [True, False, False, False], "lengths": [2500, 600, 700, 800]},
        ],
    },
]


def write(tmp_path, steps):
    p = tmp_path / "in.jsonl"
    p.write_text("".join(json.dumps(s) + "\n" for s in steps))
    return p


@pytest.mark.parametrize("method,key", [("lead", "lambda_c"), ("leash", "lagrange_lambda")])
def test_replay_output_equals_stepping_the_method_directly(tmp_path, capsys, method, key):
    out = tmp_path / "out.jsonl"
    argv = [
        "replay",
        str(write(tmp_path, STEPS)),
        "--output",
        str(out),
        "--recipe.method",
        method,
        "--recipe.leash.target_length",
        "1000",
    ]
    assert cli_main(argv) == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    m = build_method(RecipeConfig.of({"method": method, "leash": {"target_length": 1000.0}}))
    for rec, line in zip(STEPS, lines):
        b = RolloutBatch(
            torch.tensor([g["correct"] for g in rec["groups"]]),
            torch.tensor([g["lengths"] for g in rec["groups"]], dtype=torch.float32),
            4000,
        )
        ref = m.step(b)
        assert line["step"] == rec["step"] and line["advantages"] == ref.advantages.tolist()
        assert line["rewards"] == ref.rewards.tolist() and line["controller"] == m.state_dict()
        assert key in line["controller"]
    assert (tmp_path / "out.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = capsys.readouterr().out
    assert "step" in table and key in table


L1_STEPS = [
    {
        **rec,
        "groups": [
            {**g, "n_gold": 1000 * (q + 1), "l1_mode": ("exact", "max")[q]} for q, g in enumerate(rec["groups"])
        ],
    }
    for rec in STEPS
]


@pytest.mark.parametrize("method", ["arora-zanette", "l1-exact", "l1-max", "kimi", "thinkprune"])
def test_replay_of_each_length_baseline_equals_stepping_the_method_directly(tmp_path, method):
    steps = L1_STEPS if method == "l1-max" else STEPS
    if method == "l1-exact":  # every prompt in exact mode: l1-exact refuses maximum prompts
        steps = [{**r, "groups": [{**g, "l1_mode": "exact"} for g in r["groups"]]} for r in L1_STEPS]
    out = tmp_path / "out.jsonl"
    argv = ["replay", str(write(tmp_path, steps)), "--output", str(out), "--recipe.method", method]
    assert cli_main([*argv, "--recipe.kimi.warmup_steps", "1"]) == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    m = build_method(RecipeConfig.of({"method": method, "kimi": {"warmup_steps": 1}}))
    for rec, line in zip(steps, lines):
        groups = rec["groups"]
        targets = {}
        if "n_gold" in groups[0]:
            targets = {
                "n_gold": torch.tensor([float(g["n_gold"]) for g in groups]),
                "l1_max": torch.tensor([g["l1_mode"] == "max" for g in groups]),
            }
        b = RolloutBatch(
            torch.tensor([g["correct"] for g in groups]),
            torch.tensor([g["lengths"] for g in groups], dtype=torch.float32),
            4000,
            **targets,
        )
        ref = m.step(b)
        assert line["advantages"] == ref.advantages.tolist() and line["rewards"] == ref.rewards.tolist()
        assert line["controller"] == (m.state_dict() or {})
    if method.startswith("l1"):
        assert lines[0]["stats"]["target_mean"] == 1500.0


DLER_STEP = {  # the 2026 baselines spec's G-D1 batch after the filter (tests/methods/test_methods_dler.py)
    "step": 1,
    "groups": [
        {"correct": [True, True, False, False], "lengths": [1200, 2500, 3100, 4000], "truncated": [0, 0, 0, 1]},
        {"correct": [True, False, False, False], "lengths": [4000, 900, 1500, 2000], "truncated": [1, 0, 0, 0]},
    ],
}


@pytest.mark.parametrize(
    "coef, rewards, advantages",
    [
        ("0", [[1, 1, 0, 0], [0, 0, 0, 0]], [[1.615068, 1.615068, -1.129118, -1.129118], [0.242975] * 4]),
        (
            "0.1",
            [[1, 1, 0, 0], [0.1, 0, 0, 0]],
            [[1.570448, 1.570448, -1.143558, -1.143558], [0.416996, 0.145595, 0.145595, 0.145595]],
        ),
    ],
)
def test_dler_replay_applies_openrlhfs_truncation_scale_and_gives_the_golden_batch(tmp_path, coef, rewards, advantages):
    steps = [
        {**DLER_STEP, "groups": [{**g, "truncated": [bool(t) for t in g["truncated"]]} for g in DLER_STEP["groups"]]}
    ]
    out = tmp_path / "out.jsonl"
    argv = ["replay", str(write(tmp_path, steps)), "--output", str(out), "--recipe.method", "dler"]
    assert cli_main([*argv, "--reward.stop_properly_penalty_coef", coef]) == 0
    line = json.loads(out.read_text())
    assert line["rewards"] == [pytest.approx(r, abs=1e-6) for r in rewards]
    assert line["advantages"] == [pytest.approx(a, abs=1e-5) for a in advantages]


def test_a_negative_stop_properly_coef_replaces_a_truncated_samples_reward_as_openrlhf_does(tmp_path):
    group = {
        "correct": [True, True, False, False],
        "lengths": [10, 40, 20, 40],
        "truncated": [False, True, False, True],
    }
    out = tmp_path / "out.jsonl"
    argv = ["replay", str(write(tmp_path, [{"step": 1, "groups": [group]}])), "--output", str(out)]
    assert cli_main([*argv, "--recipe.method", "grpo", "--reward.stop_properly_penalty_coef", "-0.5"]) == 0
    assert json.loads(out.read_text())["rewards"][0] == [1.0, -0.5, 0.0, -0.5]


def test_laser_replay_reads_the_format_flag_and_gives_the_golden_group(tmp_path):
    group = {  # the 2026 baselines spec's G-L1 (tests/methods/test_methods_laser.py)
        "correct": [True, True, True, False, False, False],
        "lengths": [1500, 4096, 4097, 900, 6000, 8192],
        "answer_boxed": [True, True, True, True, True, False],
    }
    out = tmp_path / "out.jsonl"
    argv = ["replay", str(write(tmp_path, [{"step": 1, "groups": [group]}])), "--output", str(out)]
    assert cli_main([*argv, "--recipe.method", "laser", "--rollout.max_new_tokens", "8192"]) == 0
    line = json.loads(out.read_text())
    assert line["rewards"][0] == pytest.approx([1.5, 1.5, 1.0, -0.5, -0.5, -1.0], abs=1e-6)
    want = [1.03661, 1.03661, 0.592348, -0.740435, -0.740435, -1.184697]
    assert line["advantages"][0] == pytest.approx(want, abs=1e-5)


R1_PROMPT = "<｜User｜>What is 1+2? Put your final answer within \\boxed{}.<｜Assistant｜><think>\n"


def _rollouts_row(tmp_path, responses, **row):
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps({"answer": "3", "samples": [{"response": t} for t in responses], **row}) + "\n")
    return src


def test_from_rollouts_reads_lasers_think_opener_from_the_templated_prompt(tmp_path):
    # R1's template ends the prompt with <think>: the response alone has no opener, so scoring it alone gives s = −1
    src = _rollouts_row(
        tmp_path, ["1+2=3</think>\n\\boxed{3}", "1+2=4</think>\n\\boxed{4}", "1+2"], templated_prompt=R1_PROMPT
    )
    built, out = tmp_path / "in.jsonl", tmp_path / "o.jsonl"
    argv = ["replay", "--replay.from_rollouts", str(src), "--replay.write_input", str(built), "--output", str(out)]
    assert cli_main([*argv, "--recipe.method", "laser", "--no-replay.progress_enable"]) == 0
    assert json.loads(built.read_text())["groups"][0]["answer_boxed"] == [True, True, False]
    assert json.loads(out.read_text())["rewards"][0] == [1.5, -0.5, -1.0]


def test_from_rollouts_sees_a_box_the_templated_prompt_holds_as_grpo_leads_code_does(tmp_path):
    # GRPO-LEAD's code tests prompt + response for a \boxed before </think>: the prompt's instruction has one
    src = _rollouts_row(tmp_path, ["1+2=3</think> so 3", "1+2=3 so 3"], templated_prompt=R1_PROMPT)
    built = tmp_path / "in.jsonl"
    argv = ["replay", "--replay.from_rollouts", str(src), "--replay.write_input", str(built)]
    assert cli_main([*argv, "--output", str(tmp_path / "o.jsonl"), "--no-replay.progress_enable"]) == 0
    assert json.loads(built.read_text())["groups"][0]["think_boxed"] == [True, False]


@pytest.mark.parametrize("method,flag", [("laser", "answer_boxed"), ("grpo-lead", "think_boxed")])
def test_from_rollouts_without_the_templated_prompt_leaves_the_format_flags_unset(tmp_path, capsys, method, flag):
    src = _rollouts_row(tmp_path, ["<think>1+2=3</think>\n\\boxed{3}"] * 2)
    built, out = tmp_path / "in.jsonl", tmp_path / "o.jsonl"
    argv = ["replay", "--replay.from_rollouts", str(src), "--replay.write_input", str(built), "--output", str(out)]
    extra = ["--recipe.grpo_lead.ref_code_format_failure_enable"] if method == "grpo-lead" else []
    assert cli_main([*argv, "--recipe.method", method, *extra, "--no-replay.progress_enable"]) == 2
    assert f'"{flag}" in each replayed group' in capsys.readouterr().err
    assert not out.exists()


def test_from_rollouts_names_a_row_whose_templated_prompt_is_not_a_string(tmp_path, capsys):
    src = _rollouts_row(tmp_path, ["x"], templated_prompt=["<think>"])
    assert cli_main(["replay", "--replay.from_rollouts", str(src), "--output", str(tmp_path / "o.jsonl")]) == 2
    assert "row 0: 'templated_prompt' must be the templated prompt string" in capsys.readouterr().err


def test_replay_refuses_the_truncation_scale_for_a_method_with_its_own_reward(tmp_path, capsys):
    argv = ["replay", str(write(tmp_path, STEPS)), "--output", str(tmp_path / "o.jsonl"), "--recipe.method", "lead"]
    assert cli_main([*argv, "--reward.stop_properly_penalty_coef", "0"]) == 2
    assert "--reward.stop_properly_penalty_coef with --recipe.method lead" in capsys.readouterr().err


def test_l1_replay_without_targets_says_the_input_needs_n_gold(tmp_path, capsys):
    argv = ["replay", str(write(tmp_path, STEPS)), "--output", str(tmp_path / "o.jsonl"), "--recipe.method", "l1-max"]
    assert cli_main(argv) == 2
    assert "step 1: --recipe.method l1-max needs a target length per prompt (n_gold" in capsys.readouterr().err


@pytest.mark.parametrize(
    "mutate,match",
    [
        (lambda g: g[1].pop("n_gold"), "step 1, prompt 1: 'n_gold' must be a number (other groups have one), got None"),
        (lambda g: g[0].update(n_gold="2000"), "step 1, prompt 0: 'n_gold' must be a number"),
        (lambda g: g[0].update(l1_mode="min"), "step 1, prompt 0: 'l1_mode' must be one of exact, max, got 'min'"),
        (lambda g: g[1].update(n_gold=-3), "step 1: prompt 1: n_gold must be a finite positive token count"),
    ],
)
def test_bad_l1_targets_name_step_and_prompt(tmp_path, capsys, mutate, match):
    steps = json.loads(json.dumps(L1_STEPS))
    mutate(steps[0]["groups"])
    argv = ["replay", str(write(tmp_path, steps)), "--output", str(tmp_path / "o.jsonl"), "--recipe.method", "l1-max"]
    assert cli_main(argv) == 2
    assert match in capsys.readouterr().err


def test_from_rollouts_carries_each_rows_l1_target_into_its_group(tmp_path):
    rows = [
        {"id": "a", "answer": "3", "n_gold": 4, "l1_mode": "max", "samples": [{"response": "\\boxed{3}"}] * 2},
        {"id": "b", "answer": "5", "n_gold": 40, "samples": [{"response": "\\boxed{5}"}, {"response": "no"}]},
    ]
    src, built, out = tmp_path / "r.jsonl", tmp_path / "in.jsonl", tmp_path / "o.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = ["replay", "--replay.from_rollouts", str(src), "--replay.write_input", str(built), "--output", str(out)]
    assert cli_main([*argv, "--recipe.method", "l1-max"]) == 0
    groups = json.loads(built.read_text())["groups"]
    assert [(g.get("n_gold"), g.get("l1_mode")) for g in groups] == [(4, "max"), (40, None)]
    # "\boxed{3}" is 9 chars: ceil(9/4) + 1 = 4 approx. tokens = n_gold, so Eq. 2 gives 0.5; row b is exact (Eq. 1)
    rewards = json.loads(out.read_text())["rewards"]
    assert rewards[0] == [0.5, 0.5]
    assert rewards[1] == pytest.approx([1 - 0.0003 * 36, -0.0003 * 38])


def test_replay_stateless_method_has_empty_controller(tmp_path):
    out = tmp_path / "o.jsonl"
    assert cli_main(["replay", str(write(tmp_path, STEPS)), "--output", str(out), "--recipe.method", "grpo"]) == 0
    assert all(json.loads(x)["controller"] == {} for x in out.read_text().splitlines())


@pytest.mark.parametrize(
    "mutate,match",
    [
        (lambda s: s[1]["groups"][1].update(lengths=[1, 2, 3]), "step 2, prompt 1: 'lengths' has 3 entries"),
        (lambda s: s[1]["groups"][1].update(correct=[True, False]), "step 2, prompt 1: G = 2"),
        (lambda s: s[0]["groups"][0].update(lengths=[1200, 0, 10, 10]), "step 1: prompt 0: lengths must be > 0"),
        (
            lambda s: s[0]["groups"][1].update(correct=[1, 0, 0, 0]),
            "step 1, prompt 1: 'correct' must be a list of bool",
        ),
        (lambda s: s[0].update(groups=[]), "step 1: 'groups' must be a non-empty list"),
        (lambda s: s[0]["groups"][0].update(lengths=[1, 2, 3, 5000]), "exceed max_new_tokens"),
    ],
)
def test_bad_input_names_step_and_prompt_and_writes_nothing(tmp_path, capsys, mutate, match):
    steps = json.loads(json.dumps(STEPS))
    mutate(steps)
    out = tmp_path / "o.jsonl"
    assert cli_main(["replay", str(write(tmp_path, steps)), "--output", str(out)]) == 2
    assert match in capsys.readouterr().err and not out.exists()


def test_replay_from_rollouts_grades_and_chunks_the_shared_file(tmp_path, capsys, shared_data):
    src = shared_data / "rollouts" / "qwen25math_cot_math100x8.jsonl"
    out, built = tmp_path / "o.jsonl", tmp_path / "in.jsonl"
    assert (
        cli_main(
            [
                "replay",
                "--replay.from_rollouts",
                str(src),
                "--replay.prompts_per_step",
                "25",
                "--output",
                str(out),
                "--replay.write_input",
                str(built),
                "--recipe.method",
                "lead",
            ]
        )
        == 0
    )
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [ln["step"] for ln in lines] == [1, 2, 3, 4]
    assert all(len(ln["advantages"]) == 25 and len(ln["advantages"][0]) == 8 for ln in lines)
    groups = [g for rec in map(json.loads, built.read_text().splitlines()) for g in rec["groups"]]
    acc = sum(sum(g["correct"]) for g in groups) / 800
    assert 0.85 <= acc <= 0.97  # PROVENANCE: mean accuracy 0.91 by the source's own grader
    assert "APPROXIMATION" in capsys.readouterr().out


def test_replay_needs_exactly_one_input(tmp_path):
    with pytest.raises(SystemExit):
        cli_main(["replay", "--output", str(tmp_path / "o.jsonl")])


def test_from_rollouts_counts_lengths_with_a_real_tokenizer(tmp_path, tiny_qwen2):
    from transformers import AutoTokenizer

    texts = [
        "The sum is \\boxed{3}.",
        "I think it is \\boxed{4} after a long detour of thought.",
        "Let x = 1. Then x + 2 = 3, so \\boxed{3}.",
        "no idea",
    ]
    src = tmp_path / "rollouts.jsonl"
    src.write_text(
        json.dumps({"id": "a", "problem": "1+2?", "answer": "3", "samples": [{"response": t} for t in texts]}) + "\n"
    )
    built, out = tmp_path / "in.jsonl", tmp_path / "o.jsonl"
    assert (
        cli_main(
            [
                "replay",
                "--replay.from_rollouts",
                str(src),
                "--replay.tokenizer",
                str(tiny_qwen2),
                "--output",
                str(out),
                "--replay.write_input",
                str(built),
                "--recipe.method",
                "grpo-lead",
            ]
        )
        == 0
    )
    group = json.loads(built.read_text())["groups"][0]
    tok = AutoTokenizer.from_pretrained(str(tiny_qwen2))
    assert group["lengths"] == [len(tok.encode(t, add_special_tokens=False)) + 1 for t in texts]
    assert group["correct"] == [True, False, True, False]


def test_empty_input_is_an_error(tmp_path, capsys):
    src = tmp_path / "empty.jsonl"
    src.write_text("\n")
    assert cli_main(["replay", str(src), "--output", str(tmp_path / "o.jsonl")]) == 2
    assert "no steps to replay" in capsys.readouterr().err


def test_non_json_line_names_the_line(tmp_path, capsys):
    src = tmp_path / "bad.jsonl"
    src.write_text(json.dumps(STEPS[0]) + "\n{not json\n")
    assert cli_main(["replay", str(src), "--output", str(tmp_path / "o.jsonl")]) == 2
    assert "bad.jsonl:2: invalid JSON" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ the plot
def _replayed(method: str, steps=STEPS, **sections):
    from lead_recipes.replay import replay

    config = RecipeConfig.of({"method": method, **sections})
    return replay(steps, build_method(config), 4000), config


def _lines_by_label(ax) -> dict:
    return {ln.get_label(): list(ln.get_ydata()) for ln in ax.get_lines()}


def _figure(lines, config):
    import matplotlib.pyplot as plt

    from lead_recipes.replay import replay_figure

    fig = replay_figure(lines, config, "t", "tokens")
    plt.close(fig)
    return fig


def test_length_panel_shows_mean_length_and_leash_target(tmp_path):
    lines, config = _replayed("leash", leash={"target_length": 1000.0})
    got = _lines_by_label(_figure(lines, config).axes[2])
    assert got["mean length"] == [ln["stats"]["mean_length"] for ln in lines]
    assert got["Leash L_t"] == [1000.0, 1000.0]


def test_length_panel_shows_leads_logged_mean_target_length():
    lines, config = _replayed("lead")
    got = _lines_by_label(_figure(lines, config).axes[2])
    assert got["LEAD mean L*"] == [ln["stats"]["target_length_mean"] for ln in lines]
    assert all(v > 0 for v in got["LEAD mean L*"]) and "Leash L_t" not in got


def test_length_panel_shows_the_composed_budget_only_when_the_budget_is_on():
    on = _lines_by_label(_figure(*_replayed("composed", composed={"budget_tokens": 1500.0})).axes[2])
    off = _lines_by_label(_figure(*_replayed("composed", composed={"budget": "none"})).axes[2])
    assert on["budget L_t"] == [1500.0, 1500.0] and "budget L_t" not in off


@pytest.mark.parametrize(
    "method,sections,floors",
    [
        ("lead", {}, {"lambda_c floor 0.3": 0.3}),
        ("leash", {"leash": {"lambda_min": 0.05, "lambda_init": 0.05}}, {"lagrange_lambda floor 0.05": 0.05}),
        ("lead", {"lead": {"static_lambda_c": 0.5}}, {}),
        ("composed", {"composed": {"length_reward": "none", "budget": "none"}}, {}),
    ],
)
def test_controller_panel_draws_the_lambda_floor_where_one_applies(method, sections, floors):
    got = _lines_by_label(_figure(*_replayed(method, **sections)).axes[0])
    assert {k: v[0] for k, v in got.items() if "floor" in k} == floors


def _vertical_xs(ax) -> list[float]:
    return sorted(
        {
            float(ln.get_xdata()[0])
            for ln in ax.get_lines()
            if len(set(ln.get_xdata())) == 1 and len(ln.get_xdata()) == 2
        }
    )


def test_epoch_boundaries_are_vertical_lines_on_every_panel():
    steps = [{**STEPS[i % 2], "step": i + 1, "epoch": e} for i, e in enumerate([1, 1, 2, 2, 3])]
    fig = _figure(*_replayed("lead", steps))
    assert [_vertical_xs(ax) for ax in fig.axes] == [[2.5, 4.5]] * 3


def test_no_epochs_no_vertical_lines():
    assert all(_vertical_xs(ax) == [] for ax in _figure(*_replayed("lead")).axes)


def test_a_non_integer_epoch_is_named(tmp_path, capsys):
    steps = [{**STEPS[0], "epoch": "one"}]
    assert cli_main(["replay", str(write(tmp_path, steps)), "--output", str(tmp_path / "o.jsonl")]) == 2
    assert "step 1: 'epoch' must be an integer" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ built inputs
def _tiny_rollouts(tmp_path):
    src = tmp_path / "rollouts.jsonl"
    rows = [
        {"answer": str(i), "samples": [{"response": f"so \\boxed{{{i}}}"}, {"response": "x" * (40 * i + 8)}]}
        for i in range(3)
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return src


def test_built_input_numbers_each_steps_epoch(tmp_path):
    built = tmp_path / "in.jsonl"
    assert (
        cli_main(
            [
                "replay",
                "--replay.from_rollouts",
                str(_tiny_rollouts(tmp_path)),
                "--replay.prompts_per_step",
                "1",
                "--replay.epochs",
                "2",
                "--output",
                str(tmp_path / "o.jsonl"),
                "--replay.write_input",
                str(built),
            ]
        )
        == 0
    )
    assert [json.loads(x)["epoch"] for x in built.read_text().splitlines()] == [1, 1, 1, 2, 2, 2]


def test_a_replayed_built_input_labels_its_lengths_as_the_first_replay_did(tmp_path, monkeypatch, capsys):
    from lead_recipes import replay as replay_mod

    titles = []
    monkeypatch.setattr(replay_mod, "write_plot", lambda lines, path, title, *_: titles.append(title))
    built = tmp_path / "in.jsonl"
    assert (
        cli_main(
            [
                "replay",
                "--replay.from_rollouts",
                str(_tiny_rollouts(tmp_path)),
                "--output",
                str(tmp_path / "a.jsonl"),
                "--replay.write_input",
                str(built),
            ]
        )
        == 0
    )
    assert cli_main(["replay", str(built), "--output", str(tmp_path / "b.jsonl")]) == 0
    assert len(titles) == 2 and all(t.endswith(f"lengths: {replay_mod.APPROX_LABEL})") for t in titles)
    assert capsys.readouterr().out.count("APPROXIMATION") == 2


def test_steps_that_disagree_on_the_length_unit_are_refused(tmp_path, capsys):
    steps = [{**STEPS[0], "length_unit": "tokens(a)+EOS"}, {**STEPS[1], "length_unit": "tokens(b)+EOS"}]
    assert cli_main(["replay", str(write(tmp_path, steps)), "--output", str(tmp_path / "o.jsonl")]) == 2
    assert "disagree on 'length_unit'" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ the docs' example
def test_the_documented_leash_example_moves_lambda(tmp_path, shared_data, capsys):
    """The `--replay.from_rollouts` example of docs/methods.md, run on the shared rollouts: λ must leave its floor."""
    import re
    import shlex
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "docs" / "methods.md").read_text()
    block = doc[doc.index("## Replay: `lead-recipes replay`") :].split("```")[1]
    cmd = re.search(r"^lead-recipes replay --replay.from_rollouts .*?(?<!\\)$", block, re.S | re.M).group(0)
    argv = shlex.split(re.sub(r"\[[^\]]*\]", "", cmd.replace("\\\n", " ")))[1:]
    argv = [
        str(shared_data / "rollouts" / "qwen25math_cot_math100x8.jsonl")
        if a == "rollouts.jsonl"
        else str(tmp_path / a)
        if a.endswith(".jsonl")
        else a
        for a in argv
    ]
    assert cli_main(argv) == 0 and "leash" in argv
    out = next(tmp_path.glob("*.jsonl"))
    lams = [json.loads(x)["controller"]["lagrange_lambda"] for x in out.read_text().splitlines()]
    assert lams[-1] >= 0.1 and all(b > a for a, b in zip(lams, lams[1:]))


def test_controller_panel_keeps_each_ema_weight_visible_beside_its_lambda_and_steps_are_whole():
    """LEAD's λ_c equals the EMA weight w_c until the floor, so the two lines coincide: w is drawn dashed, in its λ's
    colour, on top. The step axis of a short replay has whole steps only."""
    fig = _figure(*_replayed("lead"))
    lines = {ln.get_label(): ln for ln in fig.axes[0].get_lines()}
    for part in ("c", "l"):
        w = next(ln for label, ln in lines.items() if label.split()[0] == f"w_{part}")
        lam = lines[f"lambda_{part}"]
        assert w.get_color() == lam.get_color() and w.get_linestyle() != lam.get_linestyle()
        assert w.get_zorder() > lam.get_zorder() and w.get_linewidth() < lam.get_linewidth()
    low, high = fig.axes[2].get_xlim()
    shown = [t for t in fig.axes[2].get_xticks() if low <= t <= high]
    assert shown and all(float(t).is_integer() for t in shown), shown


@pytest.mark.parametrize(
    "flags, bars", [([], True), (["--replay.progress_enable"], True), (["--no-replay.progress_enable"], False)]
)
def test_replay_shows_grading_and_step_progress_on_stderr_unless_turned_off(tmp_path, capsys, flags, bars):
    """A long replay shows its progress as it goes, as grade and eval do, not nothing until the end."""
    argv = ["replay", "--replay.from_rollouts", str(_tiny_rollouts(tmp_path)), "--replay.prompts_per_step", "1"]
    assert cli_main([*argv, "--replay.epochs", "2", "--output", str(tmp_path / "o.jsonl"), *flags]) == 0
    err = capsys.readouterr().err.replace("\r", "\n")
    if not bars:
        assert err == ""
        return
    shown = [line for line in err.splitlines() if line.strip()]
    grading = [line for line in shown if line.startswith("grading:")]
    steps = [line for line in shown if line.startswith("replay:")]
    assert grading and "6/6" in grading[-1] and sum("6/6" in line for line in grading) == 1
    assert steps and "6/6" in steps[-1] and sum("6/6" in line for line in steps) == 1


def test_a_step_progress_line_gives_steps_prompts_time_per_step_and_eta():
    from lead_recipes.progress import StepProgress

    fresh = StepProgress(total_prompts=1000, start_step=0, start_prompts=0, started=0.0)
    assert fresh.line(1, 128, now=100.0) == (
        "lead-recipes: step 1/~8, 128/1000 prompts (12.8%), 1m 40s/step, ETA 11m 21s"
    )  # 872 prompts left at 1.28/s; 7 more steps of 128
    resumed = StepProgress(total_prompts=1000, start_step=5, start_prompts=640, started=10.0)
    assert resumed.line(6, 768, now=60.0) == (
        "lead-recipes: step 6/~8, 768/1000 prompts (76.8%), 50s/step, ETA 1m 31s"
    )  # measured from the resume, not from step 0
    assert StepProgress(None, 0, 0, started=0.0).line(3, 384, now=99.0) == (
        "lead-recipes: step 3, 384 prompts, 33s/step"
    )
    assert (
        StepProgress(1000, 0, 0, started=0.0)
        .line(2, 1000, now=7200.0)
        .endswith("1000/1000 prompts (100.0%), 1h 00m/step, ETA 0s")
    )


def _laser_step(step, groups, **extra):
    return {
        "step": step,
        "groups": [
            {"correct": [x == 1 for x in s], "lengths": lengths, "answer_boxed": [x > -1 for x in s]}
            for s, lengths in groups
        ],
        **extra,
    }


def test_laser_de_replay_takes_a_steps_monitor_pass_and_gives_the_golden_group(tmp_path):
    from test_methods_laser import MONITORS

    passes = {"correct": MONITORS[2][0][0].tolist(), "lengths": MONITORS[2][0][1].tolist()}
    g1 = ([1, 1, 1] + [-0.5] * 4 + [-1], [2000, 3072, 4000, 1000, 2500, 3500, 5000, 6000])  # G-L2 step 41, g1
    out = tmp_path / "out.jsonl"
    argv = ["replay", str(write(tmp_path, [_laser_step(41, [g1], monitor=passes)])), "--output", str(out)]
    assert (
        cli_main(
            [
                *argv,
                "--recipe.method",
                "laser-de",
                "--recipe.laser_de.grid_lower",
                "1024",
                "--rollout.max_new_tokens",
                "16384",
            ]
        )
        == 0
    )
    line = json.loads(out.read_text())
    assert line["rewards"][0] == pytest.approx([1.5, 1.5, 1, -0.5, -0.5, 0, 0, -1], abs=1e-6)
    assert line["controller"] == {
        "targets": {"low": 9216, "medium": 3072, "high": 1024},
        "last_monitor_step": 40,
        "step": 1,
    }


def test_laser_d_replay_continues_from_a_given_controller_state(tmp_path):
    state = {"targets": {"low": 9216, "medium": 3072, "high": 1024}, "last_monitor_step": 40, "step": 40}
    g1 = ([1, 1, 1] + [-0.5] * 4 + [-1], [2000, 3072, 4000, 1000, 2500, 3500, 5000, 6000])
    out = tmp_path / "out.jsonl"
    argv = ["replay", str(write(tmp_path, [_laser_step(41, [g1], controller=state)])), "--output", str(out)]
    assert cli_main([*argv, "--recipe.method", "laser-d", "--rollout.max_new_tokens", "8192"]) == 0
    assert json.loads(out.read_text())["rewards"][0] == pytest.approx([1.5, 1.5, 1] + [-0.5] * 4 + [-1], abs=1e-6)


def test_laser_d_replay_without_a_monitor_or_state_names_both_and_refuses_8192(tmp_path, capsys):
    g = ([1, -0.5], [100, 200])
    argv = ["replay", str(write(tmp_path, [_laser_step(1, [g])])), "--output", str(tmp_path / "o.jsonl")]
    assert cli_main([*argv, "--recipe.method", "laser-de"]) == 2
    err = capsys.readouterr().err
    assert "step 1: laser-de has no bucket targets" in err and "'monitor' or 'controller'" in err and "8192" in err


def test_a_monitor_pass_for_a_method_without_a_monitor_is_refused(tmp_path, capsys):
    rec = _laser_step(1, [([1, -0.5], [100, 200])], monitor={"correct": [[True]], "lengths": [[5]]})
    argv = ["replay", str(write(tmp_path, [rec])), "--output", str(tmp_path / "o.jsonl"), "--recipe.method", "laser"]
    assert cli_main(argv) == 2
    assert "step 1: 'monitor' is a Laser-D/-DE input; laser takes none" in capsys.readouterr().err
