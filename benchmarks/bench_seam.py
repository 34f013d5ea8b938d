"""Benchmark: the trainer-side advantage step, stock OpenRLHF (`compute_advantages_and_returns` with `group_norm`, the
anchor) vs lead-recipes' OpenRLHF plug-in for every method, same experiences, same run; prints the median seconds
per call and the ratio to stock. Not collected by pytest. Sizes, target and runs:
docs/benchmarks.md#the-openrlhf-plug-in-against-stock-compute_advantages_and_returns.

    .venv/bin/python benchmarks/bench_seam.py [--prompts 1024] [--stock-reps 2] [--reps 3] [--threads 2]"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from types import SimpleNamespace as NS

import torch


def make_args(n: int, max_new: int, estimator: str = "group_norm", method: str = "grpo"):
    from lead_recipes.methods.config import RecipeConfig

    recipe = RecipeConfig(method=method)
    return NS(
        algo=NS(
            advantage=NS(estimator=estimator, gamma=1.0, lambd=1.0, no_std_norm=False),
            kl=NS(use_loss=False, estimator="k1"),
        ),
        rollout=NS(n_samples_per_prompt=n, max_new_tokens=max_new, micro_batch_size=16),
        reward=NS(clip_range=(-10, 10), overlong_buffer_len=None, stop_properly_penalty_coef=None),
        data=NS(max_len=max_new + 1024),
        train=NS(dynamic_batch_enable=False),
        ckpt=NS(path="/tmp/unused"),
        recipe=recipe,
    )


def make_experiences(prompts: int, n: int, max_new: int, micro: int, seed: int = 0):
    """Experiences as make_experience leaves them: rewards, kl, action_mask, index, info (the keys the reward function
    puts into info)."""
    from openrlhf.trainer.ppo_utils.experience import Experience

    g = torch.Generator().manual_seed(seed)
    total = prompts * n
    p_correct = torch.rand(prompts, 1, generator=g).expand(prompts, n)
    correct = (torch.rand(prompts, n, generator=g) < p_correct).reshape(-1).float()
    lengths = torch.randint(1, max_new + 1, (total,), generator=g)
    lengths[torch.rand(total, generator=g) < 0.05] = max_new
    # L1's per-prompt target and mode, as the reward function echoes them from the label (ignored by other methods)
    n_gold = torch.randint(100, 4001, (prompts,), generator=g).float().repeat_interleave(n)
    l1_max = (torch.arange(prompts) % 2).float().repeat_interleave(n)
    positions = torch.arange(max_new)
    perm = torch.randperm(total, generator=g)  # micro-batches hold samples in an arbitrary order (dynamic batching)
    experiences = []
    for start in range(0, total, micro):
        idx = perm[start : start + micro]
        mask = positions[None, :] < lengths[idx, None]
        status = torch.zeros(len(idx), 5)
        status[torch.arange(len(idx)), (1 - correct[idx]).long()] = 1.0
        info = {
            "correct": correct[idx].clone(),
            "repetitive": torch.zeros(len(idx)),
            **{
                k: status[:, i].clone()
                for i, k in enumerate(
                    ("status_correct", "status_wrong", "status_no_answer", "status_timeout", "status_error")
                )
            },
            "grade_latency_s": torch.full((len(idx),), 0.01),
            "n_gold": n_gold[idx].clone(),
            "l1_max": l1_max[idx].clone(),
        }
        experiences.append(
            Experience(
                action_mask=mask,
                kl=torch.randn(len(idx), max_new, generator=g) * 1e-3 * mask,
                rewards=correct[idx].clone(),
                response_length=lengths[idx].clone(),
                truncated=lengths[idx] >= max_new,
                index=idx.tolist(),
                prompts=[f"prompt {int(i) // n}" for i in idx],
                labels=["1"] * len(idx),
                info=info,
            )
        )
    return experiences


def time_call(maker, build, reps: int) -> list[float]:
    times = []
    for _ in range(reps):
        experiences = build()
        t0 = time.perf_counter()
        maker.compute_advantages_and_returns(experiences)
        times.append(time.perf_counter() - t0)
        del experiences
    return times


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=1024)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--max-new", type=int, default=4096)
    ap.add_argument("--micro", type=int, default=16)
    ap.add_argument("--stock-reps", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)

    from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker
    from openrlhf.trainer.ppo_utils.kl_controller import FixedKLController

    from lead_recipes.methods.config import METHODS
    from lead_recipes.training.openrlhf_plugin import RecipeExperienceMaker

    def build():
        return make_experiences(a.prompts, a.n, a.max_new, a.micro)

    kl = FixedKLController(0.001)
    rows = []
    # one untimed call first: the process's allocator arenas and lazy imports warm up once for every variant
    RecipeExperienceMaker(
        None, None, None, None, kl, NS(args=make_args(a.n, a.max_new)), None
    ).compute_advantages_and_returns(build())
    stock = RemoteExperienceMaker(None, None, None, None, kl, NS(args=make_args(a.n, a.max_new)), None)
    rows.append(("stock group_norm", time_call(stock, build, a.stock_reps)))
    print(f"stock done: {rows[-1][1]}", file=sys.stderr, flush=True)
    for method in METHODS:
        args = make_args(a.n, a.max_new, method=method)
        maker = RecipeExperienceMaker(None, None, None, None, kl, NS(args=args), None)
        try:
            rows.append((f"seam {method}", time_call(maker, build, a.reps)))
        except ValueError as e:  # l1-exact: half the prompts ask for a maximum; a plug-in without L1 targets
            print(f"{method} not timed: {e}", file=sys.stderr, flush=True)
            continue
        print(f"{method} done: {rows[-1][1]}", file=sys.stderr, flush=True)

    base = statistics.median(rows[0][1])
    print(
        f"\n{a.prompts} prompts x {a.n} = {a.prompts * a.n} experiences, {a.max_new}-token action masks, "
        f"micro-batches of {a.micro}, torch threads {a.threads}"
    )
    print("| variant | runs | median s | ratio to stock |\n|---|---|---|---|")
    for name, times in rows:
        med = statistics.median(times)
        print(f"| {name} | {len(times)} | {med:.3f} | {med / base:.4f} |")
    worst = max(statistics.median(t) for _, t in rows[1:]) / base
    print(f"\nworst method ratio {worst:.4f} (target ≤ 0.1): {'MET' if worst <= 0.1 else 'NOT MET'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
