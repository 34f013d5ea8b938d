"""Measurement: what each optimizer step of one rollout trains on with --train.dynamic_batch_enable, in OpenRLHF's
order (balance_experiences, no shuffle: the anchor, same run) and in ours (lead_recipes.training.step_order): per
step, the samples' mean/min/max length, mean advantage and mean |A|. CPU only, deterministic, a few seconds; not
collected by pytest. Rollout, layout and run:
docs/benchmarks.md#optimizer-step-order-with-dynamic-batching.

    .venv/bin/python benchmarks/bench_step_order.py [--dp 4] [--steps 8] [--seed 0]"""

from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path
from types import SimpleNamespace as NS

import torch
from openrlhf.trainer.ppo_utils.experience import Experience, balance_experiences, split_experience_batch

from lead_recipes.methods import build_method
from lead_recipes.methods.base import RolloutBatch
from lead_recipes.methods.config import RecipeConfig
from lead_recipes.training.step_order import balanced_then_shuffled

ROOT = Path(__file__).resolve().parents[1]
CAP = 4000


def rollout():
    shared = Path(os.environ.get("LEAD_RECIPES_SHARED") or ROOT.parent / "shared")
    groups = [json.loads(x) for x in (shared / "data" / "rollouts" / "qwen25math_cot_math100x8.jsonl").open()]
    correct = torch.tensor([[bool(s["score"]) for s in g["samples"]] for g in groups])
    lengths = torch.tensor(
        [[min(math.ceil(len(s["response"]) / 4) + 1, CAP) for s in g["samples"]] for g in groups], dtype=torch.float32
    )
    out = build_method(RecipeConfig(method="lead")).step(
        RolloutBatch(correct=correct, lengths=lengths, max_new_tokens=CAP)
    )
    samples = []
    for q in range(len(groups)):
        for j in range(correct.shape[1]):
            n = int(lengths[q, j])
            seq = torch.ones(1, n + 1, dtype=torch.long)
            samples.append(
                Experience(
                    sequences=seq,
                    attention_mask=torch.ones_like(seq),
                    action_mask=torch.ones(1, n),
                    total_length=torch.tensor([float(n + 1)]),
                    prompts=[f"q{q}"],
                    labels=["x"],
                    info={"adv": out.advantages[q, j].reshape(1).float(), "len": torch.tensor([float(n)])},
                )
            )
    return samples


def per_step(ranks, step_size):
    rows = []
    for batch in ranks:
        items = split_experience_batch(batch)
        for s in range(len(items) // step_size):
            chunk = items[s * step_size : (s + 1) * step_size]
            lens = [float(e.info["len"].reshape(-1)[0]) for e in chunk]
            adv = [float(e.info["adv"].reshape(-1)[0]) for e in chunk]
            rows.append(
                (
                    s,
                    sum(lens) / len(lens),
                    min(lens),
                    max(lens),
                    sum(adv) / len(adv),
                    sum(abs(a) for a in adv) / len(adv),
                )
            )
    steps = sorted({r[0] for r in rows})
    return [
        [sum(r[k] for r in rows if r[0] == s) / sum(1 for r in rows if r[0] == s) for k in range(1, 6)] for s in steps
    ]


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument("--dp", type=int, default=4)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    samples = rollout()
    args = NS(
        actor=NS(num_nodes=1, num_gpus_per_node=a.dp),
        ds=NS(ring_attn_size=1, tensor_parallel_size=1),
        train=NS(batch_size=len(samples) // a.steps),
    )
    size = args.train.batch_size // a.dp
    tables = {
        "OpenRLHF (anchor)": per_step(balance_experiences(rollout(), args), size),
        "ours": per_step(balanced_then_shuffled(samples, args, seed=a.seed), size),
    }
    print(
        f"{len(samples)} samples, dp {a.dp}, {a.steps} optimizer steps of {size} samples per rank, load "
        f"{os.getloadavg()[0]:.1f}"
    )
    print(
        "| order | step | mean length | min length | max length | mean A | mean abs(A) |\n|---|---|---|---|---|---|---|"
    )
    for name, table in tables.items():
        for s, (mean, lo, hi, adv, absadv) in enumerate(table, 1):
            print(f"| {name} | {s} | {mean:.0f} | {lo:.0f} | {hi:.0f} | {adv:+.3f} | {absadv:.3f} |")


if __name__ == "__main__":
    main()
