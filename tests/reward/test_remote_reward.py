"""lead_recipes/reward/remote_reward.py: OpenRLHF's reward_func contract, fail-over between servers without waiting,
bounded exponential backoff, errors as reward 0 (never an exception or None) and, against a real `lead-recipes serve`
killed and restarted mid-stream, every sample graded exactly once and nothing lost."""

from __future__ import annotations

import http.server
import importlib.util
import itertools
import json
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support.ports import free_port
from support.reward_server import TOKEN, start_counting_server, start_serve

from lead_recipes.reward import remote_reward as rr
from lead_recipes.reward.logs import REWARD_LOG_KEYS

ROOT = Path(__file__).resolve().parents[2]


class _Handler(http.server.BaseHTTPRequestHandler):
    status = 200
    hits: list[str] = []

    def do_POST(self):  # http.server API
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).hits.append(self.headers.get("Authorization", ""))
        n = len(body["query"])
        out = {
            "rewards": [1.0] * n,
            "scores": [1.0] * n,
            "extra_logs": {k: [1.0 if k in ("correct", "status_correct") else 0.0] * n for k in REWARD_LOG_KEYS},
        }
        data = json.dumps(out if self.status == 200 else {"error": "no"}).encode()
        self.send_response(self.status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # /health
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *a):
        pass


@pytest.fixture
def fake_server():
    servers = []

    def start(status=200):
        handler = type("H", (_Handler,), {"status": status, "hits": []})
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/get_reward", handler

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


@pytest.fixture(autouse=True)
def _no_outage_carried_over():
    """The outage deadline is process-wide: each test starts outside an outage."""

    def clear():
        with rr._outage_lock:
            rr._outage.update(deadline=None, next_probe=0.0)
            rr._warned.clear()
            rr._refused.clear()
            rr._sample_errors.clear()

    clear()
    yield
    clear()


def test_backoff_doubles_from_half_a_second_and_is_capped_at_thirty():
    assert list(itertools.islice(rr.backoff_delays(), 9)) == [0.5, 1, 2, 4, 8, 16, 30, 30, 30]


def test_a_dead_server_fails_over_to_the_next_without_waiting(fake_server, monkeypatch):
    good, handler = fake_server()
    dead = f"http://127.0.0.1:{free_port()}/get_reward"
    monkeypatch.setenv(rr.URLS_ENV, f"{dead},{good}")
    monkeypatch.setattr(rr.time, "sleep", lambda s: pytest.fail("slept although a server was up"))
    for _ in range(4):  # whichever server the rotation starts at
        out = rr.reward_func(["q 2"], ["q "], ["2"])
        assert out["extra_logs"]["status_correct"] == 1.0
    assert len(handler.hits) == 4


def test_outage_beyond_the_wait_budget_gives_reward_zero_with_status_error_not_an_exception(monkeypatch):
    monkeypatch.setenv(rr.URLS_ENV, f"http://127.0.0.1:{free_port()}/get_reward")
    monkeypatch.setenv(rr.WAIT_ENV, "0")
    out = rr.reward_func(["q a"], ["q "], ["2"])
    assert float(out["rewards"][0]) == 0.0 and float(out["scores"][0]) == 0.0
    assert tuple(out["extra_logs"]) == REWARD_LOG_KEYS and out["extra_logs"]["status_error"] == 1.0


def test_backoff_waits_grow_and_stop_at_the_budget():
    clock = {"t": 0.0}
    pauses = []

    def sleep(s):
        pauses.append(s)
        clock["t"] += s

    with pytest.raises(TimeoutError, match="within 60 s"):
        rr.fetch([f"http://127.0.0.1:{free_port()}/x"], b"{}", 1, 60.0, 1.0, sleep=sleep, clock=lambda: clock["t"])
    assert clock["t"] <= 60.0 and len(pauses) >= 4
    caps = [0.5, 1, 2, 4, 8, 16, 30, 30, 30, 30]
    assert all(c / 2 <= p <= c for p, c in zip(pauses, caps))


def test_client_errors_are_not_retried(fake_server, monkeypatch):
    url, handler = fake_server(status=401)
    monkeypatch.setenv(rr.URLS_ENV, url)
    monkeypatch.setattr(rr.time, "sleep", lambda s: pytest.fail("retried a 401"))
    out = rr.reward_func(["q a"], ["q "], ["2"])
    assert out["extra_logs"]["status_error"] == 1.0 and len(handler.hits) == 1


def test_reward_func_contract_as_openrlhf_loads_and_calls_it(fake_server, monkeypatch):
    url, handler = fake_server()
    monkeypatch.setenv(rr.URLS_ENV, url)
    monkeypatch.setenv(rr.TOKEN_ENV, "tok-123")
    spec = importlib.util.spec_from_file_location("reward_func", rr.__file__)  # as OpenRLHF's agent.py does
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = module.reward_func(["prompt answer"], ["prompt "], ["2"])
    assert out["rewards"].shape == (1,) and out["rewards"].dtype.is_floating_point
    assert tuple(out["extra_logs"]) == REWARD_LOG_KEYS
    assert all(isinstance(v, float) for v in out["extra_logs"].values())
    assert handler.hits == ["Bearer tok-123"]


def test_after_one_call_spent_the_outage_wait_later_calls_fail_at_once_until_a_server_answers(fake_server, monkeypatch):
    monkeypatch.setenv(rr.URLS_ENV, f"http://127.0.0.1:{free_port()}/get_reward")
    monkeypatch.setenv(rr.WAIT_ENV, "1")
    assert rr.reward_func(["q a"], ["q "], ["2"])["extra_logs"]["status_error"] == 1.0  # waits out the outage
    posts = []
    real_post = rr.post_once
    monkeypatch.setattr(rr, "post_once", lambda *a: posts.append(a[0]) or real_post(*a))
    monkeypatch.setattr(rr.time, "sleep", lambda s: pytest.fail("waited again in a spent outage"))
    rr._outage["next_probe"] = float("inf")  # no probe in this window, whatever the load
    for _ in range(20):
        assert rr.reward_func(["q a"], ["q "], ["2"])["extra_logs"]["status_error"] == 1.0
    assert posts == []
    good, handler = fake_server()  # a server answers again (the probe finds it): the outage ends
    monkeypatch.setenv(rr.URLS_ENV, good)
    rr._outage["next_probe"] = 0.0
    assert rr.reward_func(["q 2"], ["q "], ["2"])["extra_logs"]["status_correct"] == 1.0
    assert rr._outage["deadline"] is None and len(handler.hits) == 1


def test_calls_during_an_outage_share_one_deadline():
    clock = {"t": 0.0}

    def sleep(s):
        clock["t"] += s

    dead = [f"http://127.0.0.1:{free_port()}/x"]
    clock["t"], rr._outage["deadline"] = 30.0, 60.0  # an outage began 30 s before this call, with a 60 s wait
    with pytest.raises(TimeoutError):
        rr.fetch(dead, b"{}", 1, 60.0, 1.0, sleep=sleep, clock=lambda: clock["t"])
    assert clock["t"] <= 60.0


@pytest.mark.parametrize("status", [401, 422])
def test_a_refusing_server_hands_the_sample_to_the_others(fake_server, monkeypatch, caplog, status):
    bad, bad_handler = fake_server(status=status)
    good, good_handler = fake_server()
    monkeypatch.setenv(rr.URLS_ENV, f"{bad},{good}")
    monkeypatch.setattr(rr.time, "sleep", lambda s: pytest.fail("slept although a server was up"))
    with caplog.at_level("ERROR", logger="lead_recipes.reward.remote_reward"):
        for _ in range(4):  # whichever server the rotation starts at
            assert rr.reward_func(["q 2"], ["q "], ["2"])["extra_logs"]["status_correct"] == 1.0
    assert len(good_handler.hits) == 4 and len(bad_handler.hits) >= 1
    assert len([r for r in caplog.records if "refused" in r.getMessage()]) == 1


def test_a_down_server_is_warned_about_once_per_outage(fake_server, monkeypatch, caplog):
    good, _ = fake_server()
    monkeypatch.setenv(rr.URLS_ENV, f"http://127.0.0.1:{free_port()}/get_reward,{good}")
    with caplog.at_level("WARNING", logger="lead_recipes.reward.remote_reward"):
        for _ in range(6):
            rr.reward_func(["q 2"], ["q "], ["2"])
    assert len([r for r in caplog.records if "did not answer" in r.getMessage()]) == 1


def test_no_configured_server_is_an_error_reward():
    out = rr.reward_func(["q"], ["q"], ["1"])
    assert out["extra_logs"]["status_error"] == 1.0


def test_preflight_probes_every_forwarded_server_directly_and_names_a_dead_one_at_once(fake_server, monkeypatch):
    from lead_recipes.training.preflight import _check_reward

    good, _ = fake_server()
    dead = f"http://127.0.0.1:{free_port()}/get_reward"
    monkeypatch.setenv(rr.URLS_ENV, good)
    assert _check_reward([rr.__file__]).ok
    monkeypatch.setenv(rr.URLS_ENV, f"{good},{dead}")
    t0 = time.monotonic()
    check = _check_reward([rr.__file__])
    assert not check.ok and check.detail.startswith(f"{dead}: probe failed") and time.monotonic() - t0 < 30
    monkeypatch.setenv(rr.URLS_ENV, "")
    assert "LEAD_RECIPES_REWARD_URLS, which is empty" in _check_reward([rr.__file__]).detail


# ------------------------------------------------------------------ a real `lead-recipes serve`, restarted mid-stream
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_server_killed_and_restarted_mid_stream_loses_nothing_and_grades_each_sample_once(tmp_path, monkeypatch):
    port, log_path = free_port(), tmp_path / "graded.jsonl"
    monkeypatch.setenv(rr.URLS_ENV, f"http://127.0.0.1:{port}/get_reward")
    monkeypatch.setenv(rr.WAIT_ENV, "120")
    server = start_counting_server(port, log_path)
    n, first = 60, 15

    def one(k):
        prompt = f"What is {k} + 1? "
        out = rr.reward_func([prompt + f"It is \\boxed{{{k + 1}}}."], [prompt], [str(k + 1)])
        return float(out["rewards"][0]), out["extra_logs"]["status_correct"]

    # Deterministic on a fast or a loaded machine: the first quarter is graded, the server stops, the rest of the
    # stream is sent while nothing listens (each request fails and backs off), then the server comes back.
    try:
        with ThreadPoolExecutor(8) as pool:
            early = [pool.submit(one, k) for k in range(first)]
            assert [f.result(timeout=120) for f in early] == [(1.0, 1.0)] * first
            os.killpg(server.pid, signal.SIGTERM)  # graceful stop: in-flight requests finish, new ones are refused
            server.wait(timeout=60)
            late = [pool.submit(one, k) for k in range(first, n)]
            time.sleep(2.0)  # the outage
            assert not any(f.done() for f in late)  # nothing was answered (or given up) while the server was down
            server = start_counting_server(port, log_path)
            results = [f.result(timeout=240) for f in early + late]
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
    assert results == [(1.0, 1.0)] * n  # nothing lost, every reward from a real grading
    graded = [json.loads(line) for line in log_path.read_text().splitlines()]
    assert sorted(graded, key=int) == [str(k + 1) for k in range(n)]  # each sample graded exactly once


def test_an_outage_still_echoes_each_samples_l1_target(monkeypatch):
    monkeypatch.setenv(rr.URLS_ENV, f"http://127.0.0.1:{free_port()}/get_reward")
    monkeypatch.setenv(rr.WAIT_ENV, "0")
    label = {"answer": "2", "n_gold": 700, "l1_mode": "exact"}
    out = rr.reward_func(["q a", "q b"], ["q ", "q "], [label, dict(label, n_gold=300, l1_mode="max")])
    logs = out["extra_logs"]
    assert logs["status_error"] == [1.0, 1.0] and logs["n_gold"] == [700.0, 300.0] and logs["l1_max"] == [0.0, 1.0]


def test_an_outage_still_reads_each_samples_format_flags_from_its_query(monkeypatch):
    # the flags need no grader: zeroing them would score every Laser rollout −1 while the server is down
    monkeypatch.setenv(rr.URLS_ENV, f"http://127.0.0.1:{free_port()}/get_reward")
    monkeypatch.setenv(rr.WAIT_ENV, "0")
    prompt = "Solve 1+1.<think>\n"
    queries = [prompt + "1+1=2</think> \\boxed{2}", prompt + "1+1 \\boxed{2}</think> so 2", prompt + "1+1"]
    logs = rr.reward_func(queries, [prompt] * 3, ["2"] * 3)["extra_logs"]
    assert logs["status_error"] == [1.0] * 3
    assert logs["answer_boxed"] == [1.0, 0.0, 0.0] and logs["think_boxed"] == [0.0, 1.0, 0.0]


def test_an_ungradable_label_is_graded_error_and_the_servers_reason_is_logged_once(monkeypatch, caplog):
    """A real `lead-recipes serve`: the label object lacks its "answer"; the server grades that sample `error` and
    names why in `errors`, which the forwarding reward function logs (once) where the trainer's log shows it."""
    import signal as signals

    proc, base, _ = start_serve("--serve.token", TOKEN)
    try:
        monkeypatch.setenv(rr.URLS_ENV, f"{base}/get_reward")
        monkeypatch.setenv(rr.TOKEN_ENV, TOKEN)
        with caplog.at_level("ERROR", logger="lead_recipes.reward.remote_reward"):
            outs = [rr.reward_func(["q \\boxed{2}"], ["q "], [{"id": "a", "gold": "2"}]) for _ in range(3)]
        assert all(o["extra_logs"]["status_error"] == 1.0 and o["rewards"].tolist() == [0.0] for o in outs)
        lines = [r.getMessage() for r in caplog.records if "'answer'" in r.getMessage()]
        assert len(lines) == 1 and "keys: gold, id" in lines[0], caplog.text
        good = rr.reward_func(["q \\boxed{2}"], ["q "], [{"id": "a", "answer": "2"}])
        assert good["extra_logs"]["status_correct"] == 1.0
    finally:
        proc.send_signal(signals.SIGTERM)
        proc.wait(timeout=60)
