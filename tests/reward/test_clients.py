"""The TRL and verl client functions against a real `lead-recipes serve` (a subprocess on a 127.0.0.1 port). TRL
and verl are not installed: each test calls the function exactly as that framework does (TRL 1.16's `GRPOTrainer`
passes `prompts`, `completions`, `completion_ids`, `trainer_state`, `log_extra`, `log_metric` and every dataset column
by keyword; verl's reward managers pass `data_source`, `solution_str`, `ground_truth`, `extra_info` by keyword)."""

from __future__ import annotations

import pickle
import signal

import pytest
from support.reward_server import TOKEN, start_serve

from lead_recipes.reward.clients import TRLReward, verl_compute_score, verl_compute_score_batch
from lead_recipes.reward.logs import REWARD_LOG_KEYS
from lead_recipes.reward.remote_reward import TOKEN_ENV, URLS_ENV


@pytest.fixture(scope="module")
def url():
    proc, base, _ = start_serve("--serve.token", TOKEN)
    yield f"{base}/get_reward"
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)


@pytest.fixture
def env(url, monkeypatch):
    monkeypatch.setenv(URLS_ENV, url)
    monkeypatch.setenv(TOKEN_ENV, TOKEN)


def test_trl_reward_grades_conversational_completions_by_the_answer_column(env):
    prompts = [[{"role": "user", "content": "What is 2?"}]] * 3
    completions = [[{"role": "assistant", "content": c}] for c in ("\\boxed{2}", "\\boxed{3}", "no idea")]
    rewards = TRLReward()(
        prompts=prompts, completions=completions, completion_ids=[[1]] * 3, trainer_state=None, answer=["2"] * 3
    )
    assert rewards == [1.0, 0.0, 0.0]


def test_trl_reward_grades_standard_completions_that_contain_the_prompt_text(env):
    rewards = TRLReward(label_key="solution")(
        prompts=["1", "2"], completions=["Answer: \\boxed{12}", "\\boxed{2}"], solution=["12", "2"]
    )
    assert rewards == [1.0, 1.0]


def test_trl_reward_without_its_label_column_names_the_columns_and_the_fix(env):
    with pytest.raises(KeyError, match="'answer'.*columns: solution.*label_key"):
        TRLReward()(prompts=["p"], completions=["\\boxed{1}"], completion_ids=[[1]], solution=["1"], log_metric=print)


def test_trl_reward_pickles_with_its_name(url):
    back = pickle.loads(pickle.dumps(TRLReward(urls=[url])))
    assert back.__name__ == "lead_recipes_correct" and back.urls == (url,)


def test_verl_compute_score_returns_the_score_and_every_log_key(env):
    right = verl_compute_score(data_source="math", solution_str="so \\boxed{12}", ground_truth="12", extra_info={})
    wrong = verl_compute_score(data_source="math", solution_str="\\boxed{1}", ground_truth="12", extra_info=None)
    assert right["score"] == 1.0 and wrong["score"] == 0.0
    assert set(REWARD_LOG_KEYS) <= set(right) and right["status_correct"] == 1.0 and wrong["status_wrong"] == 1.0


def test_verl_batch_applies_a_precision_stated_in_extra_infos_question(env):
    out = verl_compute_score_batch(
        data_sources=["math"] * 2,
        solution_strs=["\\boxed{0.330}"] * 2,
        ground_truths=["\\frac13"] * 2,
        extra_infos=[{"question": "What is 1/3 to the nearest hundredth?"}, {"question": "What is 1/3?"}],
    )
    assert [o["score"] for o in out] == [1.0, 0.0]


def test_a_client_with_no_server_configured_says_which_variable_to_set(monkeypatch):
    monkeypatch.delenv(URLS_ENV, raising=False)
    with pytest.raises(ValueError, match=URLS_ENV):
        verl_compute_score(data_source="m", solution_str="\\boxed{1}", ground_truth="1")
