"""The paper recipes train what the papers trained: prompt formats the reward credits, step counts, seeded data
draws, the GRPO-LEAD 14B chain (SFT -> stage 1 -> stage 2a -> stage 2b), lengths and GPU counts. Data-side pieces
(`data build --seed`, the `dapo` preset, `curriculum --seed/--skip/--rows`) run on ../shared/data."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from lead_recipes import data
from lead_recipes.prompts import PROMPT_TEMPLATES, resolve_template


def read(path):
    return [json.loads(line) for line in open(path, encoding="utf-8")]


def run(*argv) -> int:
    return data.main([str(a) for a in argv])


# ---------------------------------------------------------------- data build --seed
def build_deepscaler(shared_data, out, *extra):
    assert (
        run(
            "build",
            "--data.preset",
            "deepscaler",
            "--input",
            shared_data / "train/deepscaler_aime_1983_2023.jsonl",
            "--no-data.decontaminate_enable",
            "--output",
            out,
            *extra,
        )
        == 0
    )
    return [r["id"] for r in read(out)], json.loads(open(f"{out}.report.json").read())


def test_seeded_build_draws_a_random_first_n_not_the_file_prefix(shared_data, tmp_path):
    plain, _ = build_deepscaler(shared_data, tmp_path / "plain.jsonl")
    seeded, report = build_deepscaler(shared_data, tmp_path / "seeded.jsonl", "--seed", 7)
    assert sorted(seeded) == sorted(plain) and report["seed"] == 7
    first = seeded[:100]  # what data.max_samples 100 would keep
    assert first != plain[:100] and len(set(first) - set(plain[:100])) > 50


def test_seeded_build_is_reproducible_and_the_seed_decides_the_order(shared_data, tmp_path):
    a, _ = build_deepscaler(shared_data, tmp_path / "a.jsonl", "--seed", 7)
    b, _ = build_deepscaler(shared_data, tmp_path / "b.jsonl", "--seed", 7)
    c, _ = build_deepscaler(shared_data, tmp_path / "c.jsonl", "--seed", 8)
    assert a == b and a != c


def test_unseeded_build_records_no_seed(shared_data, tmp_path):
    assert build_deepscaler(shared_data, tmp_path / "p.jsonl")[1]["seed"] is None


# ---------------------------------------------------------------- dapo preset, sober template
DAPO_ROW = {
    "prompt": [{"role": "user", "content": data.DAPO_PREFIX + "\n\nWhat is $6 \\times 7$?\n\n" + data.DAPO_SUFFIX}],
    "reward_model": {"ground_truth": "42"},
    "extra_info": {"index": "d-1"},
}


def test_dapo_preset_strips_dapos_answer_line_instruction_and_maps_its_fields(tmp_path):
    src = tmp_path / "dapo.jsonl"
    src.write_text(json.dumps(DAPO_ROW) + "\n")
    out = tmp_path / "out.jsonl"
    assert (
        run(
            "build",
            "--data.preset",
            "dapo",
            "--input",
            src,
            "--no-data.decontaminate_enable",
            "--prompt.template",
            "r1",
            "--output",
            out,
        )
        == 0
    )
    (row,) = read(out)
    assert (row["problem"], row["label"], row["id"]) == ("What is $6 \\times 7$?", "42", "d-1")
    assert "Answer:" not in row["prompt"] and row["prompt"].endswith("within \\boxed{}.")


def test_sober_template_has_lightevals_two_spaces_after_clearly():
    # sober-reasoning lighteval_tasks.py MATH_QUERY_TEMPLATE: "...efficiently and clearly.  The last line..."
    assert "efficiently and clearly.  The last line of your response" in PROMPT_TEMPLATES["sober"]


# ---------------------------------------------------------------- curriculum --seed/--skip/--rows
@pytest.fixture()
def curriculum_inputs(tmp_path):
    rows = [{"id": f"p{i}", "prompt": f"problem {i}", "label": str(i), "problem": f"problem {i}"} for i in range(10)]
    ds = tmp_path / "stage1.jsonl"
    ds.write_text("".join(json.dumps(r) + "\n" for r in rows))
    recs = [{"step": 1, "problem": f"p{i}", "correct": 1, "total": 8} for i in range(10)]  # keyed by row id
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return ds, tmp_path / "p.jsonl"


def curriculum_ids(inputs, out, *extra):
    ds, problems = inputs
    assert (
        run("curriculum", "--curriculum.problems", problems, "--curriculum.dataset", ds, "--output", out, *extra) == 0
    )
    return [r["id"] for r in read(out)]


def test_curriculum_rows_writes_exactly_n_rows_in_reshuffled_passes(curriculum_inputs, tmp_path):
    ids = curriculum_ids(curriculum_inputs, tmp_path / "o.jsonl", "--seed", 3, "--curriculum.rows", 25)
    assert len(ids) == 25
    assert sorted(ids[:10]) == sorted(ids[10:20]) == sorted(f"p{i}" for i in range(10))  # whole passes
    assert ids[:10] != ids[10:20]  # each reshuffled


def test_curriculum_skip_continues_the_same_seeded_order(curriculum_inputs, tmp_path):
    whole = curriculum_ids(curriculum_inputs, tmp_path / "w.jsonl", "--seed", 3, "--curriculum.rows", 24)
    first = curriculum_ids(curriculum_inputs, tmp_path / "a.jsonl", "--seed", 3, "--curriculum.rows", 10)
    second = curriculum_ids(
        curriculum_inputs, tmp_path / "b.jsonl", "--seed", 3, "--curriculum.skip", 10, "--curriculum.rows", 14
    )
    assert first + second == whole
    assert json.loads(open(tmp_path / "b.jsonl.report.json").read())["seed"] == 3


def test_curriculum_rows_without_a_seed_is_an_error(curriculum_inputs, tmp_path, capsys):
    ds, problems = curriculum_inputs
    assert (
        run(
            "curriculum",
            "--curriculum.problems",
            problems,
            "--curriculum.dataset",
            ds,
            "--output",
            tmp_path / "o",
            "--curriculum.rows",
            5,
        )
        == 2
    )
    assert "--seed" in capsys.readouterr().err


def test_sft_build_keeps_difficulty_strictly_above_one_and_the_solution_as_response(tmp_path):
    src = tmp_path / "sft.jsonl"
    rows = [
        {"id": f"s{d}", "problem": f"problem {d}", "answer": "1", "difficulty": d, "solution": f"sol {d}"}
        for d in (0.5, 1.0, 1.0625, 3.0)
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    assert (
        run(
            "build",
            "--data.preset",
            "deepscaler",
            "--input",
            src,
            "--no-data.decontaminate_enable",
            "--filter.above_difficulty",
            1,
            "--data.response_key",
            "solution",
            "--prompt.template",
            "r1",
            "--output",
            out,
        )
        == 0
    )
    assert [(r["id"], r["response"]) for r in read(out)] == [("s1.0625", "sol 1.0625"), ("s3.0", "sol 3.0")]


# ---------------------------------------------------------------- recipes against the papers
from lead_recipes.recipes import RecipeError  # noqa: E402
from lead_recipes.recipes.layout import rollout_steps  # noqa: E402
from lead_recipes.recipes.recipe import load_recipe, recipe_names  # noqa: E402

TRAIN_RECIPES = [n for n in recipe_names() if load_recipe(n).entrypoint == "train"]


def _flag(argv, name):
    return argv[argv.index(name) + 1] if name in argv else None


def prompt_template(recipe) -> str:
    """The instruction text the recipe's prompts carry: its data.prepare --prompt.template (a curriculum takes the
    template of the recipe that builds its --curriculum.dataset); `raw` means the source's own instruction
    (DAPO-Math-17k's)."""
    prepare = [str(a) for a in recipe.data["prepare"]]
    if prepare[0] == "curriculum":
        dataset = _flag(prepare, "--curriculum.dataset")
        (builder,) = [
            r
            for r in map(load_recipe, recipe_names())
            if r.data.get("prepare")
            and _flag([str(a) for a in r.data["prepare"]], "--output") == dataset
            and r.data["prepare"][0] == "build"
        ][:1]
        return prompt_template(builder)
    name, template = resolve_template(_flag(prepare, "--prompt.template") or "deepscaler")
    if name == "raw":
        return (
            (data.DAPO_PREFIX + "\n\n{problem}\n\n" + data.DAPO_SUFFIX)
            if "dapo" in _flag(prepare, "--input") and _flag(prepare, "--data.preset") != "dapo"
            else "{problem}"
        )
    return template


def compliant_response(template: str, answer: str) -> str:
    """A response that does exactly what the prompt's instruction asks for."""
    if "'Therefore, the final answer is: $\\boxed{{ANSWER}}$. I hope it is correct'" in template:
        return f"Steps.\n</think>\nTherefore, the final answer is: $\\boxed{{{answer}}}$. I hope it is correct"
    if "\\boxed{{}}" in template:
        return f"Steps.\n</think>\nSo the final answer is \\boxed{{{answer}}}."
    if 'on its own line after "Answer:"' in template:
        return f"Steps.\n</think>\nAnswer: {answer}"
    pytest.fail(f"the prompt template states no answer format: {template!r}")


@pytest.mark.parametrize("name", TRAIN_RECIPES)
def test_a_response_following_the_recipes_prompt_earns_the_correct_reward(name):
    from lead_recipes.reward.reward_func import grade_samples

    recipe = load_recipe(name)
    assert recipe.openrlhf["reward.remote_url"].endswith("reward_func.py")  # the reward graded here
    template = prompt_template(recipe)
    prompt = template.format(problem="Compute $3/4$.")
    rewards, logs = grade_samples([prompt + compliant_response(template, "\\frac{3}{4}")], [prompt], ["\\frac{3}{4}"])
    assert rewards == [1.0], logs


PAPER_STEPS = {
    "grpo-lead-7b": 200,
    "grpo-lead-14b-stage1": 100,
    "grpo-lead-14b-stage2a": 100,
    "grpo-lead-14b-stage2b": 140,
}  # arXiv 2504.09696 §4.3


@pytest.mark.parametrize("name", sorted(PAPER_STEPS))
def test_rendered_flags_run_the_papers_step_count(name):
    recipe = load_recipe(name)
    argv, prepare = recipe.train_argv(), [str(a) for a in recipe.data["prepare"]]
    flag = lambda key: int(_flag(argv, f"--{key}"))  # noqa: E731 - the rendered command line, as OpenRLHF reads it
    rows = min(flag("data.max_samples"), int(_flag(prepare, "--curriculum.rows") or 10**9))
    per_step = flag("rollout.batch_size")
    assert rows % per_step == 0  # no partial last batch
    assert flag("train.num_episodes") * rows // per_step == PAPER_STEPS[name] == rollout_steps(recipe)
    assert flag("train.batch_size") == per_step * flag("rollout.n_samples_per_prompt")  # one update per step


# the length baselines' sources: Arora & Zanette's script (3,200 samples / 32), L1's 700 (Exact, as 3 x 234) and 120
# (Max) steps, ThinkPrune's round 1 (its round 2 starts from global_step_180)
BASELINE_STEPS = {"arora-zanette-1.5b": 100, "l1-exact-1.5b": 702, "l1-max-1.5b": 120, "thinkprune-1.5b": 180}


@pytest.mark.parametrize("name", sorted(BASELINE_STEPS))
def test_length_baseline_recipes_run_their_sources_step_counts(name):
    recipe = load_recipe(name)
    argv = recipe.train_argv()
    rows, per_step = int(_flag(argv, "--data.max_samples")), int(_flag(argv, "--rollout.batch_size"))
    assert rows % per_step == 0 and "--seed" in [str(a) for a in recipe.data["prepare"]]  # a seeded random draw
    assert int(_flag(argv, "--train.num_episodes")) * rows // per_step == BASELINE_STEPS[name] == rollout_steps(recipe)


def test_l1_max_continues_from_l1_exacts_final_model_at_the_same_context():
    exact, max_ = load_recipe("l1-exact-1.5b"), load_recipe("l1-max-1.5b")
    assert max_.after == "l1-exact-1.5b" and max_.openrlhf["actor.model_name_or_path"].endswith("/l1-exact-1.5b/hf")
    assert max_.openrlhf["rollout.max_new_tokens"] == exact.openrlhf["rollout.max_new_tokens"] == 4096
    assert max_.recipe["l1_exact.alpha"] == 0.0003  # the exact half of L1-Max's data keeps Eq. 1's alpha


# DAPO-Math-17k has 17,917 distinct prompts (each repeated 100 times); `data build --data.preset dapo` keeps the
# distinct ones (de-duplication and de-contamination drop at most a few hundred), so steps follow from the rendered
# flags.
DAPO_ROWS = (17_400, 17_917)


@pytest.mark.parametrize("name", ["leash-1.5b", "leash-4b"])
def test_leash_runs_about_300_steps_over_the_whole_dapo_set(name):
    argv = load_recipe(name).train_argv()
    episodes, per_step = int(_flag(argv, "--train.num_episodes")), int(_flag(argv, "--rollout.batch_size"))
    assert all(250 <= episodes * (rows // per_step) <= 320 for rows in DAPO_ROWS)


def test_stage_2b_continues_stage_2as_seeded_curriculum_order():
    a, b = ([str(x) for x in load_recipe(f"grpo-lead-14b-stage2{s}").data["prepare"]] for s in "ab")
    for flag in (
        "--curriculum.problems",
        "--curriculum.dataset",
        "--curriculum.threshold",
        "--curriculum.merge",
        "--seed",
    ):
        assert _flag(a, flag) == _flag(b, flag), flag
    assert int(_flag(b, "--curriculum.skip")) == int(_flag(a, "--curriculum.skip") or 0) + int(
        _flag(a, "--curriculum.rows")
    )


def test_max_samples_without_a_seeded_prompt_file_is_refused():
    prepare = [a for a in load_recipe("grpo-lead-7b").data["prepare"] if a not in ("--seed", "0")]
    with pytest.raises(RecipeError, match=r"data\.max_samples.*seed"):
        load_recipe("grpo-lead-7b", [f"data.prepare={json.dumps(prepare)}"])


@pytest.mark.parametrize("name", ["grpo-lead-14b-stage1", "grpo-lead-14b-stage2a", "grpo-lead-14b-stage2b"])
def test_14b_stages_generate_14k_tokens_on_one_node_of_eight_gpus(name):
    r = load_recipe(name)
    assert r.openrlhf["rollout.max_new_tokens"] == 14336  # "14k" (§4.3)
    # eight H20 (arXiv 2504.09696, Section 5.3)
    assert (r.resources["nodes"], r.resources["gpus_per_node"], r.actor_gpus()) == (1, 8, 8)


def test_14b_chain_hands_each_stages_final_model_to_the_next(tmp_path, monkeypatch):
    monkeypatch.setenv("LEAD_RECIPES_RUNS", str(tmp_path))
    chain = ["grpo-lead-14b-sft", "grpo-lead-14b-stage1", "grpo-lead-14b-stage2a", "grpo-lead-14b-stage2b"]
    for before, after in zip(chain, chain[1:]):
        prev, nxt = load_recipe(before), load_recipe(after)
        out = prev.openrlhf["ckpt.output_dir"]
        assert nxt.after == before and out == str(tmp_path / before / "hf")
        assert nxt.openrlhf["actor.model_name_or_path"] == out


def test_sft_recipe_states_the_papers_data_and_builds_it():
    r = load_recipe("grpo-lead-14b-sft")
    prepare = [str(a) for a in r.data["prepare"]]
    assert (_flag(prepare, "--data.preset"), _flag(prepare, "--filter.above_difficulty")) == ("deepscaler", "1")
    assert _flag(prepare, "--data.response_key") and "QwQ-32B" in r.data["notes"] and "13k" in r.data["notes"]
    text = open(r.path).read()
    assert "UNKNOWN" not in text.split("data.dataset")[1].split("\n")[0]


def test_unknown_run_placeholder_and_unknown_predecessor_are_named(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("extends: lead-1.5b\nopenrlhf:\n  actor.model_name_or_path: ${run:no-such}/hf\n")
    with pytest.raises(RecipeError, match=r"run:no-such"):
        load_recipe(str(path))
    path.write_text("extends: lead-1.5b\nafter: no-such\n")
    with pytest.raises(RecipeError, match=r"'after'"):
        load_recipe(str(path))


# ---------------------------------------------------------------- launch --launch.chain_enable
CHAIN = ["grpo-lead-14b-sft", "grpo-lead-14b-stage1", "grpo-lead-14b-stage2a", "grpo-lead-14b-stage2b"]


@pytest.fixture()
def chain_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("LEAD_RECIPES_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("LEAD_RECIPES_RUNS", str(tmp_path / "runs"))
    monkeypatch.delenv("LEAD_RECIPES_RUN_DIR", raising=False)
    return tmp_path


def test_chain_submits_each_step_as_a_slurm_job_after_the_previous_one(chain_dirs, monkeypatch):
    from lead_recipes.recipes import launch

    bin_dir, log = chain_dirs / "bin", chain_dirs / "sbatch.log"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(  # stand-in: records its arguments, answers job ids 101, 102, ...
        f'#!/bin/sh\nn=$(( $(wc -l < "{log}" 2>/dev/null || echo 0) + 101 ))\n'
        f'printf "%s\\n" "$*" >> "{log}"\necho "$n;cluster"\n'
    )
    (bin_dir / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    assert (
        launch.main(
            [
                "grpo-lead-14b-stage2b",
                "--launch.chain_enable",
                "--launch.target",
                "slurm",
                "--no-launch.data_check_enable",
                "--slurm.partition",
                "p",
            ]
        )
        == 0
    )
    jobs = log.read_text().splitlines()
    names = [j.split("--job-name=")[1].split()[0] for j in jobs]
    assert names == [n + s for n in CHAIN for s in ("-data", "")]  # every stage's data is missing here
    for i, job in enumerate(jobs):
        dependency = [a for a in job.split() if a.startswith(("--dependency=", "--kill-on-invalid-dep"))]
        assert dependency == ([f"--dependency=afterok:{100 + i}", "--kill-on-invalid-dep=yes"] if i else []), job
    for name in CHAIN:
        assert (chain_dirs / "runs" / name / "launch.json").exists()


def test_local_chain_runs_steps_in_order_and_stops_at_the_first_failure(chain_dirs, monkeypatch):
    from lead_recipes.recipes import chain, launch

    calls = []

    def fake_call(cmd):
        calls.append(cmd)
        return 3 if len(calls) == 4 else 0  # the stage-1 training step fails

    monkeypatch.setattr(chain.subprocess, "call", fake_call)
    assert (
        launch.main(
            [
                "grpo-lead-14b-stage2b",
                "--launch.chain_enable",
                "--launch.target",
                "local",
                "--no-launch.data_check_enable",
            ]
        )
        == 3
    )
    kinds = [("data" if c[1] == "data" else "train") for c in calls]
    assert kinds == ["data", "train", "data", "train"]
    assert "openrlhf.cli.train_sft" in calls[1] and calls[3][calls[3].index("--actor.model_name_or_path") + 1] == str(
        chain_dirs / "runs" / "grpo-lead-14b-sft" / "hf"
    )


def test_chain_refuses_a_missing_source_unless_told(chain_dirs, capsys):
    from lead_recipes.recipes import launch

    assert launch.main(["grpo-lead-14b-stage1", "--launch.chain_enable", "--launch.target", "local"]) == 2
    assert "deepscaler_qwq32b.jsonl" in capsys.readouterr().err


@pytest.mark.parametrize("report, refused", [({"seed": None}, True), ({"seed": 0}, False), (None, True)])
def test_launch_refuses_max_samples_on_a_file_built_without_a_seed(chain_dirs, monkeypatch, report, refused, capsys):
    from lead_recipes.recipes import launch

    monkeypatch.setenv("LEAD_RECIPES_RUN_DIR", str(chain_dirs / "run"))
    path = chain_dirs / "data" / "deepscaler_d25.jsonl"
    path.parent.mkdir()
    path.write_text('{"prompt": "p", "label": "1"}\n')
    if report is not None:
        path.with_name(path.name + ".report.json").write_text(json.dumps(report))
    monkeypatch.setattr(launch.subprocess, "call", lambda cmd: 0)
    assert launch.main(["grpo-lead-7b", "--launch.target", "local"]) == (2 if refused else 0)
    assert ("no shuffle seed" in capsys.readouterr().err) == refused


def test_lead_7b_uses_smaller_rollout_and_update_batches_and_a_lower_lr_than_1_5b():
    small, big = load_recipe("lead-7b").openrlhf, load_recipe("lead-1.5b").openrlhf
    for key in ("rollout.batch_size", "train.batch_size", "actor.adam.lr"):  # arXiv 2605.09806, setup
        assert small[key] < big[key], key


@pytest.mark.parametrize("template", [*PROMPT_TEMPLATES, "Q: {problem} \\boxed{} {answer}", "{{literal}} {problem}"])
def test_data_and_eval_write_the_same_prompt_for_every_template_name_and_literal(template):
    """`data build --prompt.template X` writes the user turn `eval --prompt.template X` evaluates with, for every name
    and custom literal (single braces kept as they are); eval records a name as given, a literal as "custom"."""
    from evaluation.protocols import build_user_text, resolve

    problem = "Find {x} if $x^{2}=4$."
    cfg = resolve("sober", prompt_template=template)
    row = data.render({"id": "x", "problem": problem, "answer": "2"}, template, "text", None)
    assert build_user_text(cfg, problem) == row["prompt"]
    assert problem in row["prompt"]
    assert cfg.prompt_template_name == (template if "{problem}" not in template else "custom")


def _stand_in_sbatch(chain_dirs, monkeypatch):
    """A stand-in sbatch on PATH that records its arguments and answers job ids 101, 102, ... (the real one is in
    tests/slurm/test_slurm.py)."""
    bin_dir, log = chain_dirs / "bin", chain_dirs / "sbatch.log"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "sbatch").write_text(
        f'#!/bin/sh\nn=$(( $(wc -l < "{log}" 2>/dev/null || echo 0) + 101 ))\n'
        f'printf "%s\\n" "$*" >> "{log}"\necho "$n;cluster"\n'
    )
    (bin_dir / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    return log


def _dry_run_submissions(out: str) -> list[list[str]]:
    lines = out.splitlines()
    return [shlex.split(lines[i + 1]) for i, line in enumerate(lines) if line.startswith("# submit")]


def test_chain_dry_run_prints_exactly_the_sbatch_commands_it_submits(chain_dirs, monkeypatch, capsys):
    """Dependency flags included: the dry run names the job each step waits for, the submission fills in its id."""
    from lead_recipes.recipes import launch

    argv = ["grpo-lead-14b-stage2b", "--launch.chain_enable", "--launch.target", "slurm", "--slurm.partition", "p"]
    assert launch.main(argv + ["--run.dry_run_enable"]) == 0
    dry = _dry_run_submissions(capsys.readouterr().out)
    assert len(dry) == 8
    assert [a for a in dry[3] if a.startswith("--dependency")] == ["--dependency=afterok:<job of step 3>"]
    log = _stand_in_sbatch(chain_dirs, monkeypatch)
    assert launch.main(argv + ["--no-launch.data_check_enable"]) == 0
    submitted = log.read_text().splitlines()
    for i, (shown, real) in enumerate(zip(dry, submitted, strict=True)):
        shown = [a.replace(f"<job of step {i}>", str(100 + i)) for a in shown]
        assert " ".join(shown[1:]) == real, i


def test_chain_data_steps_are_small_cpu_jobs_with_their_own_resources(chain_dirs, capsys):
    from lead_recipes.recipes import chain, launch

    argv = ["grpo-lead-14b-stage1", "--launch.chain_enable", "--launch.target", "slurm", "--run.dry_run_enable"]
    argv += ["--slurm.partition", "gpu", "--slurm.account", "acc", "--slurm.time", "40:00:00"]
    assert launch.main(argv) == 0
    data, train = _dry_run_submissions(capsys.readouterr().out)[:2]
    job = chain.DATA_JOB
    assert {f"--time={job['time']}", f"--cpus-per-task={job['cpus_per_node']}", f"--mem={job['mem']}"} <= set(data)
    assert "--account=acc" in data and not [a for a in data if a.startswith(("--partition", "--gpus"))], data
    assert {"--partition=gpu", "--time=40:00:00", "--gpus-per-node=8"} <= set(train)
    more = ["--slurm.data_partition", "cpu", "--slurm.data_time", "3:00:00", "--slurm.data_cpus_per_node", "2"]
    assert launch.main(argv + more + ["--slurm.data_mem", "1G"]) == 0
    data = _dry_run_submissions(capsys.readouterr().out)[0]
    assert {"--partition=cpu", "--time=3:00:00", "--cpus-per-task=2", "--mem=1G"} <= set(data)


def test_curriculum_steps_hash_prompts_with_the_tokenizer_their_records_were_made_with(chain_dirs):
    """The trainer hashes the prompt it sent, which is chat-templated under data.apply_chat_template; the curriculum
    matches rows by that hash, so it needs the tokenizer of the stage that wrote the records."""
    recipes = [load_recipe(n) for n in recipe_names()]
    curricula = [r for r in recipes if (r.data.get("prepare") or [None])[0] == "curriculum"]
    assert curricula
    for r in curricula:
        records = _flag(r.data["prepare"], "--curriculum.problems")
        writer = next(w for w in recipes if w.openrlhf.get("ckpt.path") == str(Path(records).parent))
        assert writer.openrlhf.get("data.apply_chat_template"), writer.name
        assert _flag(r.data["prepare"], "--curriculum.tokenizer") == writer.openrlhf["actor.model_name_or_path"], r.name


def test_chain_names_a_missing_merge_set_before_it_submits_anything(chain_dirs, monkeypatch, capsys):
    from lead_recipes.recipes import launch

    sources = chain_dirs / "sources"
    monkeypatch.setenv("LEAD_RECIPES_SOURCES", str(sources))
    sources.mkdir()
    for name in ("deepscaler_qwq32b.jsonl", "deepscaler.jsonl"):  # the stage sources are there, the merge set not
        (sources / name).write_text("{}\n")
    log = _stand_in_sbatch(chain_dirs, monkeypatch)
    argv = ["grpo-lead-14b-stage2a", "--launch.chain_enable", "--launch.target", "slurm"]
    assert launch.main(argv + ["--run.dry_run_enable"]) == 0
    out, err = capsys.readouterr()
    merge = str(chain_dirs / "data" / "light_r1_numeric.jsonl")
    assert f"missing input: {merge}" in out and merge in err and "deepscaler.jsonl" not in err, err
    assert launch.main(argv) == 2 and merge in capsys.readouterr().err
    assert not log.exists()
