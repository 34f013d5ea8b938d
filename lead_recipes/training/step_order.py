"""The order of each DP rank's samples across its optimizer steps with `--train.dynamic_batch_enable`: OpenRLHF's
`balance_experiences` (which samples go to which rank), then each rank's samples dealt into its steps stratified by
length, seeded, so no step sees only the longest and shortest samples; with `--train.max_epochs` > 1 the policy
actor deals them anew for each later epoch. Nothing changes without dynamic batching.
See docs/training.md#optimizer-steps-see-every-length.
"""

from __future__ import annotations

import contextlib
import random

import ray
from openrlhf.trainer.ppo_utils.experience import balance_experiences, make_experience_batch, split_experience_batch
from openrlhf.trainer.ray.ppo_actor import PolicyModelActor


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


def merged_epochs(statuses: list[dict]) -> dict:
    """One status of several one-epoch ppo_train passes over the same samples: each value's mean over the epochs
    (equal sample and token counts, so upstream's weighted mean), the last learning rate and grad norm."""
    out = {}
    for key in set().union(*statuses):
        values = [s[key] for s in statuses if key in s]
        out[key] = values[-1] if key in ("actor_grad_norm", "actor_lr") else sum(values) / len(values)
    return out


class RecipePolicyModelActor(PolicyModelActor.__ray_actor_class__):
    """OpenRLHF's policy actor whose `--train.max_epochs` passes over a rollout each get their own deal of this
    rank's samples into its optimizer steps (upstream's dynamic-batching loop repeats the first epoch's order): the
    trainer's deal for the first, then `dealt` seeded by --train.seed, the epoch and the samples' tokens."""

    def fit(self, kl_ctl: float = 0):
        trainer, args = self.trainer, self.strategy.args
        if not args.train.dynamic_batch_enable or trainer.max_epochs <= 1:
            return super().fit(kl_ctl)
        one_pass, epochs = trainer.ppo_train, trainer.max_epochs
        items = list(trainer.replay_buffer.items)
        tokens = sum(int(e.sequences.sum()) for e in items)
        step_size = args.train.batch_size // max(dp_size(args), 1)

        def each_epoch_dealt(kl):
            statuses = []
            for epoch in range(epochs):
                if epoch:  # setup_dynamic_batch in ppo_train cuts the new order into steps and micro-batches
                    rng = random.Random(f"{args.train.seed}:{epoch}:{tokens}")
                    trainer.replay_buffer.items[:] = dealt(items, step_size, rng)
                statuses.append(one_pass(kl))
            return merged_epochs(statuses)

        trainer.max_epochs, trainer.ppo_train = 1, each_epoch_dealt
        try:
            return super().fit(kl_ctl)
        finally:
            trainer.max_epochs = epochs
            with contextlib.suppress(AttributeError):
                del trainer.ppo_train


RecipePolicyModelActorRemote = ray.remote(num_gpus=1)(RecipePolicyModelActor)
