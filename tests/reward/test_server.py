"""`lead-recipes serve` run for real on a 127.0.0.1 port (a subprocess started here), spoken to by OpenRLHF's own
remote-RM client (`SingleTurnAgentExecutor._fetch_rewards_via_http`) and by raw aiohttp for the error paths."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import urllib.request

import aiohttp
import pytest
from support.ports import free_port
from support.reward_server import TOKEN, ready_line, serve, start_serve

from lead_recipes.reward.logs import REWARD_LOG_KEYS

PROMPT = "<|im_start|>user\nCompute 6*7. Box the answer.<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def served():
    proc, base, ready = start_serve("--serve.token", TOKEN, "--serve.max_request_mb", "4")
    yield base, ready
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)


@pytest.fixture(scope="module")
def server(served):
    return served[0]


async def _post(url: str, body, headers=None) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as s:
        kw = {"data": body} if isinstance(body, (bytes, str)) else {"json": body}
        async with s.post(url, headers=headers, **kw) as r:
            return r.status, await r.json(content_type=None)


def post(url: str, body, headers=None) -> tuple[int, dict]:
    return asyncio.run(_post(url, body, headers))


AUTH = {"Authorization": f"Bearer {TOKEN}"}


# ------------------------------------------------------------------------------------------------ protocol
def test_openrlhf_client_gets_rewards_and_fixed_extra_logs(server):
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    ex = SingleTurnAgentExecutor(f"{server}/get_reward?token={TOKEN}")
    right = asyncio.run(ex._fetch_rewards_via_http([PROMPT + "<think>hm</think>\\boxed{42}"], [PROMPT], ["42"]))[0]
    wrong = asyncio.run(ex._fetch_rewards_via_http([PROMPT + "\\boxed{41}"], [PROMPT], [42]))[0]
    assert right["rewards"] == [1.0] and right["scores"] == [1.0]
    assert wrong["rewards"] == [0.0] and wrong["extra_logs"]["status_wrong"] == [1.0]
    assert list(right["extra_logs"]) == list(REWARD_LOG_KEYS) == list(wrong["extra_logs"])


def test_empty_lists_give_empty_lists(server):
    code, body = post(server + "/get_reward", {"query": [], "prompts": [], "labels": []}, AUTH)
    assert code == 200 and body["rewards"] == [] and body["scores"] == []
    assert all(body["extra_logs"][k] == [] for k in REWARD_LOG_KEYS)


def test_health_is_open_and_json(server):
    with urllib.request.urlopen(server + "/health", timeout=5) as r:
        assert r.status == 200 and json.loads(r.read())["status"] == "ok"


def test_a_precision_stated_in_the_prompt_applies_at_the_server(server):
    prompt = "<|im_start|>user\nWhat is 1/3 to the nearest hundredth?<|im_end|>\n<|im_start|>assistant\n"
    body = {
        "query": [prompt + "\\boxed{0.330}", prompt + "\\boxed{0.34}", PROMPT + "\\boxed{0.330}"],
        "prompts": [prompt, prompt, PROMPT],
        "labels": ["\\frac13"] * 3,
    }
    code, out = post(server + "/get_reward", body, AUTH)
    assert code == 200 and out["rewards"] == [1.0, 0.0, 0.0]  # the last states none: 0.330 claims 3 places
    with urllib.request.urlopen(server + "/health", timeout=5) as r:
        health = json.loads(r.read())
    assert health["rel_tol"] == 1e-4 and health["problem_precision"] is True


# ------------------------------------------------------------------------------------------------ errors
@pytest.mark.parametrize(
    "body,code",
    [
        (b"{not json", 400),
        ({"query": "not a list", "labels": ["1"]}, 422),
        ({"query": ["a", "b"], "prompts": ["p"], "labels": ["1", "2"]}, 422),
        ({"query": ["a"], "prompts": ["p"]}, 422),
        ([1, 2, 3], 422),
    ],
)
def test_malformed_requests_get_a_clear_4xx_json_error(server, body, code):
    got, payload = post(server + "/get_reward", body, {**AUTH, "Content-Type": "application/json"})
    assert got == code and isinstance(payload.get("error"), str) and payload["error"]


def test_oversized_request_gets_413_json(server):
    big = {"query": ["x" * (5 * 2**20)], "prompts": [""], "labels": ["1"]}
    code, payload = post(server + "/get_reward", big, AUTH)
    assert code == 413 and "error" in payload


def test_missing_or_wrong_token_is_401(server):
    body = {"query": [PROMPT + "\\boxed{42}"], "prompts": [PROMPT], "labels": ["42"]}
    assert post(server + "/get_reward", body)[0] == 401
    assert post(server + "/get_reward", body, {"Authorization": "Bearer nope"})[0] == 401
    assert post(server + "/get_reward", body, AUTH)[0] == 200


def test_401_message_tells_the_token_can_ride_in_the_url(server):
    body = {"query": [PROMPT + "\\boxed{42}"], "prompts": [PROMPT], "labels": ["42"]}
    code, payload = post(server + "/get_reward", body)
    assert code == 401 and "?token=" in payload["error"]


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"])
def test_a_body_that_is_not_declared_json_gets_415_with_a_message(server, content_type):
    raw = json.dumps({"query": ["\\boxed{1}"], "prompts": [""], "labels": ["1"]})
    code, payload = post(server + "/get_reward", raw, {**AUTH, "Content-Type": content_type})
    assert code == 415 and "application/json" in payload["error"]


def test_bad_samples_in_a_good_request_get_reward_zero_with_status(server):
    body = {
        "query": [PROMPT + "\\boxed{42}", 12345, None, PROMPT + "\\boxed{42}"],
        "prompts": [PROMPT, None, PROMPT, PROMPT],
        "labels": [None, "42", "42", "42"],
    }
    code, out = post(server + "/get_reward", body, AUTH)
    assert code == 200 and out["rewards"] == [0.0, 0.0, 0.0, 1.0]
    assert out["extra_logs"]["status_error"] == [1.0, 0.0, 0.0, 0.0]
    assert out["extra_logs"]["status_no_answer"] == [0.0, 1.0, 1.0, 0.0]


def test_an_object_label_is_graded_by_its_answer_through_openrlhfs_client(server):
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    ex = SingleTurnAgentExecutor(f"{server}/get_reward?token={TOKEN}")
    out = asyncio.run(ex._fetch_rewards_via_http([PROMPT + "\\boxed{42}"], [PROMPT], [{"id": "a", "answer": "42"}]))[0]
    assert out["rewards"] == [1.0] and out["extra_logs"]["status_correct"] == [1.0]


def test_an_object_label_without_answer_is_that_samples_error_naming_it_the_others_are_graded(server):
    body = {"query": [PROMPT + "\\boxed{42}"] * 3, "prompts": [PROMPT] * 3, "labels": ["42", {"id": "b"}, "42"]}
    code, out = post(server + "/get_reward", body, AUTH)
    assert code == 200 and out["rewards"] == [1.0, 0.0, 1.0], (code, out)
    assert out["extra_logs"]["status_error"] == [0.0, 1.0, 0.0]
    assert list(out["errors"]) == ["1"] and "'answer'" in out["errors"]["1"] and "keys: id" in out["errors"]["1"]
    req = urllib.request.Request(server + "/stats", headers=AUTH)
    with urllib.request.urlopen(req, timeout=5) as r:
        stats = json.loads(r.read())
    assert stats["label_errors"] >= 1 and "'answer'" in stats["last_label_error"]


def test_openrlhfs_own_client_gets_an_error_reward_for_an_ungradable_label_not_five_retries(server):
    """OpenRLHF 0.11.2's HTTP client (one sample per request) retries any non-2xx 5 times and then raises: the
    rollout would lose the sample's reward. Its grading status arrives instead, for the guard to count."""
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    ex = SingleTurnAgentExecutor(f"{server}/get_reward?token={TOKEN}")
    (out,) = asyncio.run(ex._fetch_rewards_via_http([PROMPT + "\\boxed{42}"], [PROMPT], [{"id": "a"}]))
    assert out["rewards"] == [0.0] and out["extra_logs"]["status_error"] == [1.0]


def test_invalid_utf8_in_the_body_is_graded_not_rejected(server):
    raw = b'{"query": ["\xff\xfe junk \\\\boxed{42}"], "prompts": [""], "labels": ["42"]}'
    code, out = post(server + "/get_reward", raw, {**AUTH, "Content-Type": "application/json"})
    assert code == 200 and out["rewards"] == [1.0]


def test_one_megabyte_response_is_graded(server):
    q = PROMPT + "think " * 200_000 + "\\boxed{42}"
    code, out = post(server + "/get_reward", {"query": [q], "prompts": [PROMPT], "labels": ["42"]}, AUTH)
    assert code == 200 and out["rewards"] == [1.0]


# ------------------------------------------------------------------------------------------------ load + stats
def test_concurrent_requests_all_succeed_with_their_own_rewards(server):
    async def run():
        async with aiohttp.ClientSession(headers=AUTH) as s:

            async def one(i):
                body = {"query": [PROMPT + f"\\boxed{{{i % 7}}}"], "prompts": [PROMPT], "labels": [str(i % 4)]}
                async with s.post(server + "/get_reward", json=body) as r:
                    return r.status, (await r.json())["rewards"][0]

            return await asyncio.gather(*[one(i) for i in range(300)])

    res = asyncio.run(run())
    assert all(code == 200 for code, _ in res)
    assert [r for _, r in res] == [1.0 if i % 7 == i % 4 else 0.0 for i in range(300)]


def test_stats_report_requests_statuses_latency_and_restarts(server):
    post(server + "/get_reward", {"query": ["\\boxed{1}"], "prompts": [""], "labels": ["1"]}, AUTH)
    req = urllib.request.Request(server + "/stats", headers=AUTH)
    with urllib.request.urlopen(req, timeout=5) as r:
        st = json.loads(r.read())
    assert st["requests"] >= 1 and st["responses_by_code"]["200"] >= 1
    assert st["samples_by_status"]["correct"] >= 1
    assert 0 < st["latency_s"]["p50"] <= st["latency_s"]["p90"] <= st["latency_s"]["p99"]
    assert st["worker_restarts"] >= 0 and "inflight" in st


# ------------------------------------------------------------------------------------------------ shutdown
@pytest.mark.timeout(120)
def test_sigterm_finishes_in_flight_requests_then_exits_zero():
    proc, base, _ = start_serve()
    try:

        async def run():
            bomb = {"query": ["\\boxed{9^{9^{9^{9^{9^{9}}}}}}"], "prompts": [""], "labels": ["1"]}
            task = asyncio.create_task(_post(base + "/get_reward", bomb))
            await asyncio.sleep(0.5)
            proc.send_signal(signal.SIGTERM)
            return await task

        code, out = asyncio.run(run())
        assert code == 200 and out["extra_logs"]["status_timeout"] == [1.0]
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


# ------------------------------------------------------------------------------------------------ extraction policy
def test_health_reports_the_default_boxed_extraction(server):
    with urllib.request.urlopen(server + "/health", timeout=5) as r:
        assert json.loads(r.read())["extraction"] == "boxed"


def test_extraction_flag_accepts_only_the_named_policies():
    from lead_recipes.reward.server import build_parser

    assert vars(build_parser().parse_args(["--grade.extraction", "final_answer"]))["grade.extraction"] == "final_answer"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--grade.extraction", "lenient"])


# ------------------------------------------------------------------------------------------------ start-up
def test_port_accepts_connections_once_the_ready_line_is_printed():
    port = free_port()
    proc = serve(port)
    try:
        ready_line(proc)
        socket.create_connection(("127.0.0.1", port), timeout=5).close()  # no retry: it must listen already
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_a_port_in_use_is_one_error_line_naming_port_and_flag_and_exit_2():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        proc = serve(port)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and out == ""
    assert len(err.splitlines()) == 1 and str(port) in err and "--serve.port" in err and "Traceback" not in err


def test_ready_line_flag_reaches_the_server_with_no_header(served):
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    base, ready = served
    url = ready.split("--reward.remote_url ", 1)[1].split()[0]
    assert url == f"{base}/get_reward?token={TOKEN}"
    ex = SingleTurnAgentExecutor(url)
    got = asyncio.run(ex._fetch_rewards_via_http([PROMPT + "\\boxed{42}"], [PROMPT], ["42"]))[0]
    assert got["rewards"] == [1.0]


def _main_output(monkeypatch, capsys, argv: list[str]) -> tuple[str, str]:
    """`main` up to its ready line, with aiohttp's run loop replaced: the flag and warnings, no grader pool."""
    from lead_recipes.reward import server as srv

    def fake_run_app(app, *, sock, print, **_):
        app.close()  # the make_app coroutine, never awaited
        for s in sock:
            s.close()
        print("banner")

    monkeypatch.setattr(srv.web, "run_app", fake_run_app)
    monkeypatch.setattr(srv.logging, "basicConfig", lambda **_: None)  # leave this process's logging alone
    assert srv.main(argv) == 0
    return capsys.readouterr()


def test_a_token_from_the_environment_is_shown_as_the_variable_not_the_secret(monkeypatch, capsys):
    monkeypatch.setenv("LEAD_RECIPES_SERVE_TOKEN", "hidden-value")
    out, _ = _main_output(monkeypatch, capsys, ["--serve.port", "0"])
    assert "?token=$LEAD_RECIPES_SERVE_TOKEN" in out and "hidden-value" not in out


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_a_wildcard_host_gives_a_url_with_this_machines_name(monkeypatch, capsys, host):
    if host == "::" and not socket.has_ipv6:
        pytest.skip("no IPv6")
    monkeypatch.delenv("LEAD_RECIPES_SERVE_TOKEN", raising=False)
    out, _ = _main_output(monkeypatch, capsys, ["--serve.host", host, "--serve.port", "0", "--serve.token", "t"])
    assert f"--reward.remote_url http://{socket.gethostname()}:" in out


@pytest.mark.parametrize(
    "host,token,warned",
    [
        ("0.0.0.0", None, True),
        ("::", None, True),
        ("10.1.2.3", None, True),
        ("0.0.0.0", "t", False),
        ("127.0.0.1", None, False),
        ("::1", None, False),
        ("localhost", None, False),
    ],
)
def test_listening_beyond_loopback_without_a_token_warns_once_on_stderr(host, token, warned):
    from lead_recipes.reward.server import exposure_warning

    line = exposure_warning(host, token)
    assert (line is not None) == warned
    assert line is None or (len(line.splitlines()) == 1 and "token" in line)


def test_main_prints_the_exposure_warning_on_stderr(monkeypatch, capsys):
    monkeypatch.delenv("LEAD_RECIPES_SERVE_TOKEN", raising=False)
    out, err = _main_output(monkeypatch, capsys, ["--serve.host", "0.0.0.0", "--serve.port", "0"])
    assert "warning" in err and "warning" not in out


def test_an_l1_label_target_is_echoed_and_a_broken_one_is_that_samples_error_naming_it(server):
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    ex = SingleTurnAgentExecutor(f"{server}/get_reward?token={TOKEN}")
    label = {"id": "a", "answer": "42", "n_gold": 900, "l1_mode": "max"}
    out = asyncio.run(ex._fetch_rewards_via_http([PROMPT + "\\boxed{42}"], [PROMPT], [label]))[0]
    assert out["rewards"] == [1.0] and out["extra_logs"]["n_gold"] == [900.0] and out["extra_logs"]["l1_max"] == [1.0]
    body = {"query": [PROMPT + "\\boxed{42}"] * 2, "prompts": [PROMPT] * 2, "labels": [label, dict(label, n_gold=-5)]}
    code, payload = post(server + "/get_reward", body, AUTH)
    assert code == 200 and payload["extra_logs"]["status_error"] == [0.0, 1.0], (code, payload)
    assert payload["rewards"] == [1.0, 0.0] and payload["extra_logs"]["n_gold"] == [900.0, 0.0]
    assert "labels[1]" in payload["errors"]["1"] and "n_gold" in payload["errors"]["1"], payload


# ------------------------------------------------------------------------------------------------ what `query` holds
@pytest.mark.parametrize(
    "query,prompt,label",
    [("\\boxed{2}", "2", "2"), ("Answer: \\boxed{12}", "1", "12")],  # issue 36's two examples
)
def test_a_response_only_query_containing_the_prompt_text_is_graded_whole(server, query, prompt, label):
    code, out = post(server + "/get_reward", {"query": [query], "prompts": [prompt], "labels": [label]}, AUTH)
    assert code == 200 and out["rewards"] == [1.0], out


def test_the_prompt_is_stripped_from_a_query_that_starts_with_it(server):
    """A prompt that shows a boxed example: graded whole, its `\\boxed{7}` would be the answer."""
    prompt = "Example: \\boxed{7}. Now compute 6*7.\n"
    body = {"query": [prompt + "I cannot say."], "prompts": [prompt], "labels": ["7"]}
    code, out = post(server + "/get_reward", body, AUTH)
    assert code == 200 and out["rewards"] == [0.0] and out["extra_logs"]["status_no_answer"] == [1.0], out


def test_responses_are_graded_as_sent_even_when_they_start_with_the_prompt(server):
    prompt = "\\boxed{7} is wrong; compute 6*7.\n"
    body = {"responses": [prompt], "prompts": [prompt], "labels": ["7"]}
    code, out = post(server + "/get_reward", body, AUTH)
    assert code == 200 and out["rewards"] == [1.0], out


def test_a_request_with_neither_query_nor_responses_is_422_naming_both(server):
    code, out = post(server + "/get_reward", {"prompts": ["p"], "labels": ["1"]}, AUTH)
    assert code == 422 and "`query`" in out["error"] and "`responses`" in out["error"]


def test_a_malformed_body_is_422_naming_both_request_shapes(server):
    code, out = post(server + "/get_reward", {"responses": "not a list", "labels": ["1"]}, AUTH)
    assert code == 422 and "'responses': [str]" in out["error"] and "'query': [str]" in out["error"], out


def test_responses_and_query_of_different_lengths_are_422(server):
    body = {"responses": ["\\boxed{1}"], "query": ["a", "b"], "labels": ["1"]}
    code, out = post(server + "/get_reward", body, AUTH)
    assert code == 422 and "`query` has 2 items but `responses` has 1" in out["error"]


def test_a_null_label_is_that_samples_error_named_in_errors(server):
    body = {"query": ["\\boxed{1}", "\\boxed{1}"], "prompts": ["", ""], "labels": ["1", None]}
    code, out = post(server + "/get_reward", body, AUTH)
    assert code == 200 and out["rewards"] == [1.0, 0.0] and out["extra_logs"]["status_error"] == [0.0, 1.0]
    assert list(out["errors"]) == ["1"] and "null" in out["errors"]["1"], out


def test_format_flags_read_prompt_and_response_whether_sent_as_query_or_as_responses(server):
    """GRPO-LEAD's format rule (a box before `</think>`) is read from prompt + response: a sample sent as a
    `query` and the same sample sent as `responses` get the same flag, and a box after `</think>` fails both."""
    prompt, good, late = "Q: 6*7? <think>", "so \\boxed{42}</think> done", "so 42</think> \\boxed{42}"
    for response, boxed in ((good, 1.0), (late, 0.0)):
        as_query = {"query": [prompt + response], "prompts": [prompt], "labels": ["42"]}
        as_responses = {"responses": [response], "prompts": [prompt], "labels": ["42"]}
        flags = []
        for body in (as_query, as_responses):
            code, out = post(server + "/get_reward", body, AUTH)
            assert code == 200, out
            flags.append(out["extra_logs"]["think_boxed"])
        assert flags == [[boxed], [boxed]], (response, flags)
