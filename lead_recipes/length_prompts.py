"""Length instructions in `lead-recipes data build` prompts: L1's per-example target (`--l1.*`: " Think for N
tokens." appended to the user turn, N and the mode carried in the label for the reward function to echo) and
ThinkPrune's token limit (`--prompt.length_limit`, a sentence in the system message). The strings are in
lead_recipes/prompts.py. See docs/launch.md#l1-targets-and-thinkprune-limits.
"""

from __future__ import annotations

import argparse
import random
from typing import Iterable, Iterator

from lead_recipes.prompts import L1_MODES, l1_suffix

# arXiv 2503.04697, Sec. 4.1: n_gold ~ U(100, 4000); the authors' script draws random.randint(100, 4000)
L1_MIN_TOKENS, L1_MAX_TOKENS = 100, 4000
L1_MAX_SHARE = 0.5  # the authors' L1-Max data: each prompt is a "maximum" prompt with probability 0.5


def add_flags(build: argparse.ArgumentParser, prompt_group) -> None:
    """The `--l1.*` group and `--prompt.length_limit` of `data build`."""
    prompt_group.add_argument(
        "--prompt.length_limit",
        dest="length_limit",
        type=int,
        help="ThinkPrune: append 'The output of the assistant should be within L tokens.' to the system "
        "message (messages format; --prompt.system thinkprune is the authors' system prompt; default: no sentence)",
    )
    g = build.add_argument_group("l1", "L1 targets (arXiv 2503.04697): a drawn token target per example")
    g.add_argument(
        "--l1.mode",
        dest="l1_mode",
        choices=L1_MODES,
        help="exact: every prompt ends with ' Think for N tokens.' (L1-Exact); max: --l1.max_share of them "
        "ask for ' Think for maximum N tokens.', the rest exact (L1-Max's mixed data). The label becomes "
        '{"answer", "id", "n_gold": N, "l1_mode"}. Default: no target',
    )
    g.add_argument("--l1.min_tokens", dest="l1_min", type=int, default=L1_MIN_TOKENS, help="smallest N (inclusive)")
    g.add_argument("--l1.max_tokens", dest="l1_max", type=int, default=L1_MAX_TOKENS, help="largest N (inclusive)")
    g.add_argument(
        "--l1.max_share",
        dest="l1_max_share",
        type=float,
        help=f"--l1.mode max: probability that a prompt asks for at most N tokens (default {L1_MAX_SHARE})",
    )
    g.add_argument(
        "--l1.seed",
        dest="l1_seed",
        type=int,
        default=0,
        help="targets are drawn per example from this seed and the example's id, so the order, --seed and "
        "--limit do not change an example's N",
    )
    g.add_argument(
        "--l1.draws",
        dest="l1_draws",
        type=int,
        default=1,
        help="rows per example, each with its own draw (default 1: drawn once, as the paper; --limit counts "
        "examples). K > 1 with one training episode = K epochs that redraw the target each epoch (the "
        "authors' --sample_multiple_for_train)",
    )


def check(args) -> None:
    """ValueError naming the flag when the length options cannot be applied (before anything is read)."""
    if args.length_limit is not None:
        if args.length_limit < 1:
            raise ValueError(f"--prompt.length_limit must be a positive token count, got {args.length_limit}")
        if args.format != "messages":
            raise ValueError("--prompt.length_limit goes in the system message: add --prompt.format messages")
    if args.l1_mode is None:
        if args.l1_max_share is not None or args.l1_draws != 1:
            raise ValueError("--l1.max_share and --l1.draws need --l1.mode exact or max")
        return
    if not 1 <= args.l1_min <= args.l1_max:
        raise ValueError(f"--l1.min_tokens {args.l1_min} and --l1.max_tokens {args.l1_max}: need 1 ≤ min ≤ max")
    if args.l1_max_share is not None and (args.l1_mode != "max" or not 0 <= args.l1_max_share <= 1):
        raise ValueError(f"--l1.max_share must be in [0, 1] and needs --l1.mode max, got {args.l1_max_share}")
    if args.l1_draws < 1:
        raise ValueError(f"--l1.draws must be ≥ 1, got {args.l1_draws}")


def draw(seed: int, key: str, lo: int, hi: int, max_share: float) -> tuple[int, str]:
    """(n_gold, mode) of one example: n_gold ~ U{lo..hi}, mode "max" with probability `max_share`, from a generator
    seeded by (seed, key) alone (a string seed is hashed with SHA-512: stable across runs and Python versions)."""
    rng = random.Random(f"l1/{seed}/{key}")
    n = rng.randint(lo, hi)
    return n, "max" if rng.random() < max_share else "exact"


def report(stats: dict) -> dict | None:
    """The build report's `l1` entry (None without targets): the settings, the row counts and the mean N."""
    if not stats:
        return None
    out = {k: v for k, v in stats.items() if k != "n_gold_sum"}
    return dict(out, n_gold_mean=stats["n_gold_sum"] / max(stats["rows"], 1))


def with_suffix(prompt, suffix: str):
    """`prompt` (text, or chat messages whose last user turn gets it) with `suffix` appended to the user turn."""
    if isinstance(prompt, str):
        return prompt + suffix
    last_user = max(i for i, m in enumerate(prompt) if m["role"] == "user")
    return [dict(m, content=m["content"] + suffix) if i == last_user else m for i, m in enumerate(prompt)]


def attach_targets(rows: Iterable[dict], args, stats: dict) -> Iterator[dict]:
    """Rendered rows → rows with an L1 target each (`--l1.draws` rows per example); `stats` gets the counts for
    the build report as the rows are written."""
    share = 0.0 if args.l1_mode == "exact" else (L1_MAX_SHARE if args.l1_max_share is None else args.l1_max_share)
    stats.update(
        mode=args.l1_mode,
        min_tokens=args.l1_min,
        max_tokens=args.l1_max,
        max_share=share,
        seed=args.l1_seed,
        draws=args.l1_draws,
        rows=0,
        max_rows=0,
        n_gold_sum=0,
    )
    for row in rows:
        for k in range(args.l1_draws):
            key = row["id"] if args.l1_draws == 1 else f"{row['id']}#{k}"
            n, mode = draw(args.l1_seed, key, args.l1_min, args.l1_max, share)
            stats["rows"] += 1
            stats["max_rows"] += mode == "max"
            stats["n_gold_sum"] += n
            label = {"answer": row["label"], "id": row["id"], "n_gold": n, "l1_mode": mode}
            yield dict(row, prompt=with_suffix(row["prompt"], l1_suffix(n, mode)), label=label)
