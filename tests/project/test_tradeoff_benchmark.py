"""The trade-off benchmark's own logic (benchmarks/tradeoff.py; docs/benchmarks.md#design): its
task is graded as built, its tagger reads behaviour and waste from the text, the training-side breakdown measures
what an advantage pays for, its length knobs come from the reference recipes (issue 33's rows included), a start
is the same model however it is built and the report refuses to mix builds. The sweep itself is a benchmark, not a
test."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import tradeoff
import tradeoff_configs as tc
from tradeoff_report import advantage_breakdown


class Words:
    """A whitespace tokenizer: one token per word, enough to count the words the tagger calls waste."""

    def __call__(self, text, add_special_tokens=False):
        return type("Enc", (), {"input_ids": text.split()})()


def test_every_built_response_is_graded_as_its_sum_says_and_a_wrong_sum_stays_wrong():
    from lead_recipes.reward.reward_func import grade_samples

    rng = random.Random(0)
    texts, labels, expected = [], [], []
    for _ in range(40):
        d = tradeoff.draw(rng)
        for behaviour in ("steps", "direct"):
            texts.append(tradeoff.response(rng, d, behaviour, rng.randint(0, tradeoff.FILLER_MAX)))
            labels.append(str(sum(d)))
            expected.append(1.0)
            texts.append(tradeoff.response(rng, d, behaviour, 3))
            labels.append(str(sum(d) + 1))
            expected.append(0.0)
    rewards, _ = grade_samples(texts, [""] * len(texts), labels)
    assert list(rewards) == expected


@pytest.mark.parametrize(
    "text,behaviour,waste",
    [
        ("3+4=7 7+5=12 12+6=18 \\boxed{18}", "steps", 0),
        ("3+4=7 7+5=12 12+6=18 \\boxed{18} hmm so well", "steps", 3),
        ("\\boxed{18} okay wait", "direct", 2),
        ("\\boxed{18}", "direct", 0),
        ("hmm \\boxed{18} so", "other", 1),
        ("hmm so well", "other", 3),  # no box: everything is waste
        ("\\boxed{17} 3+4=7 \\boxed{18} now", "direct", 1),  # waste counts after the last box
    ],
)
def test_tag_reads_the_behaviour_from_the_opening_and_the_waste_after_the_last_box(text, behaviour, waste):
    assert tradeoff.tag(text, Words()) == (behaviour, waste)


def sample(group, behaviour, waste, adv, correct=True):
    core = 27 if behaviour == "steps" else 7
    return {
        "group": group,
        "behaviour": behaviour,
        "waste": waste,
        "length": core + waste,
        "adv": adv,
        "correct": correct,
    }


def test_breakdown_sees_a_method_that_pays_steps_and_punishes_waste():
    batch = [sample("q", "steps", w, 1.0 - 0.05 * w) for w in (0, 5, 10, 20)]
    batch += [sample("q", "direct", w, -1.0 - 0.05 * w, correct=False) for w in (0, 10)]
    got = advantage_breakdown([batch])
    assert got["adv_steps_minus_direct"] > 1.5
    assert got["corr_waste"] == pytest.approx(-1.0)
    assert got["unsolved_groups"] == 0 and got["corr_len_unsolved"] is None


def test_breakdown_reports_no_waste_signal_for_a_correctness_only_advantage():
    batch = [sample("q", "steps", w, 0.5) for w in (0, 5, 10, 20)]
    batch += [sample("q", "direct", w, -0.5, correct=False) for w in (3, 9)]
    got = advantage_breakdown([batch])
    assert got["corr_waste"] is None  # equal advantages within each behaviour: no correlation to report


def test_breakdown_measures_the_length_signal_inside_all_wrong_groups():
    batch = [sample("u", "direct", w, 0.01 * (7 + w), correct=False) for w in (0, 4, 8, 30)]
    got = advantage_breakdown([batch])
    assert got["unsolved_groups"] == 1 and got["corr_len_unsolved"] == pytest.approx(1.0)


def test_length_knobs_keep_each_reference_recipes_fraction_of_the_cap():
    flags = {name: dict(zip(f[::2], f[1::2])) for name, (_, f) in tc.configs(30).items()}
    cap = tc.CAP
    assert flags["lead"]["--recipe.lead.l_min"] == str(round(1000 / 4000 * cap))  # lead-1.5b
    assert flags["lead"]["--recipe.lead.b_max"] == str(cap)
    assert flags["leash"]["--recipe.leash.target_length"] == str(round(4096 / 16384 * cap))  # leash-1.5b
    assert flags["gdpo"]["--recipe.gdpo.length_threshold"] == str(round(2000 / 4000 * cap))  # gdpo-1.5b
    assert float(flags["shorter-better"]["--recipe.shorter_better.beta"]) == pytest.approx(0.001 * 6000 / cap)
    assert int(flags["leash-low"]["--recipe.leash.target_length"]) < 27  # below the steps behaviour's length
    assert flags["thinkprune"]["--recipe.thinkprune.limit"] == str(round(2000 / 4000 * cap))  # its last round


def flag_values(flags: list[str]) -> dict[str, list[str]]:
    """{--flag: its arguments}: a flag with two values (--actor.eps_clip_low_high 0.2 0.28) keeps both."""
    out, key = {}, None
    for a in flags:
        if a.startswith("--"):
            key = a
            out[key] = []
        else:
            out[key].append(a)
    return out


def test_lead_max_asym_keeps_the_codes_floor_as_a_fraction_of_the_cap_beside_the_papers_form():
    lead = flag_values(tc.configs(30)["lead"][1])
    asym = flag_values(tc.configs(30)["lead-max-asym"][1])
    assert asym["--recipe.lead.length_mode"] == ["ref_code_max_asym"]
    # the code's 500-token floor at lead-1.5b's 4,000-token cap, the cap that L_min 1000 is scaled from
    assert asym["--recipe.lead.ref_code_asym_floor_tokens"] == [str(round(500 / 4000 * tc.CAP))]
    assert {k: v for k, v in asym.items() if k in lead} == lead  # otherwise the paper's `lead` row


@pytest.fixture(scope="module")
def task_tokenizer(tmp_path_factory):
    """The BPE a start trains, on the same corpus recipe (fast: tokenizer only, no model)."""
    from toy_run import train_tokenizer
    from transformers import AutoTokenizer

    rng, corpus = random.Random(0), []
    for _ in range(3000):
        d = tradeoff.draw(rng)
        b = "steps" if rng.random() < tradeoff.STEPS_SHARE else "direct"
        corpus.append(f"user\n{tradeoff.question(d)}\nassistant\n{tradeoff.response(rng, d, b, rng.randint(0, 40))}")
    out = tmp_path_factory.mktemp("tok")
    train_tokenizer(out, corpus)
    return AutoTokenizer.from_pretrained(out)


def test_dler_caps_sit_where_the_papers_cap_sits_and_dler_short_below_the_accurate_answer(task_tokenizer):
    rng = random.Random(1)

    def tokens(text):  # response tokens as the trainer counts them: the text and EOS
        return len(task_tokenizer(text, add_special_tokens=False).input_ids) + 1

    qs = [tradeoff.draw(rng) for _ in range(200)]
    steps = [tokens(tradeoff.answer_text(d, "steps")) for d in qs]
    direct = [tokens(tradeoff.answer_text(d, "direct")) for d in qs]
    with_filler = [tokens(tradeoff.response(rng, d, "steps", rng.randint(0, tradeoff.FILLER_MAX))) for d in qs]
    assert max(direct) < tc.DLER_SHORT_CAP < min(steps)  # truncates every accurate answer, no direct one
    assert max(steps) <= tc.DLER_CAP < sum(with_filler) / len(with_filler)  # fits the answer, not the filler
    c = tc.configs(30)
    assert flag_values(c["dler"][1])["--rollout.max_new_tokens"] == [str(tc.DLER_CAP)]
    assert flag_values(c["dler-short"][1])["--rollout.max_new_tokens"] == [str(tc.DLER_SHORT_CAP)]


def test_dler_rows_score_a_truncated_rollout_zero_with_the_recipes_clipping_and_no_filter():
    flags = flag_values(tc.configs(30)["dler"][1])
    assert float(flags["--reward.stop_properly_penalty_coef"][0]) == 0.0  # the project page's rule
    assert [float(x) for x in flags["--actor.eps_clip_low_high"]] == [0.2, 0.28]
    assert float(flags["--actor.dual_clip"][0]) == 10.0
    # the shared settings stay: the prompts per step (no dynamic filtering) and KL off
    assert not any("dynamic_filtering" in f or ".kl." in f for f in flags)


def test_nothink_prompt_makes_a_boxed_answer_well_formed_for_laser_and_plain_stays_as_it_was():
    import jinja2
    from toy_run import CHAT_TEMPLATE
    from tradeoff_start import TEMPLATES

    from lead_recipes.reward.logs import answer_boxed

    def prompt(template):
        msgs = [{"role": "user", "content": "What is 3 + 4 + 5 + 6?"}]
        return jinja2.Template(template).render(messages=msgs, add_generation_prompt=True)

    answer = tradeoff.response(random.Random(0), [3, 4, 5, 6], "steps", 2)
    assert TEMPLATES["plain"] == CHAT_TEMPLATE
    assert prompt(TEMPLATES["nothink"]).endswith("assistant\n<think>\n\n</think>\n\n")
    assert answer_boxed(prompt(TEMPLATES["nothink"]) + answer)
    assert not answer_boxed(prompt(TEMPLATES["plain"]) + answer)  # Laser would score every plain rollout −1


def test_weights_hash_sees_one_changed_weight_but_not_the_files_metadata(tmp_path):
    import torch
    from safetensors.torch import save_file
    from tradeoff_start import weights_hash

    (tmp_path / "tokenizer.json").write_text("{}")
    w = {"a": torch.arange(6, dtype=torch.bfloat16).reshape(2, 3), "b": torch.ones(4, dtype=torch.bfloat16)}
    save_file(w, tmp_path / "model.safetensors", metadata={"format": "pt"})
    h = weights_hash(tmp_path)
    save_file(dict(reversed(w.items())), tmp_path / "model.safetensors", metadata={"format": "pt", "x": "y"})
    assert weights_hash(tmp_path) == h
    w["b"][2] = 1.0078125  # the next bf16 after 1
    save_file(w, tmp_path / "model.safetensors")
    assert weights_hash(tmp_path) != h


def test_a_start_whose_weights_changed_under_its_info_is_refused_before_training(tmp_path):
    import torch
    from safetensors.torch import save_file
    from tradeoff_start import INFO, start_info, weights_hash

    (tmp_path / "tokenizer.json").write_text("{}")
    w = {"a": torch.arange(6, dtype=torch.bfloat16).reshape(2, 3)}
    save_file(w, tmp_path / "model.safetensors")
    (tmp_path / INFO).write_text(json.dumps({"weights_sha256": weights_hash(tmp_path), "template": "plain"}))
    assert start_info(tmp_path)["template"] == "plain"
    w["a"][0, 0] = 1.0  # a copied-in model under the kept info.json
    save_file(w, tmp_path / "model.safetensors")
    with pytest.raises(SystemExit, match="not the start"):
        start_info(tmp_path)


def test_report_refuses_runs_trained_from_another_build_of_their_start(tmp_path):
    import json

    from tradeoff_report import start_mixups

    (tmp_path / "start0").mkdir()
    (tmp_path / "start0" / "info.json").write_text(json.dumps({"weights_sha256": "a" * 64}))
    runs = {
        "grpo": [{"start": "start0", "name": "grpo", "seed": 0, "start_sha256": "a" * 64}],
        "lead": [{"start": "start0", "name": "lead", "seed": 0, "start_sha256": "b" * 64}, {"start": "start0"}],
    }
    mixed, unknown = start_mixups(tmp_path, runs)
    assert [m.split(" ")[0] for m in mixed] == ["start0/lead/seed0"] and unknown == 1


def test_a_start_built_twice_under_different_thread_counts_is_the_same_model(tmp_path):
    import torch
    from tradeoff_start import SFT_THREADS, build_start

    before = torch.get_num_threads()
    infos = []
    for threads in (1, 2):
        torch.set_num_threads(threads)
        infos.append(build_start(tmp_path / f"t{threads}", seed=1, steps=30, template="nothink"))
        assert torch.get_num_threads() == threads  # the caller's setting comes back
    torch.set_num_threads(before)
    assert infos[0]["weights_sha256"] == infos[1]["weights_sha256"]
    assert infos[0]["sft_threads"] == SFT_THREADS and set(infos[0]["versions"]) >= {"torch", "transformers"}


def test_laser_de_grid_keeps_its_fraction_of_the_cap_and_the_monitor_its_share_of_a_step():
    got = tc.laser_de_settings(8)
    cap = tc.CAP
    assert (got["grid_lower"], got["grid_step"], got["grid_upper"]) == (
        round(4096 / 16384 * cap),
        round(1024 / 16384 * cap),
        cap,
    )
    assert got["grid_lower"] < 27 < got["grid_upper"]  # the accurate answer is inside the grid, as 4096 of 16384 is
    assert got["monitor_prompts"] == round(500 / 128 * 8) and got["monitor_n"] == 8
    assert got["alpha"] == 0.5 and got["monitor_temperature"] == 0.6


def test_laser_de_row_runs_the_scaled_grid_and_its_monitor_on_held_back_prompts(tmp_path):
    from lead_recipes.methods.config import RecipeConfig
    from lead_recipes.methods.laser import target_grid

    method, flags = tc.configs(30, 8)["laser-de"]
    value = dict(zip(flags[::2], flags[1::2]))
    recipe = {k.split(".")[-1]: json.loads(v) for k, v in value.items() if k.startswith("--recipe.laser_de.")}
    cfg = RecipeConfig.of({"method": method, "laser_de": recipe}).laser_de
    assert target_grid(cfg.grid_lower, cfg.grid_upper, cfg.grid_step) == list(range(25, 98, 6))
    assert value["--eval.dataset"] == tc.MONITOR_SET and value["--eval.steps"] == "1"
    assert (value["--eval.n_samples_per_prompt"], value["--eval.temperature"]) == ("8", "0.6")
    # the monitor set: the first draws of MONITOR_SEED excluded, every prompt distinct and outside the exclusion
    first = tradeoff.question(tradeoff.draw(random.Random(tc.MONITOR_SEED)))
    tradeoff.write_prompts(tmp_path / "train.jsonl", 240, 1000)
    train = {json.loads(line)["prompt"] for line in open(tmp_path / "train.jsonl")}
    held = train | {tradeoff.question(d) for d in tradeoff.eval_questions(100)} | {first}
    tradeoff.write_monitor_prompts(tmp_path / "monitor.jsonl", 31, held)
    rows = [json.loads(line) for line in open(tmp_path / "monitor.jsonl")]
    assert len({r["prompt"] for r in rows}) == 31 and not {r["prompt"] for r in rows} & held
    assert all(int(r["label"]) == eval(r["prompt"][8:-1]) for r in rows)
