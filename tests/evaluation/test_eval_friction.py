"""What a new user meets when evaluating: failed runs that must not lock their directory, replays that record only
what the generations file says and take its benchmarks and n, comparisons labelled by model, an offline hub
fallback that ends in one line, the benchmarks-directory flag/env, the one-run plot, presets per model size with
their provenance, and the data-parallel vLLM helpers that run without vLLM."""

from __future__ import annotations

import json
import os
import pickle
import socket
import subprocess
import sys
import time

import pytest

from evaluation import cli, plots, protocols, report, store
from lead_recipes.benchmarks import load_benchmark


def _replay_file(path, shared_data, benches=("aime2024", "math500"), n=3, k=2, extra=None):
    """k problems of each benchmark, n samples each: sample 0 boxes the gold answer, the others a wrong one."""
    rows = []
    for b in benches:
        for p in load_benchmark(b, shared_data / "benchmarks")[:k]:
            for s in range(n):
                ans = p.answer if s == 0 else "123456789"
                rows.append(
                    dict(
                        {
                            "benchmark": b,
                            "id": p.id,
                            "sample": s,
                            "response": f"So \\boxed{{{ans}}}.",
                            "num_tokens": 10 + 7 * s,
                        },
                        **(extra(s) if extra else {}),
                    )
                )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _argv(replay, out, shared_data, *more):
    return [
        "--eval.backend",
        "replay",
        "--replay.path",
        str(replay),
        "--data.benchmarks_dir",
        str(shared_data / "benchmarks"),
        "--limit",
        "2",
        "--output",
        str(out),
        "--no-eval.progress_enable",
        *more,
    ]


def test_failed_input_check_leaves_no_config_and_a_fixed_rerun_proceeds(shared_data, tmp_path, capsys):
    replay = _replay_file(tmp_path / "g.jsonl", shared_data)
    assert cli.main(_argv(replay, tmp_path / "r", shared_data, "--sampling.n", "4", "--no-eval.plots_enable")) == 2
    assert "lacks" in capsys.readouterr().err
    assert not (tmp_path / "r" / "config.json").exists()
    assert cli.main(_argv(replay, tmp_path / "r", shared_data, "--sampling.n", "3", "--no-eval.plots_enable")) == 0


def test_config_left_by_a_run_that_wrote_no_sample_does_not_lock_the_directory(shared_data, tmp_path):
    replay = _replay_file(tmp_path / "g.jsonl", shared_data)
    (tmp_path / "r").mkdir()
    store.write_json(tmp_path / "r" / "config.json", {"generation": {"max_new_tokens": 1}})
    assert cli.main(_argv(replay, tmp_path / "r", shared_data, "--no-eval.plots_enable")) == 0


def test_replay_records_sampling_settings_it_never_saw_as_unknown(shared_data, tmp_path):
    replay = _replay_file(tmp_path / "g.jsonl", shared_data)
    assert cli.main(_argv(replay, tmp_path / "r", shared_data, "--no-eval.plots_enable")) == 0
    gen = json.loads((tmp_path / "r" / "summary.json").read_text())["config"]["generation"]
    for key in ("temperature", "top_p", "seed", "chat_template_enable", "prompt_template", "min_p", "top_k"):
        assert gen[key] == "unknown", key
    assert set(gen["unknown"]) >= {"temperature", "top_p", "seed", "chat_template_enable"}
    assert {r["seed"] for r in store.read_samples(tmp_path / "r" / "samples.jsonl")} == {None}
    assert "seed unknown" in (tmp_path / "r" / "report.md").read_text()


def test_replay_records_the_settings_and_seeds_the_file_carries(shared_data, tmp_path):
    replay = _replay_file(
        tmp_path / "g.jsonl", shared_data, extra=lambda s: {"temperature": 0.6, "top_p": 0.95, "seed": 1000 + s}
    )
    assert (
        cli.main(_argv(replay, tmp_path / "r", shared_data, "--no-eval.plots_enable", "--sampling.min_p", "0.01")) == 0
    )
    gen = json.loads((tmp_path / "r" / "summary.json").read_text())["config"]["generation"]
    assert (gen["temperature"], gen["top_p"], gen["seed"], gen["min_p"]) == (0.6, 0.95, 1000, 0.01)
    assert gen["chat_template_enable"] == "unknown"
    assert sorted({r["seed"] for r in store.read_samples(tmp_path / "r" / "samples.jsonl")}) == [1000, 1001, 1002]


def test_replay_flag_contradicting_the_file_is_an_error(shared_data, tmp_path, capsys):
    replay = _replay_file(tmp_path / "g.jsonl", shared_data, extra=lambda s: {"temperature": 0.6})
    assert cli.main(_argv(replay, tmp_path / "r", shared_data, "--sampling.temperature", "0.8")) == 2
    assert "contradicts" in capsys.readouterr().err


def test_replay_accepts_a_template_name_whose_text_the_file_records(shared_data, tmp_path):
    """The file records the template's text under a name of its own; `--prompt.template r1` names the same text, so
    it agrees (the text decides, not the name) and the run keeps that text."""
    from lead_recipes.prompts import PROMPT_TEMPLATES

    replay = _replay_file(
        tmp_path / "g.jsonl",
        shared_data,
        extra=lambda s: {"prompt_template_name": "boxed-cot", "prompt_template": PROMPT_TEMPLATES["r1"]},
    )
    assert (
        cli.main(_argv(replay, tmp_path / "r", shared_data, "--no-eval.plots_enable", "--prompt.template", "r1")) == 0
    )
    gen = json.loads((tmp_path / "r" / "summary.json").read_text())["config"]["generation"]
    assert gen["prompt_template"] == PROMPT_TEMPLATES["r1"]


def test_replay_refuses_a_template_whose_text_differs_from_the_files(shared_data, tmp_path, capsys):
    from lead_recipes.prompts import PROMPT_TEMPLATES

    replay = _replay_file(
        tmp_path / "g.jsonl",
        shared_data,
        extra=lambda s: {"prompt_template_name": "r1", "prompt_template": PROMPT_TEMPLATES["r1"]},
    )
    assert cli.main(_argv(replay, tmp_path / "r", shared_data, "--prompt.template", "sober")) == 2
    assert "contradicts" in capsys.readouterr().err


def test_replay_takes_benchmarks_and_n_from_the_file(shared_data, tmp_path):
    replay = _replay_file(tmp_path / "g.jsonl", shared_data, benches=("math500", "aime2025"), n=3)
    assert cli.main(_argv(replay, tmp_path / "r", shared_data, "--no-eval.plots_enable")) == 0
    bench = json.loads((tmp_path / "r" / "summary.json").read_text())["benchmarks"]
    assert list(bench) == ["math500", "aime2025"]
    assert {b["n_samples"] for b in bench.values()} == {3}
    assert all(b["accuracy"] == pytest.approx(1 / 3) for b in bench.values())


def test_replay_file_with_uneven_samples_asks_for_n(shared_data, tmp_path, capsys):
    replay = _replay_file(tmp_path / "g.jsonl", shared_data, benches=("aime2024",), n=3)
    lines = replay.read_text().splitlines()
    replay.write_text("\n".join(lines[:-1]) + "\n")  # the last problem lacks sample 2
    assert cli.main(_argv(replay, tmp_path / "r", shared_data)) == 2
    assert "pass --sampling.n" in capsys.readouterr().err
    assert cli.main(_argv(replay, tmp_path / "r", shared_data, "--sampling.n", "2", "--no-eval.plots_enable")) == 0


def test_compare_labels_runs_by_their_model(shared_data, tmp_path):
    replay = _replay_file(tmp_path / "g.jsonl", shared_data)
    for model, folder in (("org/model-a", "run1"), ("org/model-b", "run2")):
        assert (
            cli.main(_argv(replay, tmp_path / folder, shared_data, "--eval.model", model, "--no-eval.plots_enable"))
            == 0
        )
    assert (
        cli.main(
            [
                "compare",
                str(tmp_path / "run1"),
                "--eval.base",
                str(tmp_path / "run2"),
                "--output",
                str(tmp_path / "cmp"),
            ]
        )
        == 0
    )
    rows = json.loads((tmp_path / "cmp" / "compare.json").read_text())["table"]
    assert [r["run"] for r in rows] == ["org/model-b (base)", "org/model-a"]


def test_compare_keeps_two_runs_of_one_model_apart(shared_data, tmp_path):
    replay = _replay_file(tmp_path / "g.jsonl", shared_data)
    for folder in ("run1", "run2"):
        assert (
            cli.main(_argv(replay, tmp_path / folder, shared_data, "--eval.model", "m", "--no-eval.plots_enable")) == 0
        )
    assert cli.main(["compare", str(tmp_path / "run1"), str(tmp_path / "run2"), "--output", str(tmp_path / "cmp")]) == 0
    rows = json.loads((tmp_path / "cmp" / "compare.json").read_text())["table"]
    assert [r["run"] for r in rows] == ["m (run1)", "m (run2)"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _assert_one_fast_line(rc: int, err: str, took: float) -> None:
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "--data.benchmarks_dir" in err and "LEAD_RECIPES_BENCHMARKS_DIR" in err
    assert took < 20, f"{took:.1f} s: the hub client retried"


def test_unreachable_hub_fallback_is_one_fast_line_naming_the_local_directory_option(tmp_path, monkeypatch, capsys):
    for var in ("LEAD_RECIPES_BENCHMARKS_DIR", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty hub cache
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    (tmp_path / "g.jsonl").write_text('{"benchmark": "aime2024", "id": "1", "sample": 0, "response": "x"}\n')
    t0 = time.monotonic()
    rc = cli.main(
        ["--eval.backend", "replay", "--replay.path", str(tmp_path / "g.jsonl"), "--output", str(tmp_path / "r")]
    )
    _assert_one_fast_line(rc, capsys.readouterr().err, time.monotonic() - t0)


def test_offline_mode_hub_fallback_is_one_fast_line_naming_the_local_directory_option(tmp_path):
    # HF_HUB_OFFLINE is read when the hub client is imported, so this runs the command as a user would
    env = {k: v for k, v in os.environ.items() if k not in ("LEAD_RECIPES_BENCHMARKS_DIR", "HF_ENDPOINT")}
    env.update(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"))
    (tmp_path / "g.jsonl").write_text('{"benchmark": "aime2024", "id": "1", "sample": 0, "response": "x"}\n')
    t0 = time.monotonic()
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "lead_recipes.cli",
            "eval",
            "--eval.backend",
            "replay",
            "--replay.path",
            str(tmp_path / "g.jsonl"),
            "--output",
            str(tmp_path / "r"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    _assert_one_fast_line(res.returncode, res.stderr, time.monotonic() - t0)


def test_benchmarks_dir_comes_from_the_environment_and_the_old_flag_still_works(shared_data, tmp_path, monkeypatch):
    replay = _replay_file(tmp_path / "g.jsonl", shared_data)
    base = [
        "--eval.backend",
        "replay",
        "--replay.path",
        str(replay),
        "--limit",
        "2",
        "--no-eval.progress_enable",
        "--no-eval.plots_enable",
    ]
    monkeypatch.setenv("LEAD_RECIPES_BENCHMARKS_DIR", str(shared_data / "benchmarks"))
    assert cli.build_parser().parse_args(base + ["--output", "x"]).__dict__["data.benchmarks_dir"] == str(
        shared_data / "benchmarks"
    )
    assert cli.main(base + ["--output", str(tmp_path / "env")]) == 0
    monkeypatch.delenv("LEAD_RECIPES_BENCHMARKS_DIR")
    assert (
        cli.main(base + ["--data.benchmarks_dir", str(shared_data / "benchmarks"), "--output", str(tmp_path / "old")])
        == 0
    )


def test_one_run_plot_shows_accuracy_and_length_per_benchmark_and_the_length_histogram(shared_data, tmp_path):
    replay = _replay_file(tmp_path / "g.jsonl", shared_data)
    assert cli.main(_argv(replay, tmp_path / "r", shared_data)) == 0
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    rows = store.read_samples(tmp_path / "r" / "samples.jsonl")
    assert (tmp_path / "r" / "run.png").stat().st_size > 0
    drawn = plots.plot_run(summary, rows, tmp_path / "again.png")
    assert drawn["accuracy"] == pytest.approx({n: m["accuracy"] for n, m in summary["benchmarks"].items()})
    assert drawn["mean_length"] == pytest.approx({n: m["mean_length"] for n, m in summary["benchmarks"].items()})
    assert drawn["histogram_total"] == len(rows) == 12


def test_grpo_lead_presets_follow_the_model_size_and_the_papers_benchmarks():
    assert protocols.resolve("grpo-lead-7b").max_new_tokens == 8192
    assert protocols.resolve("grpo-lead-14b").max_new_tokens == 14336
    for p in ("grpo-lead-7b", "grpo-lead-14b"):
        args = cli.build_parser().parse_args(["--eval.backend", "vllm", "--eval.preset", p, "--output", "x"])
        assert cli.benchmark_specs(args, None) == ["aime2024", "aime2025"]
    args = cli.build_parser().parse_args(["--eval.backend", "vllm", "--output", "x"])
    assert cli.benchmark_specs(args, None) == list(protocols.ALL_BENCHMARKS)


def test_summary_records_the_protocol_provenance_and_what_the_average_covers(shared_data, tmp_path):
    replay = _replay_file(tmp_path / "g.jsonl", shared_data, benches=("aime2024", "aime2025"), n=2)
    assert (
        cli.main(_argv(replay, tmp_path / "r", shared_data, "--eval.preset", "grpo-lead-7b", "--no-eval.plots_enable"))
        == 0
    )
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert s["protocol"]["preset"] == "grpo-lead-7b" and "2504.09696" in s["protocol"]["paper"]
    assert s["average"]["set"] == {
        "benchmarks": ["aime2024", "aime2025"],
        "label": "aime2024+aime2025",
        "paper_set": True,
        "limit": 2,
        "note": "the paper's benchmark set; only the first 2 problems of each (--limit)",
    }
    assert (
        cli.main(
            _argv(
                replay,
                tmp_path / "one",
                shared_data,
                "--eval.preset",
                "grpo-lead-7b",
                "--data.benchmarks",
                "aime2024",
                "--no-eval.plots_enable",
            )
        )
        == 0
    )
    s = json.loads((tmp_path / "one" / "summary.json").read_text())
    assert not s["average"]["set"]["paper_set"] and "aime2024+aime2025" in s["average"]["set"]["note"]


def test_every_preset_has_provenance_and_a_paper_benchmark_set():
    for name in protocols.PRESETS:
        prov = protocols.PROVENANCE[name]
        assert prov["paper"] and prov["mirrors"] and prov["differences"], name
        assert prov["paper_benchmarks"] == list(protocols.DEFAULT_BENCHMARKS[name])


def test_requests_and_protocols_cross_process_boundaries():
    from evaluation.backends import GenRequest

    req = GenRequest("aime2024", "1", 0, "p", ({"role": "user", "content": "q"},), 7)
    gen = protocols.resolve("sober")
    assert pickle.loads(pickle.dumps((req, gen))) == (req, gen)


def test_data_parallel_size_defaults_to_gpus_over_tensor_parallel():
    from evaluation.vllm_dp import data_parallel_size

    eight = [str(i) for i in range(8)]
    assert data_parallel_size(None, 1, eight) == 8
    assert data_parallel_size(None, 2, eight) == 4
    assert data_parallel_size(None, 1, []) == 1
    assert data_parallel_size(2, 1, []) == 2  # CPU engines (testing)
    with pytest.raises(ValueError, match="needs 16 GPUs"):
        data_parallel_size(8, 2, eight)


def test_extraction_policy_is_recorded_and_changes_verdicts_on_unboxed_answers(shared_data, tmp_path):
    replay = _replay_file(tmp_path / "g.jsonl", shared_data, benches=("aime2024",), n=1)
    gold = load_benchmark("aime2024", shared_data / "benchmarks")[0].answer
    rows = [json.loads(l) for l in replay.read_text().splitlines()]
    rows[0]["response"] = f"Adding the two cases gives the total.\n\nTherefore, the final answer is {gold}."
    replay.write_text("".join(json.dumps(r) + "\n" for r in rows))
    acc = {}
    for policy in ("final_answer", "boxed"):
        out = tmp_path / policy
        assert cli.main(_argv(replay, out, shared_data, "--grade.extraction", policy, "--no-eval.plots_enable")) == 0
        s = json.loads((out / "summary.json").read_text())
        grading = {"extraction": policy, "rel_tol": 1e-4, "problem_precision": True}
        assert s["config"]["grading"] == grading
        assert json.loads((out / "config.json").read_text())["grading"] == grading
        acc[policy] = s["benchmarks"]["aime2024"]["accuracy"]
    assert (acc["final_answer"], acc["boxed"]) == (1.0, 0.5)  # problem 1 boxes its answer


def test_a_run_cannot_be_resumed_under_another_extraction_policy(shared_data, tmp_path, capsys):
    replay = _replay_file(tmp_path / "g.jsonl", shared_data)
    assert cli.main(_argv(replay, tmp_path / "r", shared_data, "--no-eval.plots_enable")) == 0
    assert cli.main(_argv(replay, tmp_path / "r", shared_data, "--grade.extraction", "boxed")) == 2
    assert "differs in: grading" in capsys.readouterr().err


@pytest.mark.parametrize(
    "env,value", [("LEAD_RECIPES_GRADE_REL_TOL", "0.01"), ("LEAD_RECIPES_GRADE_PROBLEM_PRECISION", "0")]
)
def test_a_run_cannot_be_resumed_under_another_grading_precision(
    shared_data, tmp_path, capsys, monkeypatch, env, value
):
    from lead_recipes.grading.pool import grader as grading

    replay = _replay_file(tmp_path / "g.jsonl", shared_data)
    monkeypatch.setattr(grading, "_SHARED", None)
    assert cli.main(_argv(replay, tmp_path / "r", shared_data, "--no-eval.plots_enable")) == 0
    grading.get_grader().close()
    monkeypatch.setenv(env, value)
    assert cli.main(_argv(replay, tmp_path / "r", shared_data, "--no-eval.plots_enable")) == 2
    assert "differs in: grading" in capsys.readouterr().err
    grading.get_grader().close()


def test_data_and_eval_share_one_benchmarks_dir_flag_and_variable(monkeypatch):
    from lead_recipes import data

    build = ["build", "--data.preset", "math-l35", "--input", "s.jsonl", "--output", "o.jsonl"]
    run = ["--eval.backend", "replay", "--output", "o"]
    for flag in ("--data.benchmarks_dir", None):
        if flag is None:
            monkeypatch.setenv("LEAD_RECIPES_BENCHMARKS_DIR", "D")
        extra = [flag, "D"] if flag else []
        assert data.build_parser().parse_args(build + extra).benchmarks_dir == "D"
        assert vars(cli.build_parser().parse_args(run + extra))["data.benchmarks_dir"] == "D"


def test_data_benchmarks_in_the_working_directory_is_the_default_offline(shared_data, tmp_path, monkeypatch, capsys):
    """Without --data.benchmarks_dir, ./data/benchmarks (where `lead-recipes data` looks too) is the default when it
    exists, so docs/evaluation.md's commands run offline."""
    from lead_recipes import data

    replay = _replay_file(tmp_path / "g.jsonl", shared_data)
    monkeypatch.delenv("LEAD_RECIPES_BENCHMARKS_DIR", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    assert (
        vars(cli.build_parser().parse_args(["--eval.backend", "replay", "--output", "o"]))["data.benchmarks_dir"]
        is None
    )
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "benchmarks").symlink_to(shared_data / "benchmarks")
    build = ["build", "--data.preset", "jsonl", "--input", "s.jsonl", "--output", "o.jsonl"]
    assert data.build_parser().parse_args(build).benchmarks_dir == os.path.join("data", "benchmarks")
    argv = ["--eval.backend", "replay", "--replay.path", str(replay), "--output", "r", "--limit", "2"]
    assert cli.main([*argv, "--no-eval.progress_enable", "--no-eval.plots_enable"]) == 0, capsys.readouterr().err


def test_a_vllm_model_path_that_does_not_exist_is_one_line_naming_it(shared_data, tmp_path, capsys):
    """A checkpoint path that does not exist never reaches transformers as a hub id (a traceback ending in `Repo id
    must be in the form 'repo_name' or 'namespace/repo_name'`)."""
    model = str(tmp_path / "runs" / "lead-1.5b" / "ckpt" / "global_step200_hf")
    argv = ["--eval.backend", "vllm", "--eval.model", model, "--output", str(tmp_path / "r"), "--limit", "1"]
    assert cli.main([*argv, "--data.benchmarks_dir", str(shared_data / "benchmarks")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"lead-recipes eval: error: --eval.model {model}: no such model directory"]


def test_the_chat_template_stays_the_presets_unless_a_flag_sets_it():
    # None = not given: the preset's value (on), or what a replay file recorded; either flag is an explicit value
    base = ["--eval.backend", "replay", "--output", "o"]
    parse = cli.build_parser().parse_args
    assert parse(base).chat_template_enable is None
    assert parse(base + ["--no-prompt.chat_template_enable"]).chat_template_enable is False
    assert parse(base + ["--prompt.chat_template_enable"]).chat_template_enable is True


def _fake_rows(requests):
    return [
        {
            "benchmark": r.benchmark,
            "id": r.id,
            "sample": r.sample,
            "response": "So \\boxed{1}.",
            "num_tokens": 3,
            "truncated": False,
            "finish_reason": "stop",
        }
        for r in requests
    ]


def test_resuming_a_finished_vllm_run_neither_starts_the_engine_nor_generates(shared_data, tiny_qwen2, tmp_path):
    """Nothing left to generate: the prompts are rendered with the model's tokenizer, not the engine's."""
    from evaluation.backends import VLLMBackend
    from evaluation.run import run_eval
    from lead_recipes.benchmarks import load_benchmarks

    class NoEngine(VLLMBackend):
        generated: list = []

        @property
        def llm(self):
            raise AssertionError("the vLLM engine was started")

        def generate(self, requests, gen, sink):
            self.generated.append(len(requests))
            sink(_fake_rows(requests))

    gen = protocols.resolve("sober", n=2, max_new_tokens=8)
    benchmarks = load_benchmarks(["aime2024"], shared_data / "benchmarks", limit=2)
    first = run_eval(gen, benchmarks, NoEngine(str(tiny_qwen2)), tmp_path / "run", progress=False, plots=False)
    again = run_eval(gen, benchmarks, NoEngine(str(tiny_qwen2)), tmp_path / "run", progress=False, plots=False)
    assert NoEngine.generated == [4] and again["config"]["resumed"] is True
    assert again["benchmarks"] == first["benchmarks"]


def test_data_parallel_engines_are_not_started_for_no_requests():
    from evaluation.vllm_dp import DataParallelVLLM

    dp = DataParallelVLLM("no-such-model", 2, gpus=[])
    rows: list = []
    dp.generate([], protocols.resolve("sober"), rows.extend)
    assert rows == [] and dp._procs == []


def test_a_grading_failure_stops_a_backend_that_keeps_generating(shared_data, tmp_path):
    """The writer thread's error reaches the generating thread through the sink, which stops the backend."""
    from evaluation.run import run_eval
    from lead_recipes.benchmarks import load_benchmarks

    class Endless:
        name, prompt_mode, calls = "fake", "none", 0

        def info(self):
            return {"backend": self.name}

        def generate(self, requests, gen, sink):
            for i in range(10**6):
                self.calls += 1
                sink(_fake_rows([requests[i % len(requests)]]))
                time.sleep(0.001)

    class BrokenScorer:
        def score_rows(self, rows):
            raise OSError("disk full")

    backend = Endless()
    with pytest.raises(OSError, match="disk full"):
        run_eval(
            protocols.resolve("sober", n=2),
            load_benchmarks(["aime2024"], shared_data / "benchmarks", limit=1),
            backend,
            tmp_path / "run",
            scorer=BrokenScorer(),
            progress=False,
            plots=False,
        )
    assert backend.calls < 10**6
    assert store.read_samples(tmp_path / "run" / "samples.jsonl") == []


def test_an_empty_benchmark_is_refused_before_anything_is_written(tmp_path, capsys):
    (tmp_path / "toy.jsonl").write_text("")
    rc = cli.main(
        [
            "--eval.backend",
            "openai",
            "--eval.model",
            "m",
            "--openai.base_url",
            "http://127.0.0.1:9",
            "--data.benchmarks",
            f"toy={tmp_path / 'toy.jsonl'}",
            "--output",
            str(tmp_path / "run"),
            "--no-eval.progress_enable",
            "--no-eval.plots_enable",
        ]
    )
    assert rc == 2 and "toy has no problems" in capsys.readouterr().err
    assert not (tmp_path / "run" / "config.json").exists()


def test_a_key_a_backend_reports_twice_is_written_once(shared_data, tmp_path):
    from evaluation.run import run_eval
    from lead_recipes.benchmarks import load_benchmarks

    class Twice:
        name, prompt_mode = "fake", "none"

        def info(self):
            return {"backend": self.name}

        def generate(self, requests, gen, sink):
            sink(_fake_rows(requests) + _fake_rows(requests[:1]))  # one batch, the first key twice
            sink(_fake_rows(requests[:1]))  # and once more later

    run_eval(
        protocols.resolve("sober", n=3),
        load_benchmarks(["aime2024"], shared_data / "benchmarks", limit=1),
        Twice(),
        tmp_path / "run",
        progress=False,
        plots=False,
    )
    lines = (tmp_path / "run" / "samples.jsonl").read_text().splitlines()
    assert len(lines) == len({store.sample_key(json.loads(line)) for line in lines}) == 3


def test_replay_of_a_file_without_its_cap_records_plots_and_applies_no_cap(shared_data, tmp_path):
    """docs/evaluation.md: a setting the file does not carry is unknown. The cap is one: not the preset's 32768 in
    the record, the report or the plot, and no sample is clamped to it (or called truncated by it)."""
    replay = _replay_file(tmp_path / "g.jsonl", shared_data, extra=lambda s: {"num_tokens": 40000 + s})
    assert cli.main(_argv(replay, tmp_path / "r", shared_data)) == 0
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    gen = summary["config"]["generation"]
    assert gen["max_new_tokens"] == "unknown" and "max_new_tokens" in gen["unknown"]
    rows = store.read_samples(tmp_path / "r" / "samples.jsonl")
    assert sorted({r["num_tokens"] for r in rows}) == [40000, 40001, 40002]
    assert {r["truncated"] for r in rows} == {None}
    assert {m["truncation_rate"] for m in summary["benchmarks"].values()} == {None}
    text = (tmp_path / "r" / "report.md").read_text()
    assert "max new tokens **unknown**" in text and "32768" not in text
    drawn = plots.plot_run(summary, rows, tmp_path / "again.png")
    assert (drawn["cap"], drawn["cap_line"], drawn["histogram_total"]) == (None, False, len(rows))


@pytest.mark.parametrize("where", ["file", "flag"])
def test_replay_takes_its_cap_from_the_file_or_the_flag(shared_data, tmp_path, where):
    extra = (lambda s: {"max_new_tokens": 8192, "num_tokens": 8192}) if where == "file" else None
    replay = _replay_file(tmp_path / "g.jsonl", shared_data, extra=extra)
    flags = ("--sampling.max_new_tokens", "8192") if where == "flag" else ()
    assert cli.main(_argv(replay, tmp_path / "r", shared_data, *flags)) == 0
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["config"]["generation"]["max_new_tokens"] == 8192
    assert "max_new_tokens" not in summary["config"]["generation"]["unknown"]
    rows = store.read_samples(tmp_path / "r" / "samples.jsonl")
    drawn = plots.plot_run(summary, rows, tmp_path / "again.png")
    if where == "file":  # every sample stopped at the cap: truncated, as the file's cap says, and drawn at it
        assert {m["truncation_rate"] for m in summary["benchmarks"].values()} == {1.0}
        assert (drawn["cap"], drawn["cap_line"], drawn["histogram_truncated"]) == (8192, True, len(rows))
    else:  # samples of 10-24 tokens: the cap is named, not drawn 8,000 tokens away from them
        assert (drawn["cap"], drawn["cap_line"], drawn["histogram_truncated"]) == (8192, False, 0)


def test_a_file_with_the_first_problems_only_names_limit_and_leaves_no_run_directory(shared_data, tmp_path, capsys):
    replay = _replay_file(tmp_path / "g.jsonl", shared_data, k=2)
    argv = [a for a in _argv(replay, tmp_path / "r", shared_data) if a not in ("--limit", "2")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "aime2024: 2 of 30 problems" in err and "math500: 2 of 500 problems" in err and "--limit 2" in err, err
    assert not (tmp_path / "r").exists()
    assert cli.main(argv + ["--limit", "2", "--no-eval.plots_enable"]) == 0


def test_compare_says_where_it_wrote_its_files(shared_data, tmp_path, capsys):
    replay = _replay_file(tmp_path / "g.jsonl", shared_data)
    assert cli.main(_argv(replay, tmp_path / "run1", shared_data, "--no-eval.plots_enable")) == 0
    capsys.readouterr()
    assert cli.main(["compare", str(tmp_path / "run1"), "--output", str(tmp_path / "cmp")]) == 0
    out = capsys.readouterr().out
    written = sorted(p.name for p in (tmp_path / "cmp").iterdir())
    assert written and f"wrote {', '.join(written)} to {tmp_path / 'cmp'}" in out, out


def test_the_report_explains_the_budget_sweeps_mode(shared_data, tmp_path):
    replay = _replay_file(tmp_path / "g.jsonl", shared_data)
    assert (
        cli.main(_argv(replay, tmp_path / "r", shared_data, "--eval.budgets", "12,20", "--no-eval.plots_enable")) == 0
    )
    text = (tmp_path / "r" / "report.md").read_text()
    assert "mode `cap`" in text and "counts as wrong" in text and "--eval.tokenizer" in text


def _drawn(monkeypatch, name: str) -> list:
    """Calls the real report.<name> and keeps what it returns (what the figure shows)."""
    seen, draw = [], getattr(report, name)
    monkeypatch.setattr(report, name, lambda *a, **k: seen.append(draw(*a, **k)))
    return seen


def test_budget_curves_are_labelled_by_the_model_not_the_directory(shared_data, tmp_path, monkeypatch):
    seen = _drawn(monkeypatch, "plot_budgets")
    replay = _replay_file(tmp_path / "g.jsonl", shared_data)
    argv = _argv(replay, tmp_path / "run-dir", shared_data, "--eval.model", "org/m", "--eval.budgets", "12,20")
    assert cli.main(argv) == 0
    assert "org/m average" in seen[-1]["labels"] and not any("run-dir" in x for x in seen[-1]["labels"])


def test_frontier_keeps_two_identical_runs_visible_and_names_the_benchmark_markers(shared_data, tmp_path, monkeypatch):
    replay = _replay_file(tmp_path / "g.jsonl", shared_data)
    for folder in ("run1", "run2"):
        argv = _argv(replay, tmp_path / folder, shared_data, "--eval.model", "m", "--eval.budgets", "12,20")
        assert cli.main(argv + ["--no-eval.plots_enable"]) == 0
    frontier, budgets = _drawn(monkeypatch, "plot_frontier"), _drawn(monkeypatch, "plot_budgets")
    assert cli.main(["compare", str(tmp_path / "run1"), str(tmp_path / "run2"), "--output", str(tmp_path / "c")]) == 0
    for drawn in (frontier[-1], budgets[-1]):
        first, second = (next(x for x in drawn["labels"] if x.startswith(f"m ({r})")) for r in ("run1", "run2"))
        assert "same" in second and "m (run1)" in second and drawn["sizes"][second] < drawn["sizes"][first], drawn
    assert {"aime2024", "math500"} <= {x.split()[0] for x in frontier[-1]["labels"]}


@pytest.mark.parametrize("cap", [None, 16])
def test_budgets_the_sweep_cannot_answer_are_named_not_silently_dropped(shared_data, tmp_path, capsys, cap):
    """`--eval.budgets 12,20,1024` on a replay of 10-24-token samples: the budgets above the cap (or, the cap unknown,
    above the longest sample) are named as left out, so `--eval.budgets 1024,2048` is no silently empty table."""
    replay = _replay_file(tmp_path / "g.jsonl", shared_data)
    flags = ("--sampling.max_new_tokens", str(cap)) if cap else ()
    argv = _argv(replay, tmp_path / "r", shared_data, "--eval.budgets", "12,20,1024", "--no-eval.plots_enable", *flags)
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    sweep = json.loads((tmp_path / "r" / "summary.json").read_text())["budget_sweep"]
    kept, limit = (["12"], 16) if cap else (["12", "20"], 24)
    assert list(sweep["budgets"]) == kept
    dropped = [int(b) for b in ("20", "1024") if b not in kept]
    assert sweep["left_out"] == {"budgets": dropped, "above": limit, "limit": "cap" if cap else "longest sample"}
    said = (tmp_path / "r" / "report.md").read_text().split("## Token-budget sweep")[1].split("## Configuration")[0]
    for text in (said, err):
        assert f"above {limit}" in text and "1024" in text, text
        assert ("the cap" if cap else "the longest sample") in text, text


def test_compare_refuses_an_aes_over_different_benchmarks_and_says_why(shared_data, tmp_path, capsys):
    """The run and the base cover different benchmarks: no headline AES, and the reason stands in the printed table
    and compare.md, not only in compare.json."""
    replay = _replay_file(tmp_path / "g.jsonl", shared_data)
    assert cli.main(_argv(replay, tmp_path / "run", shared_data, "--no-eval.plots_enable")) == 0
    only = ("--data.benchmarks", "aime2024", "--no-eval.plots_enable")
    assert cli.main(_argv(replay, tmp_path / "base", shared_data, *only)) == 0
    capsys.readouterr()
    argv = ["compare", str(tmp_path / "run"), "--eval.base", str(tmp_path / "base"), "--output", str(tmp_path / "c")]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    for text in (out, (tmp_path / "c" / "compare.md").read_text()):
        assert "run: AES undefined: not comparable: runs cover different benchmarks" in text, text
    assert json.loads((tmp_path / "c" / "compare.json").read_text())["aes"]["run"]["overall"]["aes"] is None


def test_the_run_plot_title_names_the_backend_when_no_model_was_given(shared_data, tmp_path, monkeypatch):
    """A replay without --eval.model titles its plot with the backend, never an empty name before `— preset …`; its
    preset, not given, is unknown."""
    from matplotlib.figure import Figure

    titles, suptitle = [], Figure.suptitle
    monkeypatch.setattr(Figure, "suptitle", lambda self, t, **k: titles.append(t) or suptitle(self, t, **k))
    replay = _replay_file(tmp_path / "g.jsonl", shared_data)
    assert cli.main(_argv(replay, tmp_path / "r", shared_data)) == 0
    assert titles == ["replay — preset unknown"]
