"""`lead-recipes replay`: run logged rollout statistics through a method and its controller, offline, on a CPU.

It shows what a method will do before any GPU hour is spent: the advantage sign pattern per group and the controller
trajectory (LEAD's λ_c/λ_l, Leash's λ), so β_ema, λ_min, Leash's learning rate etc. can be tuned. It does not train,
sample or touch OpenRLHF.

Input JSONL, one line per training step:
  {"step": int, "groups": [{"correct": [bool]*G, "lengths": [int]*G, "truncated": [bool]*G?, "repetitive": [bool]*G?}]}
or `--from-rollouts FILE` (JSONL rows with `answer` and `samples[].response`), graded with the package grader and
chunked into steps of `--prompts-per-step` groups; lengths from `--tokenizer PATH`, else an approximation
(ceil(chars/4) + 1 for EOS), labelled as such. Output JSONL, one line per step:
  {"step", "rewards": [[float]*G]*M, "advantages": [[float]*G]*M, "controller": {...state after the step}, "stats"}
plus a PNG of the controller trajectory and a per-step table on stdout. Method flags: the same --recipe.* flags as
`lead-recipes train` (lead_recipes.flags).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, Iterable

from lead_recipes.flags import add_recipe_flags, recipe_config
from lead_recipes.jsonl import read_jsonl
from lead_recipes.help_format import HelpFormatter

APPROX_LABEL = "approx_tokens=ceil(chars/4)+1"


def _flags(group: dict, key: str, q: int, step: Any, kind, g: int | None) -> list | None:
    v = group.get(key)
    if v is None:
        return None
    if not isinstance(v, list) or not all(isinstance(x, kind) and not (kind is not bool and isinstance(x, bool))
                                          for x in v):
        raise ValueError(f"step {step}, prompt {q}: {key!r} must be a list of "
                         f"{'booleans' if kind is bool else 'numbers'}")
    if g is not None and len(v) != g:
        raise ValueError(f"step {step}, prompt {q}: {key!r} has {len(v)} entries, expected G = {g}")
    return v


def batch_from_record(rec: dict, max_new_tokens: int):
    """One input line → RolloutBatch. ValueError names the step and the prompt index on bad input."""
    import torch
    from lead_recipes.methods.base import RolloutBatch
    step = rec.get("step") if isinstance(rec, dict) else None
    if not isinstance(rec, dict) or isinstance(step, bool) or not isinstance(step, int):
        raise ValueError(f"each line needs an integer 'step' and a 'groups' list, got {str(rec)[:80]!r}")
    groups = rec.get("groups")
    if not isinstance(groups, list) or not groups:
        raise ValueError(f"step {step}: 'groups' must be a non-empty list")
    cols: dict[str, list] = {"correct": [], "lengths": [], "truncated": [], "repetitive": []}
    g = None
    for q, grp in enumerate(groups):
        if not isinstance(grp, dict):
            raise ValueError(f"step {step}, prompt {q}: a group must be an object")
        correct = _flags(grp, "correct", q, step, bool, None)
        if not correct:
            raise ValueError(f"step {step}, prompt {q}: empty or missing 'correct'")
        if g is None:
            g = len(correct)
        elif len(correct) != g:
            raise ValueError(f"step {step}, prompt {q}: G = {len(correct)} rollouts, but prompt 0 has {g}")
        lengths = _flags(grp, "lengths", q, step, (int, float), g)
        if lengths is None:
            raise ValueError(f"step {step}, prompt {q}: missing 'lengths'")
        cols["correct"].append(correct)
        cols["lengths"].append(lengths)
        cols["truncated"].append(_flags(grp, "truncated", q, step, bool, g))
        cols["repetitive"].append(_flags(grp, "repetitive", q, step, bool, g))

    def opt(key):  # an optional flag column is used only when every group has it
        rows = cols[key]
        return None if any(r is None for r in rows) else torch.tensor(rows, dtype=torch.bool)

    return RolloutBatch(correct=torch.tensor(cols["correct"], dtype=torch.bool),
                        lengths=torch.tensor(cols["lengths"], dtype=torch.float32),
                        max_new_tokens=max_new_tokens, truncated=opt("truncated"), repetitive=opt("repetitive"))


def length_counter(tokenizer: str | None):
    """(count(text) -> int, unit label). Counts include one EOS token, as the trainer's action mask does."""
    if tokenizer:
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(tokenizer, local_files_only=True)
        return (lambda text: len(tok.encode(text, add_special_tokens=False)) + 1), f"tokens({tokenizer})+EOS"
    return (lambda text: math.ceil(len(text) / 4) + 1), APPROX_LABEL


def records_from_rollouts(path: Path, prompts_per_step: int, max_new_tokens: int, tokenizer: str | None,
                          epochs: int = 1, grader=None) -> tuple[list[dict], str]:
    """Grade a rollouts file and chunk its groups into steps. Lengths above the cap count at the cap and are
    marked truncated. Returns (records, length unit label)."""
    from lead_recipes.grading.repetition import is_repetitive
    rows = read_jsonl(path)
    count, unit = length_counter(tokenizer)
    items, shape = [], []
    for i, row in enumerate(rows):
        samples = row.get("samples") if isinstance(row, dict) else None
        if not isinstance(samples, list) or not samples or not isinstance(row.get("answer"), str):
            raise ValueError(f"{path}: row {i} needs 'answer' and a non-empty 'samples' list")
        texts = [s.get("response") if isinstance(s, dict) else None for s in samples]
        if not all(isinstance(t, str) for t in texts):
            raise ValueError(f"{path}: row {i}: every sample needs a 'response' string")
        items += [(row["answer"], t, None) for t in texts]
        shape.append(texts)
    if grader is None:
        from lead_recipes.grading.grader import get_grader
        grader = get_grader()
    grades = iter(grader.grade_many(items))
    groups = []
    for texts in shape:
        lengths = [count(t) for t in texts]
        groups.append({"correct": [bool(next(grades).correct) for _ in texts],
                       "lengths": [min(n, max_new_tokens) for n in lengths],
                       "truncated": [n >= max_new_tokens for n in lengths],
                       "repetitive": [is_repetitive(t) for t in texts]})
    groups = groups * epochs
    records = [{"step": s, "groups": groups[i:i + prompts_per_step]}
               for s, i in enumerate(range(0, len(groups), prompts_per_step), 1)]
    return records, unit


def replay(records: Iterable[dict], method, max_new_tokens: int) -> list[dict]:
    """Run every step through `method` (advancing its controller). Returns the output lines."""
    out = []
    for rec in records:
        batch = batch_from_record(rec, max_new_tokens)
        try:
            res = method.step(batch)
        except ValueError as e:
            raise ValueError(f"step {rec['step']}: {e}") from None
        out.append({"step": rec["step"], "rewards": res.rewards.tolist(), "advantages": res.advantages.tolist(),
                    "controller": method.state_dict()["controller"] or {}, "stats": res.stats})
    return out


def _plot_keys(lines: list[dict]) -> list[str]:
    first = lines[0]["controller"] if lines else {}
    return [k for k, v in first.items() if isinstance(v, float) and not k.startswith("adam_")]


def write_plot(lines: list[dict], path: Path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    steps = [ln["step"] for ln in lines]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    keys = _plot_keys(lines)
    for k in keys:
        ax1.plot(steps, [ln["controller"][k] for ln in lines], marker=".", label=k)
    if keys:
        ax1.legend(fontsize=8)
    else:
        ax1.text(0.5, 0.5, "stateless method: no controller", ha="center", va="center", transform=ax1.transAxes)
    ax1.set_ylabel("controller state")
    ax1.set_title(title)
    ax2.plot(steps, [ln["stats"]["accuracy"] for ln in lines], marker=".", label="accuracy")
    ax2.plot(steps, [ln["stats"]["reward_mean"] for ln in lines], marker=".", label="mean shaped reward")
    ax2.set_xlabel("step")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def format_table(lines: list[dict]) -> str:
    keys = _plot_keys(lines)
    head = ["step", "M", "acc", "len", "adv>0"] + keys
    rows = [head]
    for ln in lines:
        adv = [a for row in ln["advantages"] for a in row]
        s = ln["stats"]
        rows.append([str(ln["step"]), str(len(ln["advantages"])), f"{s['accuracy']:.3f}", f"{s['mean_length']:.0f}",
                     f"{sum(a > 0 for a in adv) / len(adv):.2f}"] + [f"{ln['controller'][k]:.4f}" for k in keys])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="lead-recipes replay", formatter_class=HelpFormatter, allow_abbrev=False,
                                description="Replay logged rollout statistics through a method and its controller.")
    p.add_argument("input", nargs="?", help="input JSONL, one line per step (see module docs)")
    p.add_argument("--from-rollouts", metavar="FILE", help="build the input from a rollouts JSONL with responses")
    p.add_argument("--tokenizer", metavar="PATH", help="local HF tokenizer for lengths (default: chars/4 approx.)")
    p.add_argument("--prompts-per-step", type=int, default=16, help="groups per step with --from-rollouts")
    p.add_argument("--epochs", type=int, default=1, help="passes over the rollouts with --from-rollouts")
    p.add_argument("--write-input", metavar="FILE", help="also save the built input JSONL (--from-rollouts)")
    p.add_argument("--max-new-tokens", type=int, default=4000, help="rollout cap (LEAD B_max); default 4000")
    p.add_argument("-o", "--output", required=True, help="output JSONL, one line per step")
    p.add_argument("--plot", help="PNG of the controller trajectory (default: OUTPUT with .png)")
    add_recipe_flags(p)
    args = p.parse_args(argv)
    if bool(args.input) == bool(args.from_rollouts):
        p.error("give exactly one of INPUT or --from-rollouts FILE")
    if args.prompts_per_step < 1 or args.epochs < 1 or args.max_new_tokens < 1:
        p.error("--prompts-per-step, --epochs and --max-new-tokens must be ≥ 1")
    try:
        from lead_recipes.methods import build_method
        config = recipe_config(args)
        method = build_method(config)
        unit = "as logged"
        if args.from_rollouts:
            records, unit = records_from_rollouts(Path(args.from_rollouts), args.prompts_per_step,
                                                  args.max_new_tokens, args.tokenizer, args.epochs)
            if args.write_input:
                Path(args.write_input).write_text("".join(json.dumps(r) + "\n" for r in records))
        else:
            records = read_jsonl(Path(args.input))
        if not records:
            raise ValueError(f"{args.input or args.from_rollouts}: no steps to replay")
        lines = replay(records, method, args.max_new_tokens)
    except (ValueError, OSError) as e:
        print(f"lead-recipes replay: {e}", file=sys.stderr)
        return 2
    out = Path(args.output)
    out.write_text("".join(json.dumps(ln) + "\n" for ln in lines))
    plot = Path(args.plot) if args.plot else out.with_suffix(".png")
    write_plot(lines, plot, f"{config.method} replay ({len(lines)} steps; lengths: {unit})")
    if unit == APPROX_LABEL:
        print(f"NOTE: no --tokenizer given; lengths are an APPROXIMATION: {APPROX_LABEL}")
    print(format_table(lines))
    print(f"wrote {out} and {plot}")
    return 0
