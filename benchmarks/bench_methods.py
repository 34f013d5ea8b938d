"""Benchmark: per-method advantage computation vs OpenRLHF's stock `group_norm` arithmetic, same tensors, same run.
Rows: `Method.step` and the bare method function, medians of round-robin timed calls, ratio to the anchor; a second
table adds the broadcast over the action mask. Not collected by pytest (no test_ prefix). Batch, anchor and runs:
docs/benchmarks.md#methods-against-openrlhfs-group_norm.

    .venv/bin/python benchmarks/bench_methods.py [--prompts 1024] [--n 8] [--reps 200] [--threads 1]
                                                       [--broadcast-reps 11]"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

import torch

from lead_recipes.methods import build_method
from lead_recipes.methods.base import RolloutBatch, check_batch
from lead_recipes.methods.baseline_config import AroraZanetteConfig
from lead_recipes.methods.config import (
    METHODS,
    ComposedConfig,
    GdpoConfig,
    GrpoLeadConfig,
    LeadConfig,
    RecipeConfig,
    ScalarizedConfig,
    ShorterBetterConfig,
)


def make_batch(prompts: int, n: int, cap: int, seed: int = 0) -> RolloutBatch:
    g = torch.Generator().manual_seed(seed)
    p = torch.rand(prompts, 1, generator=g)
    correct = torch.rand(prompts, n, generator=g) < p
    lengths = torch.randint(1, cap + 1, (prompts, n), generator=g).to(torch.float32)
    lengths[torch.rand(prompts, n, generator=g) < 0.05] = cap
    n_gold = torch.randint(100, 4001, (prompts,), generator=g).float()  # L1's targets; ignored by other methods
    return RolloutBatch(correct, lengths, cap, n_gold=n_gold, l1_max=torch.arange(prompts) % 2 == 1)


# The anchor: OpenRLHF 0.11.2 experience_maker.py's group_norm, re-typed because its three lines are inline in
# compute_advantages_and_returns, not importable on their own.
def stock_group_norm(rewards: torch.Tensor, n: int) -> torch.Tensor:
    r = rewards.reshape(-1, n)
    return (r - r.mean(-1, keepdim=True)) / (r.std(-1, keepdim=True) + 1e-9)


def interleaved_medians(fns: dict, reps: int) -> dict[str, float]:
    """Median seconds per call of each fn, timed round-robin (one call of each per round) so that load drift on a
    shared machine hits every row alike, after a few warm-up rounds."""
    for _ in range(max(3, reps // 10)):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(reps):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def bare_functions(b: RolloutBatch):
    """The method functions alone on a pre-validated batch (controllers fresh each call)."""
    from lead_recipes.methods.arora_zanette import arora_zanette
    from lead_recipes.methods.composed import composed
    from lead_recipes.methods.controllers import LeadController
    from lead_recipes.methods.gdpo import gdpo
    from lead_recipes.methods.grpo import grpo, grpo_scalarized
    from lead_recipes.methods.grpo_lead import grpo_lead
    from lead_recipes.methods.kimi import kimi
    from lead_recipes.methods.l1 import l1
    from lead_recipes.methods.lead import lead
    from lead_recipes.methods.leash import leash
    from lead_recipes.methods.shorter_better import shorter_better
    from lead_recipes.methods.thinkprune import thinkprune

    c, l, cap = b.correct, b.lengths, b.max_new_tokens
    ok, exact = c & ~b.truncated, torch.zeros_like(b.l1_max)
    return {
        "grpo": lambda: grpo(c, l),
        "grpo-scalarized": lambda: grpo_scalarized(c, l, cap, ScalarizedConfig(), LeadConfig()),
        "gdpo": lambda: gdpo(c, l, cap, GdpoConfig(), LeadConfig()),
        "lead": lambda: lead(c, l, cap, LeadConfig(), LeadController()),
        "grpo-lead": lambda: grpo_lead(c, l, b.truncated, None, GrpoLeadConfig()),
        "leash": lambda: leash(c, l, 4096.0, 0.1),
        "shorter-better": lambda: shorter_better(c, l, ShorterBetterConfig()),
        "arora-zanette": lambda: arora_zanette(ok, l, AroraZanetteConfig()),
        "l1-exact": lambda: l1(ok, l, b.n_gold, exact, 3e-4, 1e-3, 0.5),
        "l1-max": lambda: l1(ok, l, b.n_gold, b.l1_max, 3e-4, 1e-3, 0.5),
        "kimi": lambda: kimi(ok, l, 0.4, "group_norm"),
        "thinkprune": lambda: thinkprune(c, l, b.truncated, cap, False),
        "composed": lambda: composed(
            c,
            l,
            b.truncated,
            None,
            cap,
            cap / 2,
            0.1,
            ComposedConfig(),
            LeadConfig(),
            GrpoLeadConfig(),
            LeadController(),
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False)
    ap.add_argument("--prompts", type=int, default=1024)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--cap", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--broadcast-reps", type=int, default=11)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    batch = make_batch(args.prompts, args.n, args.cap)
    rewards = batch.correct.to(torch.float32).reshape(-1)
    checked = check_batch(batch)
    bare = bare_functions(checked)
    methods = {name: build_method(RecipeConfig.of({"method": name})) for name in METHODS}
    # l1-exact refuses prompts that ask for a maximum: it gets the same batch with every prompt in exact mode
    batches = {name: batch for name in METHODS} | {"l1-exact": replace(batch, l1_max=torch.zeros_like(batch.l1_max))}
    fns = {"stock group_norm (anchor)": lambda: stock_group_norm(rewards, args.n)}
    for name, m in methods.items():
        fns[f"{name}: Method.step"] = lambda m=m, b=batches[name]: m.step(b)
        fns[f"{name}: function only"] = bare[name]
    med = interleaved_medians(fns, args.reps)
    anchor = med["stock group_norm (anchor)"]
    print(
        f"# {args.prompts} prompts x {args.n} rollouts, lengths ≤ {args.cap}, torch {torch.__version__}, "
        f"{args.threads} thread(s), {args.reps} interleaved reps; shared noisy machine"
    )
    print(f"| {'computation':<34} | {'median µs':>10} | {'× stock':>8} |")
    print(f"|{'-' * 36}|{'-' * 12}|{'-' * 10}|")
    for label, t in med.items():
        print(f"| {label:<34} | {t * 1e6:>10.1f} | {t / anchor:>8.1f} |")
    if args.broadcast_reps > 0:
        mask = (torch.arange(args.cap).unsqueeze(0) < batch.lengths.reshape(-1, 1)).to(torch.float32)
        out = torch.empty_like(mask)  # reused: keeps the allocator (and its noise) out of the timing

        def broadcast(adv: torch.Tensor) -> torch.Tensor:
            return torch.mul(adv.reshape(-1, 1).to(torch.float32), mask, out=out)

        fns = {"stock group_norm + broadcast": lambda: broadcast(stock_group_norm(rewards, args.n))}
        for name, m in methods.items():
            fns[f"{name} + broadcast"] = lambda m=m, b=batches[name]: broadcast(m.step(b).advantages)
        med = interleaved_medians(fns, args.broadcast_reps)
        base = med["stock group_norm + broadcast"]
        print(
            f"\n# + broadcast over the action mask [{mask.shape[0]} x {mask.shape[1]}], "
            f"{args.broadcast_reps} interleaved reps"
        )
        print(f"| {'computation':<34} | {'median ms':>10} | {'× stock':>8} |")
        print(f"|{'-' * 36}|{'-' * 12}|{'-' * 10}|")
        for label, t in med.items():
            print(f"| {label:<34} | {t * 1e3:>10.1f} | {t / base:>8.2f} |")


if __name__ == "__main__":
    main()
