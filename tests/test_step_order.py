"""With --train.dynamic_batch_enable every optimizer step of a rollout sees the whole range of lengths, not the
extremes first and the middle last (OpenRLHF's balance_experiences order, which the replay buffer does not shuffle
then), and each rank keeps exactly the samples, hence the tokens, OpenRLHF's balancing gave it."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest
import torch
from openrlhf.trainer.ppo_utils.experience import Experience, balance_experiences, split_experience_batch

from lead_recipes.training.step_order import balanced_then_shuffled


def _args(dp, train_batch):
    return NS(
        actor=NS(num_nodes=1, num_gpus_per_node=dp),
        ds=NS(ring_attn_size=1, tensor_parallel_size=1),
        train=NS(batch_size=train_batch),
    )


def _samples(lengths):
    out = []
    for i, n in enumerate(lengths):
        seq = torch.arange(1, n + 1)[None]
        out.append(
            Experience(
                sequences=seq,
                attention_mask=torch.ones_like(seq),
                action_mask=torch.ones(1, n - 1),
                total_length=torch.tensor([float(n)]),
                response_length=torch.tensor([float(n - 1)]),
                prompts=[f"p{i}"],
                labels=["1"],
                info={"sample": torch.tensor([float(i)])},
            )
        )
    return out


def _ids(batch) -> list[float]:
    return [float(x) for x in batch.info["sample"]]


def optimizer_steps(rank_batches, step_size):
    """Each rank's samples cut as the replay buffer cuts them: consecutive slices of train.batch_size / dp."""
    steps = []
    for batch in rank_batches:
        lengths = [int(e.total_length.item()) for e in split_experience_batch(batch)]
        steps.append([lengths[i : i + step_size] for i in range(0, len(lengths), step_size)])
    return steps


def spans(steps) -> bool:
    """Every optimizer step of every rank holds one of its rank's longest and one of its shortest quarter."""
    for rank in steps:
        ranked = sorted(x for step in rank for x in step)
        low, high = ranked[len(ranked) // 4 - 1], ranked[-(len(ranked) // 4)]
        if not all(min(step) <= low and max(step) >= high for step in rank):
            return False
    return True


@pytest.mark.parametrize("dp, train_batch", [(1, 16), (2, 16), (4, 32)])
def test_each_optimizer_step_spans_the_lengths_and_each_rank_keeps_its_samples(dp, train_batch):
    lengths = [20 + (37 * i) % 200 for i in range(64)]  # 64 distinct lengths in a scrambled order
    upstream = balance_experiences(_samples(lengths), _args(dp, train_batch))
    ours = balanced_then_shuffled(_samples(lengths), _args(dp, train_batch), seed=7)
    size = train_batch // dp
    assert not spans(optimizer_steps(upstream, size))  # as read: the first steps extremes, the last the middle
    assert spans(optimizer_steps(ours, size))
    for a, b in zip(upstream, ours):  # same samples per rank: token balance kept
        assert sorted(_ids(a)) == sorted(_ids(b))
        assert a.total_length.sum() == b.total_length.sum()


def test_the_order_is_deterministic_in_the_seed():
    lengths = [20 + (37 * i) % 200 for i in range(32)]
    runs = [[_ids(e) for e in balanced_then_shuffled(_samples(lengths), _args(2, 8), seed=s)] for s in (1, 1, 2)]
    assert runs[0] == runs[1] != runs[2]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_trainers_optimizer_steps_each_span_the_lengths(ray_local, tiny_qwen2, prompt_file, tmp_path):  # noqa: F811
    """The real PPOTrainer.train_step with --train.dynamic_batch_enable: what it appends to the actor (the replay
    buffer's input) cut into the optimizer steps of --train.batch_size 8 (4 per rollout of 32 samples)."""
    from test_grading_gate import recording_trainer

    trainer, calls = recording_trainer(
        tiny_qwen2,
        prompt_file,
        tmp_path / "ckpt",
        healthy=16,
        extra=[
            "--train.dynamic_batch_enable",
            "--train.batch_size",
            "8",
            "--train.max_tokens_per_gpu",
            "4096",
            "--vllm.num_engines",
            "1",
        ],
    )
    appended = []
    trainer.actor_model_group.async_run_method_batch = lambda **kw: appended.append(kw["experience"]) or []
    trainer.fit()
    assert len(calls["ppo_train"]) == 4 and len(appended) == 4
    for rollout in appended:
        assert spans(optimizer_steps(rollout, 8))


from test_openrlhf_plugin import prompt_file, ray_local  # noqa: E402,F401  (fixtures)
