"""The order of the samples each DP rank's optimizer steps see with `--train.dynamic_batch_enable`.

Why: with dynamic batching OpenRLHF does not shuffle the replay buffer, and `balance_experiences`
(ppo_utils/experience.py) orders each rank's samples from the longest and shortest toward the middle; the buffer then
cuts consecutive slices of `train.batch_size / dp` samples into optimizer steps. So the first optimizer step of a
rollout saw only the extremes of length and the last only the middle: a biased order for methods whose advantage
depends on length (measured: tests/benchmarks/bench_step_order.py, docs/training.md).

What it does: `balanced_then_shuffled(experiences, args, seed)` runs OpenRLHF's `balance_experiences` (which samples
go to which rank, so each rank's token count is unchanged) and then deals each rank's samples into its optimizer
steps stratified by length: sorted, cut into strata of one sample per step, each stratum shuffled across the steps,
and each step's samples shuffled. Every optimizer step then holds one sample of every length stratum. Deterministic
in `seed` (the trainer passes the run's seed and the global step). A rank whose sample count is not a multiple of
its step size is shuffled as a whole.

What it does not do: change which samples a rank trains on, or anything without dynamic batching (OpenRLHF
shuffles the replay buffer itself then).
"""
from __future__ import annotations

import random

from openrlhf.trainer.ppo_utils.experience import balance_experiences, make_experience_batch, split_experience_batch


def dp_size(args) -> int:
    """OpenRLHF's effective data-parallel size (balance_experiences' and the replay buffer's)."""
    return (args.actor.num_nodes * args.actor.num_gpus_per_node // args.ds.ring_attn_size
            // args.ds.tensor_parallel_size)


def dealt(items: list, step_size: int, rng: random.Random) -> list:
    """`items` (one rank's) reordered so that each consecutive `step_size` slice holds one item of every length
    stratum, in random order (see module doc)."""
    steps = len(items) // step_size if step_size > 0 else 0
    if steps <= 1 or len(items) % step_size:
        items = list(items)
        rng.shuffle(items)
        return items
    ranked = sorted(items, key=lambda e: float(e.total_length.sum()), reverse=True)
    per_step: list[list] = [[] for _ in range(steps)]
    for start in range(0, len(ranked), steps):
        stratum = ranked[start:start + steps]
        rng.shuffle(stratum)
        for slot, item in zip(per_step, stratum):
            slot.append(item)
    out = []
    for slot in per_step:
        rng.shuffle(slot)
        out += slot
    return out


def balanced_then_shuffled(experiences, args, seed: int = 0):
    """OpenRLHF's balance_experiences, then each rank's samples dealt into its optimizer steps (see module doc)."""
    ranks = balance_experiences(experiences, args)
    rng = random.Random(seed)
    step_size = args.train.batch_size // max(dp_size(args), 1)
    return [make_experience_batch(dealt(split_experience_batch(batch), step_size, rng)) for batch in ranks]
