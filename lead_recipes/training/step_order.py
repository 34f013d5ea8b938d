"""The order of each DP rank's samples across its optimizer steps with `--train.dynamic_batch_enable`: OpenRLHF's
`balance_experiences` (which samples go to which rank), then each rank's samples dealt into its steps stratified by
length, seeded, so no step sees only the longest and shortest samples. Nothing changes without dynamic batching.
See docs/training.md#optimizer-steps-see-every-length.
"""

from __future__ import annotations

import random

from openrlhf.trainer.ppo_utils.experience import balance_experiences, make_experience_batch, split_experience_batch


def dp_size(args) -> int:
    """OpenRLHF's effective data-parallel size (balance_experiences' and the replay buffer's)."""
    return args.actor.num_nodes * args.actor.num_gpus_per_node // args.ds.ring_attn_size // args.ds.tensor_parallel_size


def dealt(items: list, step_size: int, rng: random.Random) -> list:
    """`items` (one rank's) reordered so that each consecutive `step_size` slice holds one item of every length
    stratum (sorted by length, cut into strata of one item per step, each stratum shuffled across the steps, each
    step shuffled). A count that is not a multiple of `step_size` is shuffled as a whole."""
    steps = len(items) // step_size if step_size > 0 else 0
    if steps <= 1 or len(items) % step_size:
        items = list(items)
        rng.shuffle(items)
        return items
    ranked = sorted(items, key=lambda e: float(e.total_length.sum()), reverse=True)
    per_step: list[list] = [[] for _ in range(steps)]
    for start in range(0, len(ranked), steps):
        stratum = ranked[start : start + steps]
        rng.shuffle(stratum)
        for slot, item in zip(per_step, stratum):
            slot.append(item)
    out = []
    for slot in per_step:
        rng.shuffle(slot)
        out += slot
    return out


def balanced_then_shuffled(experiences, args, seed: int = 0):
    """OpenRLHF's balance_experiences, then each rank's samples dealt into its optimizer steps (`dealt`),
    seeded by `seed`."""
    ranks = balance_experiences(experiences, args)
    rng = random.Random(seed)
    step_size = args.train.batch_size // max(dp_size(args), 1)
    return [make_experience_batch(dealt(split_experience_batch(batch), step_size, rng)) for batch in ranks]
