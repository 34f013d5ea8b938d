"""OpenAI-compatible backend against a real aiohttp server on 127.0.0.1 (chat and completions endpoints, retries,
fast 4xx failure), and resume after SIGKILL of a real `python -m evaluation.cli` subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from aiohttp import web

from evaluation import cli, store

ROOT = Path(__file__).resolve().parents[2]


class FakeLLMServer:
    """Deterministic fake model. Problem "Problem k: ..." has gold k+1. Sample seed s: s%4==0 correct, ==1 correct
    in another form (\\frac{2(k+1)}{2}), ==2 wrong, ==3 truncated (finish_reason "length", no answer)."""

    def __init__(
        self, delay_s: float = 0.0, fail_first: int = 0, reject_problem: int | None = None, hold: tuple | None = None
    ):
        self.delay_s, self.fail_first, self.reject_problem = delay_s, fail_first, reject_problem
        self.hold = hold  # (problem, seed) answered only after release()
        self.bodies: list[dict] = []
        self.attempts: dict[tuple, int] = {}
        self.loop = asyncio.new_event_loop()
        self.port = None
        self.in_flight = self.max_in_flight = 0
        self._released = asyncio.Event()

    def release(self) -> None:
        self.loop.call_soon_threadsafe(self._released.set)

    def _text(self, k: int, s: int, prompt: str) -> tuple[str, str]:
        think = "<think>" + " ".join(["step"] * (5 + s)) + "</think>"
        if s % 4 == 3:
            return think[:-8] + " still thinking", "length"
        ans = [str(k + 1), f"\\frac{{{2 * (k + 1)}}}{{2}}", "-1"][s % 4]
        return f"{think} The answer is $\\boxed{{{ans}}}$.", "stop"

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.bodies.append(body)
        prompt = body["messages"][-1]["content"] if "messages" in body else body["prompt"]
        k, s = int(re.search(r"Problem (\d+)", prompt).group(1)), int(body["seed"])
        key = (k, s)
        self.attempts[key] = self.attempts.get(key, 0) + 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay_s)
            if key == self.hold:
                await self._released.wait()
        finally:
            self.in_flight -= 1
        if k == self.reject_problem:
            return web.json_response({"error": "prompt too long"}, status=400)
        if self.attempts[key] <= self.fail_first:
            return web.json_response({"error": "overloaded"}, status=503)
        text, reason = self._text(k, s, prompt)
        tokens = body["max_tokens"] if reason == "length" else len(text.split())
        choice = {"index": 0, "finish_reason": reason}
        if "messages" in body:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        return web.json_response({"choices": [choice], "usage": {"completion_tokens": tokens}})

    def __enter__(self):
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.handle)
        app.router.add_post("/v1/completions", self.handle)
        ready = threading.Event()

        def serve():
            asyncio.set_event_loop(self.loop)
            self.runner = web.AppRunner(app)
            self.loop.run_until_complete(self.runner.setup())
            site = web.TCPSite(self.runner, "127.0.0.1", 0)
            self.loop.run_until_complete(site.start())
            self.port = site._server.sockets[0].getsockname()[1]
            ready.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()
        assert ready.wait(10)
        return self

    def __exit__(self, *exc):
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def make_bench(path: Path, count: int) -> Path:
    path.write_text(
        "".join(
            json.dumps({"id": f"p{k}", "problem": f"Problem {k}: what is {k} + 1?", "answer": str(k + 1)}) + "\n"
            for k in range(count)
        )
    )
    return path


def argv_for(server, bench: Path, out: Path, n: int, *extra: str) -> list[str]:
    return [
        "--eval.backend",
        "openai",
        "--eval.model",
        "fake",
        "--openai.base_url",
        server.url,
        "--data.benchmarks",
        f"toy={bench}",
        "--sampling.n",
        str(n),
        "--sampling.max_new_tokens",
        "64",
        "--output",
        str(out),
        "--no-eval.progress_enable",
        "--no-eval.plots_enable",
        *extra,
    ]


@pytest.mark.timeout(120)
def test_chat_endpoint_end_to_end_metrics_follow_the_served_answers(tmp_path):
    with FakeLLMServer() as srv:
        assert cli.main(argv_for(srv, make_bench(tmp_path / "toy.jsonl", 5), tmp_path / "run", 4)) == 0
    s = json.loads((tmp_path / "run" / "summary.json").read_text())["benchmarks"]["toy"]
    assert s["accuracy"] == 0.5  # s%4 in {0, 1} correct, including the \frac form
    assert s["truncation_rate"] == 0.25 and s["no_answer_rate"] == 0.25
    assert s["cons_at_k"]["4"] == 1.0  # two correct votes vs one wrong; truncated does not vote
    rows = store.read_samples(tmp_path / "run" / "samples.jsonl")
    assert all(r["num_tokens"] == 64 for r in rows if r["truncated"])
    assert sorted(b["seed"] for b in srv.bodies) == sorted(list(range(4)) * 5)
    assert {(b["temperature"], b["top_p"], b["max_tokens"]) for b in srv.bodies} == {(0.8, 0.9, 64)}
    assert "Solve the following math problem" in srv.bodies[0]["messages"][0]["content"]


@pytest.mark.timeout(120)
def test_transient_503_is_retried_until_success(tmp_path):
    with FakeLLMServer(fail_first=2) as srv:
        assert cli.main(argv_for(srv, make_bench(tmp_path / "toy.jsonl", 2), tmp_path / "run", 2)) == 0
    assert set(srv.attempts.values()) == {3}
    assert len(store.read_samples(tmp_path / "run" / "samples.jsonl")) == 4


@pytest.mark.timeout(120)
def test_client_error_fails_fast_and_keeps_finished_samples(tmp_path, capsys):
    with FakeLLMServer(reject_problem=1) as srv:
        rc = cli.main(
            argv_for(srv, make_bench(tmp_path / "toy.jsonl", 3), tmp_path / "run", 2, "--openai.concurrency", "1")
        )
    assert rc == 2 and "answered 400" in capsys.readouterr().err
    assert all(v == 1 for v in srv.attempts.values())  # 400 is not retried
    kept = {r["id"] for r in store.read_samples(tmp_path / "run" / "samples.jsonl")}
    assert "p1" not in kept and "p0" in kept


@pytest.mark.timeout(120)
def test_completions_endpoint_sends_the_raw_template_without_chat_template(tmp_path):
    with FakeLLMServer() as srv:
        assert (
            cli.main(
                argv_for(
                    srv,
                    make_bench(tmp_path / "toy.jsonl", 1),
                    tmp_path / "run",
                    1,
                    "--openai.endpoint",
                    "completions",
                    "--no-prompt.chat_template_enable",
                    "--eval.preset",
                    "grpo-lead-14b",
                )
            )
            == 0
        )
    assert srv.bodies[0]["prompt"] == (
        "Problem 0: what is 0 + 1? Let's think step by step and output the final answer within \\boxed{}."
    )
    assert srv.bodies[0]["temperature"] == 0.6


@pytest.mark.timeout(180)
def test_resume_after_sigkill_regenerates_only_what_was_not_on_disk(tmp_path):
    """SIGKILL mid-run, then the same command: the rerun asks the server for exactly the samples that were not on
    disk at the kill, each once (none on disk again; of the killed run's requests, only the unanswered or unwritten
    ones), loses and duplicates nothing, and leaves the earlier rows untouched. The server counts the requests."""
    from collections import Counter

    bench, out = make_bench(tmp_path / "toy.jsonl", 12), tmp_path / "run"
    with FakeLLMServer(delay_s=0.05) as srv:
        argv = argv_for(srv, bench, out, 6, "--openai.concurrency", "2")
        cmd = [sys.executable, "-m", "evaluation.cli", *argv]
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        samples = out / "samples.jsonl"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not samples.exists() or samples.read_bytes().count(b"\n") < 16):
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        before = store.read_samples(samples)
        assert 16 <= len(before) < 72, "the kill must land mid-run"
        time.sleep(1.0)  # requests the killed client sent reach the handler before the rerun starts
        while srv.in_flight:
            time.sleep(0.05)
        asked = len(srv.bodies)
        res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr[-2000:]

    def key(body: dict) -> tuple:
        problem = re.search(r"Problem (\d+)", body["messages"][-1]["content"]).group(1)
        return ("toy", f"p{problem}", body["seed"])

    durable = {store.sample_key(r) for r in before}
    started = {key(b) for b in srv.bodies[:asked]}
    generated = Counter(key(b) for b in srv.bodies[asked:])
    wanted = {("toy", f"p{k}", s) for k in range(12) for s in range(6)}
    assert durable <= started and set(generated) == wanted - durable and max(generated.values()) == 1
    assert set(generated) & started == started - durable
    print(
        f"durable at the kill {len(durable)}, asked by the killed run {len(started)}, regenerated "
        f"{len(started - durable)}"
    )
    lines = samples.read_text().splitlines()
    keys = [store.sample_key(json.loads(l)) for l in lines]
    assert len(keys) == len(set(keys)) == 72
    assert lines[: len(before)] == [json.dumps(r, ensure_ascii=False) for r in before]  # earlier samples untouched
    assert json.loads((out / "summary.json").read_text())["benchmarks"]["toy"]["accuracy"] == pytest.approx(
        4 / 6
    )  # seeds 0,1,4,5 correct


@pytest.mark.timeout(120)
def test_each_finished_sample_is_on_disk_while_a_slow_one_is_still_generating(tmp_path):
    """One request held by the server: the other 7 samples reach samples.jsonl (fsync'd) before it is answered."""
    bench, out = make_bench(tmp_path / "toy.jsonl", 2), tmp_path / "run"
    with FakeLLMServer(hold=(0, 0)) as srv:
        argv = argv_for(srv, bench, out, 4, "--openai.concurrency", "3")
        box: dict = {}
        thread = threading.Thread(target=lambda: box.update(rc=cli.main(argv)))
        thread.start()
        samples, deadline = out / "samples.jsonl", time.monotonic() + 60
        while time.monotonic() < deadline and (not samples.exists() or samples.read_bytes().count(b"\n") < 7):
            time.sleep(0.02)
        written = store.read_samples(samples)
        srv.release()
        thread.join(60)
    assert sorted((r["id"], r["sample"]) for r in written) == [
        ("p0", 1),
        ("p0", 2),
        ("p0", 3),
        ("p1", 0),
        ("p1", 1),
        ("p1", 2),
        ("p1", 3),
    ]
    assert box["rc"] == 0 and len(store.read_samples(samples)) == 8


@pytest.mark.timeout(120)
def test_a_second_run_of_a_directory_is_refused_while_the_first_is_writing_it(tmp_path):
    """The same command started twice (two submissions, a requeued job whose first copy still runs): the second
    is refused naming the directory and asks the server for nothing, so no sample is generated or written twice;
    the first finishes with every sample once."""
    bench, out = make_bench(tmp_path / "toy.jsonl", 2), tmp_path / "run"
    with FakeLLMServer(hold=(0, 0)) as srv:
        cmd = [sys.executable, "-m", "evaluation.cli", *argv_for(srv, bench, out, 4, "--openai.concurrency", "3")]
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        first = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        samples, deadline = out / "samples.jsonl", time.monotonic() + 60
        while time.monotonic() < deadline and (not samples.exists() or samples.read_bytes().count(b"\n") < 7):
            time.sleep(0.02)
        asked = len(srv.bodies)
        try:
            second = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=30)
        finally:
            srv.release()
            first_rc = first.wait(60)
        assert second.returncode == 2 and str(out) in second.stderr and "another run" in second.stderr
        assert len(srv.bodies) == asked and first_rc == 0
    keys = [store.sample_key(json.loads(line)) for line in samples.read_text().splitlines()]
    assert len(keys) == len(set(keys)) == 8


@pytest.mark.timeout(120)
def test_the_server_holds_exactly_the_concurrency_in_flight(tmp_path):
    with FakeLLMServer(delay_s=0.05) as srv:
        assert (
            cli.main(
                argv_for(srv, make_bench(tmp_path / "toy.jsonl", 6), tmp_path / "run", 4, "--openai.concurrency", "5")
            )
            == 0
        )
    assert srv.max_in_flight == 5 and len(srv.bodies) == 24


@pytest.mark.timeout(120)
def test_a_concurrency_above_the_http_clients_default_pool_reaches_the_server(tmp_path):
    """aiohttp's default connector opens at most 100 connections; a `vllm serve` with max_num_seqs 1024 needs more
    requests than that in flight to stay busy, so --openai.concurrency 160 must put 160 on the server."""
    with FakeLLMServer(delay_s=1.0) as srv:
        argv = argv_for(srv, make_bench(tmp_path / "toy.jsonl", 40), tmp_path / "run", 4, "--openai.concurrency", "160")
        assert cli.main(argv) == 0
    assert srv.max_in_flight == 160 and len(srv.bodies) == 160


@pytest.mark.timeout(60)
@pytest.mark.parametrize("flag", ["--openai.concurrency", "--openai.retries"])
def test_a_concurrency_or_retry_count_below_its_minimum_is_refused_naming_the_flag(tmp_path, capsys, flag):
    with FakeLLMServer() as srv:
        rc = cli.main(
            argv_for(
                srv,
                make_bench(tmp_path / "toy.jsonl", 1),
                tmp_path / "run",
                1,
                flag,
                "0" if flag.endswith("concurrency") else "-1",
            )
        )
    assert rc == 2 and flag in capsys.readouterr().err and not srv.bodies


def test_openai_backend_with_no_requests_returns_without_a_server():
    from evaluation.backends import OpenAIBackend
    from evaluation.protocols import resolve

    rows: list = []
    OpenAIBackend("http://127.0.0.1:9", "m").generate([], resolve("sober"), rows.extend)  # nothing listens on 9
    assert rows == []


def test_cli_vllm_flags_reach_the_engine_arguments():
    from evaluation.protocols import resolve

    args = cli.build_parser().parse_args(
        [
            "--eval.backend",
            "vllm",
            "--eval.model",
            "m",
            "--output",
            "o",
            "--seed",
            "7",
            "--vllm.dtype",
            "bfloat16",
            "--vllm.tensor_parallel_size",
            "2",
            "--vllm.max_model_len",
            "40000",
            "--vllm.enforce_eager_enable",
            "--vllm.data_parallel_size",
            "1",
        ]
    )
    backend = cli.make_backend(args, resolve("sober", seed=args.seed), None)
    assert backend._llm is None  # nothing is loaded before the run starts
    assert backend.engine_args == {
        "model": "m",
        "dtype": "bfloat16",
        "tensor_parallel_size": 2,
        "max_model_len": 40000,
        "enforce_eager": True,
        "seed": 7,
        "gpu_memory_utilization": None,
    }
    assert backend.max_num_seqs is None  # vLLM's own default unless given


def test_max_num_seqs_reaches_the_engine_but_not_the_run_identity_so_a_run_resumes_with_another(monkeypatch):
    from evaluation.protocols import resolve

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    flags = ["--eval.backend", "vllm", "--eval.model", "m", "--output", "o"]
    parse = cli.build_parser().parse_args
    plain = cli.make_backend(parse(flags), resolve("sober"), None)
    small = cli.make_backend(parse(flags + ["--vllm.max_num_seqs", "8"]), resolve("sober"), None)
    two = cli.make_backend(
        parse(flags + ["--vllm.max_num_seqs", "8", "--vllm.data_parallel_size", "2"]), resolve("sober"), None
    )
    assert small.max_num_seqs == 8 and two.engine["max_num_seqs"] == 8
    assert plain.info() == small.info() == two.info()
    with pytest.raises(ValueError, match="--vllm.max_num_seqs must be >= 1"):
        cli.make_backend(parse(flags + ["--vllm.max_num_seqs", "0"]), resolve("sober"), None)


def test_data_parallel_engines_keep_the_single_engine_identity_so_runs_resume_across_sizes(monkeypatch):
    from evaluation.protocols import resolve

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # CPU engines here, whatever the machine has
    from evaluation.vllm_dp import DataParallelVLLM

    flags = ["--eval.backend", "vllm", "--eval.model", "m", "--output", "o", "--seed", "7", "--vllm.dtype", "bfloat16"]
    one = cli.make_backend(
        cli.build_parser().parse_args(flags + ["--vllm.data_parallel_size", "1"]), resolve("sober", seed=7), None
    )
    two = cli.make_backend(
        cli.build_parser().parse_args(flags + ["--vllm.data_parallel_size", "2"]), resolve("sober", seed=7), None
    )
    assert isinstance(two, DataParallelVLLM) and two.size == 2 and not two._procs  # no engine started yet
    assert two.info() == one.info()


class L1FakeServer(FakeLLMServer):
    """A fake L1 model: asked for N tokens ("Think for [maximum] N tokens." ending the prompt) it writes N/2 words and
    answers correctly only when N ≤ 32."""

    def _text(self, k: int, s: int, prompt: str) -> tuple[str, str]:
        n = int(re.search(r" Think for (?:maximum )?(\d+) tokens\.$", prompt).group(1))
        ans = k + 1 if n <= 32 else -1
        return " ".join(["w"] * (n // 2 - 1)) + f" \\boxed{{{ans}}}", "stop"


@pytest.mark.timeout(120)
def test_l1_budget_sweep_generates_every_budget_with_its_own_prompt_and_resumes(tmp_path):
    bench, out = make_bench(tmp_path / "toy.jsonl", 5), tmp_path / "run"
    with L1FakeServer() as srv:
        argv = argv_for(srv, bench, out, 2, "--prompt.l1_budget", "32", "--eval.budgets", "48,16,32")
        assert cli.main(argv) == 0
        asked = [int(re.search(r"(\d+) tokens\.$", b["messages"][-1]["content"]).group(1)) for b in srv.bodies]
        assert sorted(asked) == [16] * 10 + [32] * 10 + [48] * 10  # each budget generated once, 5 problems x 2
        assert cli.main(argv) == 0 and len(srv.bodies) == 30  # the rerun resumes all three runs
    summary = json.loads((out / "summary.json").read_text())
    sweep = summary["budget_sweep"]
    assert sweep["mode"] == "l1_prompt" and sweep["l1_mode"] == "exact" and list(sweep["budgets"]) == ["16", "32", "48"]
    for b, acc in ((16, 1.0), (32, 1.0), (48, 0.0)):
        toy = sweep["budgets"][str(b)]["benchmarks"]["toy"]
        rows = store.read_samples(out / ("samples.jsonl" if b == 32 else f"l1-budget-{b}/samples.jsonl"))
        assert toy["accuracy"] == acc and len(rows) == 10
        assert toy["mean_abs_deviation"] == pytest.approx(sum(abs(r["num_tokens"] - b) for r in rows) / 10)
        assert toy["mean_length"] == pytest.approx(sum(r["num_tokens"] for r in rows) / 10) != b
    assert summary["config"]["generation"]["l1_budget"] == 32 and summary["benchmarks"]["toy"]["accuracy"] == 1.0
    assert "avg abs(length - budget)" in (out / "report.md").read_text()


@pytest.mark.timeout(120)
def test_l1_max_prompts_ask_for_at_most_the_budget(tmp_path):
    with L1FakeServer() as srv:
        argv = argv_for(srv, make_bench(tmp_path / "toy.jsonl", 2), tmp_path / "run", 1)
        assert cli.main([*argv, "--prompt.l1_budget", "20", "--prompt.l1_mode", "max"]) == 0
    assert len(srv.bodies) == 2
    assert all(b["messages"][-1]["content"].endswith("+ 1? Think for maximum 20 tokens.") for b in srv.bodies)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--prompt.l1_mode", "max"], "an L1 prompt needs a budget"),
        (["--prompt.l1_budget", "100"], "asks for more tokens than max new tokens 64"),
        (["--prompt.l1_budget", "32", "--eval.budgets", "16,100"], "cannot ask for more than max new tokens 64"),
    ],
)
def test_l1_prompts_that_cannot_be_honoured_are_refused_before_generating(tmp_path, capsys, extra, message):
    with FakeLLMServer() as srv:
        assert cli.main(argv_for(srv, make_bench(tmp_path / "toy.jsonl", 2), tmp_path / "run", 1, *extra)) == 2
    assert message in capsys.readouterr().err and srv.bodies == []
