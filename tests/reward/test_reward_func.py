"""lead_recipes/reward/reward_func.py as OpenRLHF uses it: loaded from its file path by OpenRLHF's own
SingleTurnAgentExecutor and called through asyncio.to_thread (off the main thread), one sample per call."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
import torch

import lead_recipes.reward.reward_func as rf_module
from lead_recipes.reward.logs import REWARD_LOG_KEYS

PROMPT = "<|im_start|>user\nWhat is 6 * 7? Put the final answer in \\boxed{}.<|im_end|>\n<|im_start|>assistant\n"


def _call(executor, query: str, label, prompt: str = PROMPT) -> dict:
    return asyncio.run(executor._fetch_rewards_via_func([query], [prompt], [label]))[0]


def test_openrlhf_loads_it_and_a_correct_response_gets_reward_one(executor):
    out = _call(executor, PROMPT + "<think>6*7=42</think> The answer is \\boxed{42}.<|im_end|>", "42")
    assert out["rewards"].tolist() == [1.0] and out["scores"].tolist() == [1.0]
    assert out["extra_logs"]["status_correct"] == 1.0


def test_a_wrong_response_gets_reward_zero(executor):
    out = _call(executor, PROMPT + "\\boxed{41}<|im_end|>", 42)
    assert out["rewards"].tolist() == [0.0] and out["extra_logs"]["status_wrong"] == 1.0


def test_it_runs_off_the_main_thread():
    seen = {}

    def spy(queries, prompts, labels):
        seen["main"] = threading.current_thread() is threading.main_thread()
        return rf_module.reward_func(queries, prompts, labels)

    out = asyncio.run(asyncio.to_thread(spy, [PROMPT + "\\boxed{42}"], [PROMPT], ["42"]))
    assert seen["main"] is False and out["rewards"].tolist() == [1.0]


def test_the_prompt_is_stripped_before_extraction(executor):
    prompt = PROMPT.replace("\\boxed{}", "\\boxed{42} (example)")
    out = _call(executor, prompt + "I do not know.", "42", prompt=prompt)
    assert out["extra_logs"]["status_no_answer"] == 1.0 and out["rewards"].tolist() == [0.0]


@pytest.mark.parametrize(
    "query,label",
    [
        (PROMPT + "\\boxed{42}", "42"),
        (PROMPT + "\\boxed{1}", "42"),
        (PROMPT + "no answer", "42"),
        (PROMPT + "\\boxed{42}", None),
        (None, {"weird": "label"}),
        (PROMPT + "\\boxed{9^{9^{9^{9^{9^{9}}}}}}", "1"),
    ],
)
def test_every_outcome_has_the_same_extra_log_keys_in_order(query, label):
    out = rf_module.reward_func([query], [PROMPT], [label])
    assert tuple(out["extra_logs"]) == REWARD_LOG_KEYS
    assert all(type(v) is float for v in out["extra_logs"].values())
    assert isinstance(out["rewards"], torch.Tensor) and out["rewards"].shape == (1,)
    assert out["rewards"].dtype == torch.float32 and torch.isfinite(out["rewards"]).all()


@pytest.mark.parametrize(
    "args",
    [
        (None, None, None),
        ([], [], []),
        ([object()], [1], [2]),
        ("str", "p", "l"),
        ([b"\xff\xfe\\boxed{1}"], [b""], [1]),
    ],
)
def test_garbage_arguments_never_raise_or_return_none(args):
    out = rf_module.reward_func(*args)
    assert out is not None and set(out) == {"rewards", "scores", "extra_logs"}
    assert all(float(r) == 0.0 or float(r) == 1.0 for r in out["rewards"])


def test_repetitive_responses_are_flagged():
    looping = " ".join(["we try again and"] * 40)
    out = rf_module.reward_func([PROMPT + looping + " \\boxed{42}"], [PROMPT], ["42"])
    assert out["extra_logs"]["repetitive"] == 1.0 and out["rewards"].tolist() == [1.0]


def test_several_samples_in_one_call_keep_their_order():
    qs = [PROMPT + f"\\boxed{{{x}}}" for x in (42, 1, 42)]
    out = rf_module.reward_func(qs, [PROMPT] * 3, ["42"] * 3)
    assert out["rewards"].tolist() == [1.0, 0.0, 1.0]
    assert out["extra_logs"]["correct"] == [1.0, 0.0, 1.0]


def test_many_concurrent_thread_calls_share_one_pool(executor):
    async def run():
        calls = [
            executor._fetch_rewards_via_func([PROMPT + f"\\boxed{{{i % 5}}}"], [PROMPT], [str(i % 3)])
            for i in range(60)
        ]
        return await asyncio.gather(*calls)

    outs = [o[0] for o in asyncio.run(run())]
    assert [o["rewards"].item() for o in outs] == [1.0 if i % 5 == i % 3 else 0.0 for i in range(60)]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_inside_an_async_ray_actor_the_pool_starts_lazily_and_grades():
    """OpenRLHF runs reward_func inside async vLLM engine actors; here a real async Ray actor loads it by path
    through OpenRLHF's executor, so the grader's spawn pool is created inside the actor process."""
    import tempfile

    import ray

    ray_tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # AF_UNIX socket paths must stay under 107 bytes
    ray.init(
        num_cpus=1,
        include_dashboard=False,
        log_to_driver=False,
        _temp_dir=ray_tmp,
        runtime_env={"env_vars": {"LEAD_RECIPES_GRADE_TIMEOUT_S": "2"}},
    )
    try:

        @ray.remote
        class RolloutLike:
            async def rewards(self, path: str, queries, prompts, labels):
                import os

                from openrlhf.utils.agent import SingleTurnAgentExecutor

                ex = SingleTurnAgentExecutor(path)
                outs = await asyncio.gather(
                    *[ex._fetch_rewards_via_func([q], [p], [lab]) for q, p, lab in zip(queries, prompts, labels)]
                )
                from lead_recipes.grading.pool.grader import get_grader

                return [o[0]["rewards"].tolist() for o in outs], get_grader().worker_pids(), os.getpid()

        actor = RolloutLike.remote()
        # symbolic answers: no parent-side shortcut applies, so the actor's worker pool must start and grade them
        qs = [PROMPT + "\\boxed{1+x}", PROMPT + "\\boxed{\\frac{2x+2}{2}}", PROMPT + "\\boxed{x+2}"]
        rewards, pids, actor_pid = ray.get(
            actor.rewards.remote(str(Path(rf_module.__file__)), qs, [PROMPT] * 3, ["x+1"] * 3), timeout=240
        )
        assert rewards == [[1.0], [1.0], [0.0]]
        assert pids and actor_pid not in pids
    finally:
        ray.shutdown()
        import shutil

        shutil.rmtree(ray_tmp, ignore_errors=True)


def test_an_unboxed_answer_statement_gets_no_reward_under_the_default_boxed_policy(executor, monkeypatch):
    monkeypatch.delenv("LEAD_RECIPES_EXTRACTION", raising=False)
    out = _call(executor, PROMPT + "6 * 7 = 42.\n\nThe answer is 42.<|im_end|>", "42")
    assert out["rewards"].tolist() == [0.0] and out["extra_logs"]["status_no_answer"] == 1.0


ROUNDING = (
    "<|im_start|>user\nWhat is 1/3? Express your answer to the nearest hundredth.<|im_end|>\n<|im_start|>assistant\n"
)


def test_a_precision_stated_in_the_prompt_applies_to_the_reward(executor, monkeypatch):
    from lead_recipes.grading.pool import grader as grading

    monkeypatch.setattr(grading, "_SHARED", None)
    monkeypatch.delenv("LEAD_RECIPES_GRADE_PROBLEM_PRECISION", raising=False)
    right = _call(executor, ROUNDING + "So \\boxed{0.330}.", "\\frac13", prompt=ROUNDING)
    near = _call(executor, ROUNDING + "So \\boxed{0.34}.", "\\frac13", prompt=ROUNDING)
    plain = _call(executor, PROMPT + "So \\boxed{0.330}.", "\\frac13")  # none stated: 0.330 claims 3 places
    assert (right["rewards"].tolist(), near["rewards"].tolist(), plain["rewards"].tolist()) == ([1.0], [0.0], [0.0])
    grading.get_grader().close()


@pytest.mark.parametrize(
    "env,value,reward",
    [
        ("LEAD_RECIPES_GRADE_PROBLEM_PRECISION", "0", 0.0),  # the prompt's precision ignored: the digits written
        ("LEAD_RECIPES_GRADE_REL_TOL", "0.02", 1.0),  # 0.330 is within 2% of 1/3
    ],
)
def test_the_precision_env_variables_reach_the_shared_grader(executor, monkeypatch, env, value, reward):
    from lead_recipes.grading.pool import grader as grading

    monkeypatch.setattr(grading, "_SHARED", None)
    monkeypatch.setenv(env, value)
    prompt = ROUNDING if env == "LEAD_RECIPES_GRADE_PROBLEM_PRECISION" else PROMPT
    assert _call(executor, prompt + "So \\boxed{0.330}.", "\\frac13", prompt=prompt)["rewards"].tolist() == [reward]
    grading.get_grader().close()


@pytest.mark.parametrize(
    "env,value", [("LEAD_RECIPES_GRADE_REL_TOL", "abc"), ("LEAD_RECIPES_GRADE_PROBLEM_PRECISION", "yes")]
)
def test_a_bad_precision_env_value_grades_error_and_names_the_variable(monkeypatch, env, value):
    from lead_recipes.grading.pool import grader as grading

    monkeypatch.setattr(grading, "_SHARED", None)
    monkeypatch.setenv(env, value)
    with pytest.raises(ValueError, match=env):
        grading.get_grader()
    out = rf_module.reward_func([PROMPT + "\\boxed{42}"], [PROMPT], ["42"])
    assert out["extra_logs"]["status_error"] == 1.0


L1_LABEL = {"answer": "42", "id": "p1", "n_gold": 1234, "l1_mode": "max"}


def test_an_l1_label_is_graded_by_its_answer_and_its_target_echoed_as_floats(executor):
    right = _call(executor, PROMPT + "\\boxed{42}", L1_LABEL)["extra_logs"]
    assert right["correct"] == 1.0 and right["n_gold"] == 1234.0 and right["l1_max"] == 1.0
    exact = _call(executor, PROMPT + "\\boxed{41}", dict(L1_LABEL, l1_mode="exact"))["extra_logs"]
    assert exact["correct"] == 0.0 and exact["n_gold"] == 1234.0 and exact["l1_max"] == 0.0
    plain = _call(executor, PROMPT + "\\boxed{42}", "42")["extra_logs"]
    assert plain["n_gold"] == 0.0 and plain["l1_max"] == 0.0


@pytest.mark.parametrize(
    "label",
    [
        dict(L1_LABEL, n_gold=0),
        dict(L1_LABEL, n_gold=float("nan")),
        dict(L1_LABEL, n_gold="1234"),
        dict(L1_LABEL, n_gold=True),
        dict(L1_LABEL, l1_mode="min"),
        {"answer": "42", "n_gold": 1234},
    ],
)
def test_a_broken_l1_label_is_graded_error_with_no_target_never_a_silent_grade(executor, label):
    logs = _call(executor, PROMPT + "\\boxed{42}", label)["extra_logs"]
    assert logs["status_error"] == 1.0 and logs["correct"] == 0.0
    assert logs["n_gold"] == 0.0 and logs["l1_max"] == 0.0


def test_the_target_is_echoed_even_when_grading_itself_fails(monkeypatch):
    def broken():
        raise RuntimeError("no grader")

    monkeypatch.setattr(rf_module, "get_grader", broken)
    out = rf_module.reward_func([PROMPT + "\\boxed{42}"] * 2, [PROMPT] * 2, [L1_LABEL, "42"])
    assert out["extra_logs"]["status_error"] == [1.0, 1.0] and out["extra_logs"]["n_gold"] == [1234.0, 0.0]


def test_a_failure_outside_grading_still_reads_the_format_flags_from_each_query(monkeypatch):
    def broken(*args):
        raise RuntimeError("boom")

    monkeypatch.setattr(rf_module, "grade_samples", broken)
    queries = [PROMPT + "<think>6*7</think> so \\boxed{42}.", PROMPT + "<think>6*7 = 42"]
    logs = rf_module.reward_func(queries, [PROMPT] * 2, ["42"] * 2)["extra_logs"]
    assert logs["status_error"] == [1.0, 1.0] and logs["answer_boxed"] == [1.0, 0.0]


NO_BOX_PROMPT = PROMPT.replace(" Put the final answer in \\boxed{}.", "")


@pytest.mark.parametrize(
    "query,boxed",
    [
        (NO_BOX_PROMPT + "<think>6*7 = \\boxed{42}</think> 42", 1.0),  # a box before </think>
        (NO_BOX_PROMPT + "<think>6*7 = 42</think> \\boxed{42}", 0.0),  # the box only after </think>
        (NO_BOX_PROMPT + "<think>6*7 = \\boxed{42} and then I was cut", 0.0),  # no </think>
        (PROMPT + "<think>6*7 = 42</think> \\boxed{42}", 1.0),  # the prompt's own \boxed{} counts, as in the code
        (PROMPT + "<think>6*7 = \\boxed{42</think> \\boxed{42}", 0.0),  # the last box before </think> never closes
        (PROMPT + "<think>6*7 = \\boxed 42</think> \\boxed{42}", 0.0),  # `\boxed 42` does not parse as \boxed{
        (NO_BOX_PROMPT + "<think>\\boxed{\\frac{1}{2}} {</think>", 1.0),  # nested braces close; a later { is no box
    ],
)
def test_think_boxed_is_grpo_lead_codes_format_rule_on_prompt_and_response(query, boxed):
    prompt = query[: query.index("<think>")]
    assert rf_module.reward_func([query], [prompt], ["42"])["extra_logs"]["think_boxed"] == boxed


@pytest.mark.parametrize(
    "query,boxed",
    [
        (PROMPT + "<think>6*7</think> so \\boxed{42}.", 1.0),  # a complete box after </think>
        (PROMPT + "<think>6*7 = \\boxed{42}</think> 42", 0.0),  # the prompt's \\boxed{} and this one are before it
        (PROMPT + "6*7</think> \\boxed{42}", 0.0),  # no <think> in prompt + response
        (PROMPT + "<think>6*7 = 42, \\boxed{42}", 0.0),  # no </think>: cut in its thinking
        (PROMPT + "<think>x</think> \\boxed{\\frac{1}{2}} </think> more", 1.0),  # nested braces, up to the next
    ],
)
def test_answer_boxed_is_lasers_format_rule_on_prompt_and_response(query, boxed):
    assert rf_module.reward_func([query], [PROMPT], ["42"])["extra_logs"]["answer_boxed"] == boxed
