"""AdaptThink's rollout executor (`--train.agent_func_path` this file; THU-KEG/AdaptThink
`adapt_think_vllm_rollout.py` L255-303): of each prompt's G training calls, the first round(G·ρ) get the no-think
token forced as the first response token, the rest the thinking token; the forced token is in the action span, each
mode has its own cap, and `nothink` and the label's `ref_acc` go to extra_logs. Evaluation requests are never
forced. The plug-in's samples generator marks every request train or eval (`marked_requests`); an unmarked one is
refused. The executor grades with the run's reward-function file itself: OpenRLHF replaces --reward.remote_url by
"agent" when an executor is set. See docs/methods.md#adaptthink-outside-the-advantage-step.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import math
from copy import deepcopy

from openrlhf.utils.agent import AgentExecutorBase

from lead_recipes.reward.logs import error_logs, reward_result

MODE_KEY = "lead_recipes_rollout"  # SamplingParams.extra_args key: "train" or "eval"
FORCING_KEY = "lead_recipes_adaptthink"  # the forcing settings of a training request
REWARD_KEY = "lead_recipes_reward"  # the reward-function file the executor grades with
NO_REF_ACC = -1.0  # echoed for a label without "ref_acc": the method refuses it, naming the prompt

log = logging.getLogger("lead_recipes.training.adaptthink_executor")


def request_extra_args(args, training: bool) -> dict:
    """What the samples generator attaches to every request's SamplingParams.extra_args (plain values: they cross
    into the vLLM actors): the mode, the reward file, and in training the forcing settings."""
    cfg = args.recipe.adaptthink
    extra = {MODE_KEY: "train" if training else "eval", REWARD_KEY: args.recipe_reward_url}
    if training:
        extra[FORCING_KEY] = {
            "n": int(args.rollout.n_samples_per_prompt),
            "rho": float(cfg.rho),
            "nothink_token_id": int(cfg.nothink_token_id),
            "think_token_id": int(cfg.think_token_id),
            "nothink_cap": int(cfg.nothink_cap),
        }
    return extra


class MarkedSamplingParams:
    """Stands in for vLLM's SamplingParams in OpenRLHF's samples generator while it dispatches: the same call with
    `extra_args` added. A top-level class, so it pickles by reference."""

    def __init__(self, original, extra: dict):
        self.original, self.extra = original, extra

    def __call__(self, *args, **kwargs):
        return self.original(*args, **kwargs, extra_args=dict(self.extra))


@contextlib.contextmanager
def marked_requests(args, training: bool):
    """While dispatching, every SamplingParams OpenRLHF builds carries the request mode (adaptthink only)."""
    if getattr(getattr(args, "recipe", None), "method", None) != "adaptthink":
        yield
        return
    module = importlib.import_module("openrlhf.trainer.ppo_utils.samples_generator")
    original = module.SamplingParams
    module.SamplingParams = MarkedSamplingParams(original, request_extra_args(args, training))
    try:
        yield
    finally:
        module.SamplingParams = original


def _load_reward_func(path: str):
    if not isinstance(path, str) or not path.endswith(".py"):
        raise RuntimeError(
            f"the AdaptThink executor grades with a reward-function file, got --reward.remote_url {path!r}: pass "
            "lead-recipes' reward_func.py (an HTTP URL through `lead-recipes train`, which routes it via "
            "remote_reward.py)"
        )
    spec = importlib.util.spec_from_file_location("lead_recipes_executor_reward", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.reward_func


def _ref_acc(label) -> float:
    value = label.get("ref_acc") if isinstance(label, dict) else None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else NO_REF_ACC


class AgentExecutor(AgentExecutorBase):
    """OpenRLHF's single-turn generation with AdaptThink's first-token forcing (training requests only)."""

    def __init__(self):
        self.calls: dict[str, int] = {}  # training calls per prompt text, mod G (a finished group holds no entry)
        self.reward_funcs: dict[str, object] = {}
        self.failures_logged: set[str] = set()

    def forced_token(self, prompt: str, forcing: dict) -> tuple[int, bool]:
        """(token id, no-think?) of this call: calls k = 0..G−1 of a prompt (mod G) are no-think while
        k < round(G·ρ). Runs before the first await, so a prompt's G calls of one gather are counted in order."""
        k = self.calls.pop(prompt, 0)
        if k + 1 < forcing["n"]:  # the entry goes with the group's last call: the count never grows with the data
            self.calls[prompt] = k + 1
        nothink = k < round(forcing["n"] * forcing["rho"])
        return forcing["nothink_token_id" if nothink else "think_token_id"], nothink

    async def grade(self, reward_path: str, query: str, prompt, label) -> dict:
        """The reward file's answer for one sample. Its failure (an exception, or not a dict) grades the sample
        `error` (reward 0, status_error, which the grading guard counts) instead of failing the prompt's G rollouts
        and with them the run."""
        try:
            info = await asyncio.to_thread(self.reward_funcs[reward_path], [query], [prompt], [label])
            if not isinstance(info, dict):
                raise TypeError(f"it returned {type(info).__name__}, not a dict")
            return info
        except Exception as e:  # noqa: BLE001
            if type(e).__name__ not in self.failures_logged:  # once per kind: a broken grader would flood the log
                self.failures_logged.add(type(e).__name__)
                log.error("AdaptThink executor: the reward function %s failed (%r); graded `error`", reward_path, e)
            logs = error_logs(1, [label], [query])[0]
            return reward_result([0.0], {k: [v] for k, v in logs.items()})

    async def execute(self, prompt, label, sampling_params, max_length: int, hf_tokenizer, llm_engine, images=None):
        extra = dict(sampling_params.extra_args or {})
        mode, forcing, reward_path = (
            extra.pop(MODE_KEY, None),
            extra.pop(FORCING_KEY, None),
            extra.pop(REWARD_KEY, None),
        )
        if mode not in ("train", "eval") or (mode == "train" and forcing is None):
            raise RuntimeError(
                "AdaptThink executor: the request is not marked train or eval; run it through `lead-recipes train "
                "--recipe.method adaptthink` (its samples generator marks each request)"
            )
        if images:
            raise RuntimeError("AdaptThink executor: image prompts are not supported")
        forced, nothink = self.forced_token(prompt, forcing) if mode == "train" else (None, False)
        params = deepcopy(sampling_params)
        params.extra_args = extra or None
        prompt_ids = hf_tokenizer(text=prompt, add_special_tokens=False)["input_ids"]
        cap = params.max_tokens or max(1, max_length - len(prompt_ids))
        if forced is not None:
            cap = min(cap, forcing["nothink_cap"]) if nothink else cap
        room = max(1, max_length - cap)  # OpenRLHF's single-turn rule: keep the last max_length − cap prompt tokens
        prompt_ids = prompt_ids[-room:]
        head = prompt_ids + ([forced] if forced is not None else [])
        params.max_tokens = cap - (forced is not None)  # the forced token counts toward the cap (the code's − 1)
        output = (await llm_engine.generate(head, params)).outputs[0]
        observation = head + list(output.token_ids)
        log_probs = None
        if params.logprobs is not None and output.logprobs is not None:
            first = [math.log(forcing["rho"] if nothink else 1 - forcing["rho"])] if forced is not None else []
            sampled = [d[t].logprob if d.get(t) is not None else 0.0 for t, d in zip(output.token_ids, output.logprobs)]
            log_probs = [0.0] * len(prompt_ids) + first + sampled
        result = {
            "prompt": prompt,
            "label": label,
            "images": None,
            "mm_train_inputs": None,
            "observation_tokens": observation,
            "action_ranges": [(len(prompt_ids), len(observation))],
            "rollout_log_probs": log_probs,
            "truncated": output.finish_reason == "length",
            "reward": None,
            "scores": None,
            "extra_logs": {},
        }
        if reward_path not in self.reward_funcs:
            self.reward_funcs[reward_path] = _load_reward_func(reward_path)
        query = hf_tokenizer.decode(observation, skip_special_tokens=False)
        info = await self.grade(reward_path, query, prompt, label)
        logs = dict(info.get("extra_logs") or {})
        logs.update(nothink=1.0 if nothink else 0.0, ref_acc=_ref_acc(label))
        result.update(reward=info.get("rewards"), scores=info.get("scores"), extra_logs=logs)
        return result
