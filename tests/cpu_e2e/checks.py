"""Checks on what a CPU end-to-end run left behind (tests only): the advantage the actor trained on against the
method's own advantage for the same samples, problem records, W&B run ids.

What it does: rebuilds each step's RolloutBatch from the actor's training-side record (the shim's E2E_RECORD), runs
the method from the controller state the previous checkpoint saved, and compares per sample and per token.
What it does not do: start anything; read the experience maker's return values (only what reached the loss).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from lead_recipes.flags import add_recipe_flags, recipe_config
from lead_recipes.methods import build_method
from lead_recipes.methods.base import RolloutBatch


def recipe_of(argv: list[str]):
    parser = argparse.ArgumentParser(allow_abbrev=False)
    add_recipe_flags(parser)
    ours, _ = parser.parse_known_args(argv)
    return recipe_config(ours)


def steps_of(rows: list[dict], per_step: int) -> list[list[dict]]:
    assert rows and len(rows) % per_step == 0, f"{len(rows)} trained rows is not a multiple of {per_step} per step"
    return [rows[i:i + per_step] for i in range(0, len(rows), per_step)]


def advantage_mismatches(run, argv: list[str], first_step: int, n: int, cap: int, per_step: int) -> list[str]:
    """For every trained step: each sample's per-token advantage (all tokens: the KL is a loss term, not in the
    reward) equals the method's advantage for that sample, the method run on the step's whole batch from the
    controller state of the checkpoint before the step. Returns the mismatches ([] = all equal)."""
    recipe = recipe_of(argv)
    problems = []
    for k, rows in enumerate(steps_of(run.trained_rows(), per_step)):
        step = first_step + k
        method = build_method(recipe)
        if step > 1:
            method.load_state_dict(run.recipe_state(step - 1)["controller"])
        groups: dict[str, list[dict]] = {}
        for r in rows:
            assert r["prompt"] is not None, "the trained experience carries no prompts"
            groups.setdefault(r["prompt"], []).append(r)
        assert all(len(g) == n for g in groups.values()), {p: len(g) for p, g in groups.items()}
        order = [r for g in groups.values() for r in g]
        shape = (len(groups), n)
        batch = RolloutBatch(
            correct=torch.tensor([r["info"]["correct"] > 0.5 for r in order]).reshape(shape),
            lengths=torch.tensor([float(min(max(len(r["adv"]), 1), cap)) for r in order]).reshape(shape),
            max_new_tokens=cap,
            truncated=torch.tensor([bool(r["truncated"]) for r in order]).reshape(shape),
            repetitive=torch.tensor([r["info"].get("repetitive", 0.0) > 0.5 for r in order]).reshape(shape))
        want = method.step(batch).advantages.reshape(-1)
        for r, a in zip(order, want.tolist()):
            got = torch.tensor(r["adv"])
            if not torch.allclose(got, torch.full_like(got, a), atol=1e-4, rtol=1e-4):
                problems.append(f"step {step}: trained advantage {got[:4].tolist()}... != method's {a:.6f}")
    return problems


def problem_record_counts(ckpt: Path) -> dict[tuple[int, str], int]:
    counts: dict[tuple[int, str], int] = {}
    for line in (ckpt / "recipe_problems.jsonl").read_text().splitlines():
        r = json.loads(line)
        counts[(r["step"], r["prompt_sha1"])] = counts.get((r["step"], r["prompt_sha1"]), 0) + 1
    return counts


def vllm_kl_after_gradient_steps(scalars: dict) -> dict[int, float]:
    """{step: vllm_kl} for every step whose previous step changed the policy (grad_norm > 0): only there does
    vLLM generating with stale weights show. A step with all-equal rewards in every group has zero gradient."""
    grads = next((v for k, v in scalars.items() if k.endswith("grad_norm")), {})
    kl = scalars.get("train/vllm_kl", {})
    return {s: v for s, v in kl.items() if grads.get(s - 1, 0.0) > 0}
