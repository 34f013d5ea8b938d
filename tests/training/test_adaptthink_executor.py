"""AdaptThink's rollout executor (lead_recipes.training.adaptthink_executor) on a stand-in engine and tokenizer: the
forced first token and its split per group, also when one engine runs two groups of the same prompt at once; the
caps and the action span; evaluation requests neither forced nor counted; an unmarked request refused; a failing
reward function graded `error` instead of failing the rollouts."""

from __future__ import annotations

import asyncio
import math
from types import SimpleNamespace as NS

import pytest
from vllm import SamplingParams

from lead_recipes.training import adaptthink_executor as ax

N_ID, T_ID, G = ord("N"), ord("T"), 8
FORCING = {"n": G, "rho": 0.25, "nothink_token_id": N_ID, "think_token_id": T_ID, "nothink_cap": 8}
ANSWER = "ok \\boxed{1}"
LABEL = {"answer": "1", "ref_acc": 0.5}


class Tokenizer:  # one id per character
    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}

    def decode(self, ids, skip_special_tokens=False):
        return "".join(map(chr, ids))


class Engine:
    """Answers ANSWER after a yield (so concurrent calls interleave); records what each request asked for."""

    def __init__(self):
        self.requests = []

    async def generate(self, ids, params):
        self.requests.append(NS(ids=list(ids), max_tokens=params.max_tokens, extra_args=params.extra_args))
        await asyncio.sleep(0)
        ids = [ord(c) for c in ANSWER]
        logprobs = None if params.logprobs is None else [{t: NS(logprob=-0.5)} for t in ids]
        return NS(outputs=[NS(token_ids=ids, logprobs=logprobs, finish_reason="stop")])


@pytest.fixture
def reward_file(tmp_path):
    path = tmp_path / "reward.py"
    path.write_text(
        "from lead_recipes.reward.logs import REWARD_LOG_KEYS, reward_result\n"
        "def reward_func(queries, prompts, labels):\n"
        "    if 'boom' in queries[0]:\n"
        "        raise RuntimeError('grader down')\n"
        "    return reward_result([1.0], {k: [1.0 if k == 'correct' else 0.0] for k in REWARD_LOG_KEYS})\n"
    )
    return str(path)


def params(reward_file, mode="train", logprobs=None):
    extra = {ax.MODE_KEY: mode, ax.REWARD_KEY: reward_file}
    if mode == "train":
        extra[ax.FORCING_KEY] = FORCING
    return SamplingParams(max_tokens=32, logprobs=logprobs, extra_args=extra)


async def group(executor, engine, prompt, sp, n=G, label=LABEL):
    """OpenRLHF's `generate_responses`: n concurrent calls of one prompt on one engine."""
    return await asyncio.gather(*[executor.execute(prompt, label, sp, 64, Tokenizer(), engine) for _ in range(n)])


def firsts(results, prompt):
    return [r["observation_tokens"][len(prompt)] for r in results]


def test_each_group_gets_round_g_rho_no_think_even_when_one_engine_runs_the_same_prompt_twice_at_once(reward_file):
    ex, engine, sp = ax.AgentExecutor(), Engine(), params(reward_file)

    async def step():  # a batch holding prompt "p" twice, dispatched to the same engine, and "q"
        return await asyncio.gather(group(ex, engine, "p", sp), group(ex, engine, "p", sp), group(ex, engine, "q", sp))

    share = round(G * FORCING["rho"])
    for _ in range(2):  # two steps
        for results in asyncio.run(step()):
            assert firsts(results, "p") == [N_ID] * share + [T_ID] * (G - share)
            assert [r["extra_logs"]["nothink"] for r in results] == [1.0] * share + [0.0] * (G - share)
            assert all(r["extra_logs"]["ref_acc"] == 0.5 for r in results)
    assert ex.calls == {}  # finished groups leave no count behind: memory does not grow with the data


def test_forced_token_is_in_the_action_span_with_each_modes_cap_and_its_rollout_log_prob(reward_file):
    ex, engine = ax.AgentExecutor(), Engine()
    results = asyncio.run(group(ex, engine, "p", params(reward_file, logprobs=1)))
    assert [q.max_tokens for q in engine.requests] == [FORCING["nothink_cap"] - 1] * 2 + [32 - 1] * 6
    assert all(q.ids == [ord("p"), q.ids[1]] and q.extra_args is None for q in engine.requests)
    for r, nothink in zip(results, [True] * 2 + [False] * 6):
        assert r["observation_tokens"] == [ord("p"), N_ID if nothink else T_ID] + [ord(c) for c in ANSWER]
        assert r["action_ranges"] == [(1, 2 + len(ANSWER))]
        first = math.log(0.25 if nothink else 0.75)
        assert r["rollout_log_probs"] == pytest.approx([0.0, first] + [-0.5] * len(ANSWER))
        assert r["reward"].tolist() == [1.0] and r["extra_logs"]["correct"] == 1.0


def test_evaluation_requests_are_not_forced_and_not_counted(reward_file):
    ex, engine = ax.AgentExecutor(), Engine()
    results = asyncio.run(group(ex, engine, "p", params(reward_file, mode="eval"), n=3))
    assert all(r["observation_tokens"] == [ord("p")] + [ord(c) for c in ANSWER] for r in results)
    assert all(r["action_ranges"] == [(1, 1 + len(ANSWER))] and r["extra_logs"]["nothink"] == 0.0 for r in results)
    assert [q.max_tokens for q in engine.requests] == [32] * 3 and ex.calls == {}
    train = asyncio.run(group(ex, engine, "p", params(reward_file)))  # a training group afterwards starts at call 0
    assert firsts(train, "p") == [N_ID] * 2 + [T_ID] * 6


def test_an_unmarked_request_is_refused(reward_file):
    with pytest.raises(RuntimeError, match="not marked train or eval"):
        asyncio.run(group(ax.AgentExecutor(), Engine(), "p", SamplingParams(max_tokens=8), n=1))


def test_a_failing_reward_function_grades_the_sample_error_instead_of_failing_the_rollouts(reward_file):
    ex, engine = ax.AgentExecutor(), Engine()
    results = asyncio.run(group(ex, engine, "boom", params(reward_file)))  # the reward file raises on "boom"
    assert len(results) == G and all(r["reward"].tolist() == [0.0] for r in results)
    assert all(r["extra_logs"]["status_error"] == 1.0 and r["extra_logs"]["correct"] == 0.0 for r in results)
    assert [r["extra_logs"]["nothink"] for r in results] == [1.0] * 2 + [0.0] * 6


class DispatchEngine:
    """A stand-in vLLM engine actor for OpenRLHF's dispatch: records each `generate_responses` call."""

    def __init__(self, calls):
        self.calls = calls
        self.get_num_unfinished_requests = NS(remote=lambda: 0)
        self.generate_responses = NS(remote=lambda **kw: calls.append((self, kw)))


def test_openrlhf_sends_each_prompt_once_with_all_g_samples_to_one_engine_marked_train_or_eval(monkeypatch):
    """The executor's count per prompt relies on OpenRLHF 0.11.2 dispatching each prompt as one `generate_responses`
    call of n samples to one engine (a prompt's G calls never split across engines); the plug-in's generator marks
    training requests with the forcing and evaluation requests without it."""
    from openrlhf.trainer.ppo_utils import samples_generator

    from lead_recipes.methods.config import RecipeConfig
    from lead_recipes.training.grading_gate import RecipeSamplesGenerator

    monkeypatch.setattr(samples_generator.ray, "get", lambda refs: refs)
    args = NS(
        recipe=RecipeConfig.of({"method": "adaptthink"}),
        recipe_reward_url="r.py",
        rollout=NS(batch_size=3, n_samples_per_prompt=G),
        algo=NS(advantage=NS(is_correction_level="off")),
        vllm=NS(enable_sleep=False),
    )
    calls = []
    engines = [DispatchEngine(calls), DispatchEngine(calls)]
    gen = RecipeSamplesGenerator(NS(args=args), None, None, Tokenizer(), engines)
    gen._dispatch_prompts_to_vllm(["a", "b", "a"], ["1", "2", "1"], n_samples_per_prompt=G)
    assert [kw["prompt"] for _, kw in calls] == ["a", "b", "a"] and all(kw["num_samples"] == G for _, kw in calls)
    train = calls[0][1]["sampling_params"].extra_args
    assert train[ax.MODE_KEY] == "train" and train[ax.FORCING_KEY]["n"] == G and train[ax.REWARD_KEY] == "r.py"

    calls.clear()

    def one_dispatch(dataloader_iter, num_prompts, dynamic_filtering, **kwargs):
        gen._dispatch_prompts_to_vllm(["e"], ["5"], **kwargs)
        return [], 1, True

    monkeypatch.setattr(gen, "_generate_vllm", one_dispatch)
    gen.eval_dataloader = []
    gen.generate_eval_samples(n_samples_per_prompt=2)
    assert calls[0][1]["sampling_params"].extra_args == {ax.MODE_KEY: "eval", ax.REWARD_KEY: "r.py"}
    assert not gen._in_eval and samples_generator.SamplingParams is SamplingParams  # both restored
