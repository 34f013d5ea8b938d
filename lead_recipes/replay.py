"""`lead-recipes replay`: run logged rollout statistics (or graded rollouts, `--replay.from_rollouts`) through a
method and its controller, offline, on a CPU: per-step rewards, advantages and controller state as JSONL, a PNG of
the controller trajectory and a table on stdout, before any GPU hour is spent. Method flags are `lead-recipes
train`'s `--recipe.*`. It does not train or sample; of OpenRLHF it calls only the stop-properly rule.
See docs/methods.md#replay-lead-recipes-replay.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from lead_recipes.flags import add_recipe_flags, recipe_config
from lead_recipes.help_format import ArgumentParser
from lead_recipes.jsonl import read_jsonl
from lead_recipes.progress import Bar

APPROX_LABEL = "approx_tokens=ceil(chars/4)+1"
PROMPT_KEY = "templated_prompt"  # a rollouts row's prompt after the chat template, as the reward function sees it
GRADE_CHUNK = 512  # responses graded between two progress updates


def _flags(group: dict, key: str, q: int, step: Any, kind, g: int | None) -> list | None:
    v = group.get(key)
    if v is None:
        return None
    if not isinstance(v, list) or not all(
        isinstance(x, kind) and not (kind is not bool and isinstance(x, bool)) for x in v
    ):
        raise ValueError(
            f"step {step}, prompt {q}: {key!r} must be a list of {'booleans' if kind is bool else 'numbers'}"
        )
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
    cols: dict[str, list] = {
        "correct": [],
        "lengths": [],
        "truncated": [],
        "repetitive": [],
        "think_boxed": [],
        "answer_boxed": [],
        "think_once": [],
        "nothink": [],
    }
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
        cols["think_boxed"].append(_flags(grp, "think_boxed", q, step, bool, g))
        for key in ("answer_boxed", "think_once", "nothink"):
            cols[key].append(_flags(grp, key, q, step, bool, g))

    def opt(key):  # an optional flag column is used only when every group has it
        rows = cols[key]
        return None if any(r is None for r in rows) else torch.tensor(rows, dtype=torch.bool)

    n_gold, l1_max = targets(groups, step)
    return RolloutBatch(
        correct=torch.tensor(cols["correct"], dtype=torch.bool),
        lengths=torch.tensor(cols["lengths"], dtype=torch.float32),
        max_new_tokens=max_new_tokens,
        truncated=opt("truncated"),
        repetitive=opt("repetitive"),
        think_boxed=opt("think_boxed"),
        answer_boxed=opt("answer_boxed"),
        think_once=opt("think_once"),
        nothink=opt("nothink"),
        ref_acc=reference_accuracy(groups, step),
        n_gold=n_gold,
        l1_max=l1_max,
    )


L1_MODES = ("exact", "max")


def targets(groups: list[dict], step: Any):
    """(n_gold [M], l1_max [M]) from each group's L1 target `n_gold` and `l1_mode` (the training label's keys;
    mode default "exact"), or (None, None) when no group has a target. ValueError names a group without one."""
    import torch

    if not any("n_gold" in grp for grp in groups):
        return None, None
    n_gold, modes = [], []
    for q, grp in enumerate(groups):
        n, mode = grp.get("n_gold"), grp.get("l1_mode", "exact")
        if isinstance(n, bool) or not isinstance(n, (int, float)):
            raise ValueError(f"step {step}, prompt {q}: 'n_gold' must be a number (other groups have one), got {n!r}")
        if mode not in L1_MODES:
            raise ValueError(f"step {step}, prompt {q}: 'l1_mode' must be one of {', '.join(L1_MODES)}, got {mode!r}")
        n_gold.append(float(n))
        modes.append(mode == "max")
    return torch.tensor(n_gold, dtype=torch.float64), torch.tensor(modes)


def reference_accuracy(groups: list[dict], step: Any):
    """ref_acc [M] from each group's `ref_acc` (AdaptThink's label key), or None when no group has one. ValueError
    names a group without a number (the method then names one outside [0, 1])."""
    import torch

    if not any("ref_acc" in grp for grp in groups):
        return None
    values = [grp.get("ref_acc") for grp in groups]
    for q, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"step {step}, prompt {q}: 'ref_acc' must be a number (other groups have one), got {v!r}")
    return torch.tensor(values, dtype=torch.float64)


def length_counter(tokenizer: str | None):
    """(count(text) -> int, unit label). Counts include one EOS token, as the trainer's action mask does."""
    if tokenizer:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(tokenizer, local_files_only=True)
        return (lambda text: len(tok.encode(text, add_special_tokens=False)) + 1), f"tokens({tokenizer})+EOS"
    return (lambda text: math.ceil(len(text) / 4) + 1), APPROX_LABEL


def records_from_rollouts(
    path: Path,
    prompts_per_step: int,
    max_new_tokens: int,
    tokenizer: str | None,
    epochs: int = 1,
    grader=None,
    progress: bool = False,
) -> tuple[list[dict], str]:
    """Grade a rollouts file (a progress bar on stderr with `progress`) and chunk its groups into steps. Lengths
    above the cap count at the cap and are marked truncated. Returns (records, length unit label)."""
    from lead_recipes.grading.repetition import is_repetitive
    from lead_recipes.reward.logs import answer_boxed, think_boxed, think_once

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
        prompt = row.get(PROMPT_KEY)
        if prompt is not None and not isinstance(prompt, str):
            raise ValueError(f"{path}: row {i}: {PROMPT_KEY!r} must be the templated prompt string, got {prompt!r:.40}")
        problem = row.get("problem") if isinstance(row.get("problem"), str) else None  # its stated precision
        items += [(row["answer"], t, None, problem) for t in texts]
        shape.append((row, texts))
    if grader is None:
        from lead_recipes.grading.pool.grader import get_grader

        grader = get_grader()
    graded = []
    with Bar(len(items), "grading", "response", progress) as bar:
        for start in range(0, len(items), GRADE_CHUNK):
            graded += grader.grade_many(items[start : start + GRADE_CHUNK])
            bar.advance_to(len(graded))
    grades = iter(graded)
    groups = []
    for row, texts in shape:
        lengths = [count(t) for t in texts]
        prompt = row.get(PROMPT_KEY)
        # The format rules read prompt + response, as the reward function does: R1's chat template puts `<think>`
        # in the prompt. Without the templated prompt the flags stay unset and the methods needing them refuse.
        flags = (
            {
                "think_boxed": [think_boxed(prompt + t) for t in texts],
                "answer_boxed": [answer_boxed(prompt + t) for t in texts],
            }
            if prompt is not None
            else {}
        )
        groups.append(
            {
                "correct": [bool(next(grades).correct) for _ in texts],
                "lengths": [min(n, max_new_tokens) for n in lengths],
                "truncated": [n >= max_new_tokens for n in lengths],
                "repetitive": [is_repetitive(t) for t in texts],
                "think_once": [think_once(t) for t in texts],  # the response alone, its forced token included
                **flags,
                **(
                    {"nothink": [s["nothink"] for s in row["samples"]]}
                    if all("nothink" in s for s in row["samples"])
                    else {}
                ),
                **{k: row[k] for k in ("n_gold", "l1_mode", "ref_acc") if k in row},
            }
        )
    n = len(groups)
    groups = groups * epochs
    # a step that mixes the end of one pass and the start of the next counts in the earlier epoch
    records = [
        {"step": s, "epoch": i // n + 1, "length_unit": unit, "groups": groups[i : i + prompts_per_step]}
        for s, i in enumerate(range(0, len(groups), prompts_per_step), 1)
    ]
    return records, unit


def logged_unit(records: list) -> str:
    """The length unit the input's steps declare (`length_unit`, written by --replay.write_input), else "as logged"."""
    units = {r.get("length_unit") if isinstance(r, dict) else None for r in records}
    if len(units) > 1:
        raise ValueError(f"the steps disagree on 'length_unit': {sorted(map(str, units))}")
    unit = units.pop() if units else None
    if unit is not None and not isinstance(unit, str):
        raise ValueError(f"'length_unit' must be a string, got {unit!r}")
    return unit or "as logged"


def replay(
    records: list[dict], method, max_new_tokens: int, progress: bool = False, stop_properly: float | None = None
) -> list[dict]:
    """Run every step through `method` (advancing its controller), a progress bar on stderr with `progress`;
    `stop_properly`: OpenRLHF's `--reward.stop_properly_penalty_coef` (None: off). Returns the output lines."""
    out = []
    with Bar(len(records), "replay", "step", progress) as bar:
        for rec in records:
            out.append(_replay_step(rec, method, max_new_tokens, stop_properly))
            bar.advance_to(len(out))
    return out


def stop_properly_change(correct, truncated, coef: float):
    """The change OpenRLHF's ProRL stop-properly rule makes to the 0/1 reward, which is how the plug-in hands it to a
    method: a truncated sample's reward becomes coef·c (coef ≥ 0) or coef (< 0). OpenRLHF's own function does it; it
    reads only `rewards` and `truncated` of each experience, so a namespace of CPU tensors stands in for one."""
    from types import SimpleNamespace

    from openrlhf.trainer.ppo_utils.length_penalty import apply_stop_properly_penalty

    c = correct.double().reshape(-1)
    experience = SimpleNamespace(rewards=c.clone(), truncated=truncated.reshape(-1))
    apply_stop_properly_penalty([experience], coef)
    return (experience.rewards - c).reshape(correct.shape)


def monitor_pass(rec: dict):
    """(correct, lengths) [P, n] of a step's optional `monitor` ({"correct": [[bool]*n]*P, "lengths": [[tokens]*n]*P}:
    a monitor pass run before this step, Laser-D/-DE), or None. ValueError names the step."""
    import torch

    mon = rec.get("monitor")
    if mon is None:
        return None
    ok = isinstance(mon, dict) and isinstance(mon.get("correct"), list) and isinstance(mon.get("lengths"), list)
    rows = list(zip(mon["correct"], mon["lengths"])) if ok else []
    if not rows or not all(isinstance(c, list) and isinstance(n, list) and c and len(c) == len(n) for c, n in rows):
        raise ValueError(
            f'step {rec.get("step")}: \'monitor\' must be {{"correct": [[bool]*n]*P, "lengths": [[tokens]*n]*P}} '
            "with one row of n samples per monitor prompt"
        )
    try:
        return torch.tensor(mon["correct"], dtype=torch.bool), torch.tensor(mon["lengths"], dtype=torch.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"step {rec.get('step')}: 'monitor' rows need the same n and plain values ({e})") from None


def _replay_step(rec: dict, method, max_new_tokens: int, stop_properly: float | None = None) -> dict:
    batch = batch_from_record(rec, max_new_tokens)
    if "controller" in rec:  # a saved controller state to continue from (e.g. a checkpoint's, Laser-D's targets)
        try:
            method.load_state_dict(rec["controller"])
        except ValueError as e:
            raise ValueError(f"step {rec['step']}: 'controller': {e}") from None
    monitor = monitor_pass(rec)
    if monitor is not None:
        if not hasattr(method, "observe_monitor"):
            raise ValueError(f"step {rec['step']}: 'monitor' is a Laser-D/-DE input; {method.name} takes none")
        method.observe_monitor(*monitor, step=rec["step"] - 1)  # run after the previous step's update
    if stop_properly is not None:
        truncated = batch.truncated if batch.truncated is not None else batch.lengths >= max_new_tokens
        batch.length_penalty = stop_properly_change(batch.correct, truncated, stop_properly)
    try:
        res = method.step(batch)
    except ValueError as e:
        raise ValueError(f"step {rec['step']}: {e}") from None
    epoch = rec.get("epoch")
    if epoch is not None and (isinstance(epoch, bool) or not isinstance(epoch, int)):
        raise ValueError(f"step {rec['step']}: 'epoch' must be an integer, got {epoch!r}")
    return {
        "step": rec["step"],
        **({"epoch": epoch} if epoch is not None else {}),
        "rewards": res.rewards.tolist(),
        "advantages": res.advantages.tolist(),
        "controller": method.state_dict() or {},
        "stats": res.stats,
    }


def _plot_keys(lines: list[dict]) -> list[str]:
    first = lines[0]["controller"] if lines else {}
    return [k for k, v in first.items() if isinstance(v, float) and not k.startswith("adam_")]


def length_targets(lines: list[dict], config) -> dict[str, list[float]]:
    """The target lengths to draw next to the mean length, per step: Leash's L_t (a flag), the composed budget and
    LEAD's mean L* (from the step statistics, where the method logs them)."""
    n = len(lines)
    out = {"Leash L_t": [float(config.leash.target_length)] * n} if config.method == "leash" else {}
    for key, label in (("budget_tokens", "budget L_t"), ("target_length_mean", "LEAD mean L*")):
        vals = [ln["stats"].get(key, 0.0) for ln in lines]
        if any(v > 0 for v in vals):  # the composed method logs 0.0 for a part that is off
            out[label] = vals
    return out


def lambda_floors(keys: list[str], config) -> dict[str, float]:
    """Controller keys with a floor: LEAD's λ_c (unless static) and Leash's λ (the projection's lower bound)."""
    composed = config.method == "composed"
    lead = config.method == "lead" or (composed and config.composed.length_reward == "lead")
    leash = config.method == "leash" or (composed and config.composed.budget == "leash")
    floors = {}
    if lead and "lambda_c" in keys and config.lead.static_lambda_c is None:
        floors["lambda_c"] = float(config.lead.lambda_min)
    if leash and "lagrange_lambda" in keys and not config.leash.constant_lambda_enable:
        floors["lagrange_lambda"] = float(config.leash.lambda_min)
    return floors


def epoch_boundaries(lines: list[dict]) -> list[float]:
    """x positions between the last step of an epoch and the first of the next (none when no step has an epoch)."""
    return [
        b["step"] - 0.5
        for a, b in zip(lines, lines[1:])
        if a.get("epoch") is not None and b.get("epoch") is not None and a["epoch"] != b["epoch"]
    ]


def replay_figure(lines: list[dict], config, title: str, unit: str):
    """Three panels sharing the step axis: controller state (with λ floors), accuracy and mean shaped reward, mean
    length (with the target lengths). Epoch boundaries are dotted vertical lines on every panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    steps = [ln["step"] for ln in lines]
    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(7, 8.5), sharex=True)
    keys = _plot_keys(lines)
    # LEAD's λ_x is its EMA weight w_x until the floor, so the two lines coincide: λ_x wide and pale, w_x thin,
    # dashed, in the same colour and on top.
    colours = {}
    for k in keys:
        part = k.removeprefix("w_").removeprefix("lambda_")
        colour = colours.setdefault(part, f"C{len(colours)}")
        ema = k.startswith("w_")
        ax1.plot(
            steps,
            [ln["controller"][k] for ln in lines],
            color=colour,
            linestyle="--" if ema else "-",
            linewidth=1.2 if ema else 3.5,
            alpha=1.0 if ema else 0.45,
            marker="x" if ema else None,
            zorder=3 if ema else 2,
            label=f"{k} (EMA weight)" if ema else k,
        )
    for k, floor in lambda_floors(keys, config).items():
        ax1.axhline(floor, linestyle="--", linewidth=1, color="gray", label=f"{k} floor {floor:g}")
    for i, x in enumerate(epoch_boundaries(lines)):
        for ax in (ax1, ax2, ax3):
            ax.axvline(
                x, linestyle=":", color="black", linewidth=1, label="epoch starts" if i == 0 and ax is ax1 else None
            )
    if keys:
        ax1.legend(fontsize=8)
    else:
        ax1.text(0.5, 0.5, "stateless method: no controller", ha="center", va="center", transform=ax1.transAxes)
    ax1.set_ylabel("controller state")
    ax1.set_title(title)
    ax2.plot(steps, [ln["stats"]["accuracy"] for ln in lines], marker=".", label="accuracy")
    ax2.plot(steps, [ln["stats"]["reward_mean"] for ln in lines], marker=".", label="mean shaped reward")
    ax2.legend(fontsize=8)
    ax3.plot(steps, [ln["stats"]["mean_length"] for ln in lines], marker=".", label="mean length")
    for label, vals in length_targets(lines, config).items():
        ax3.plot(steps, vals, linestyle="--", label=label)
    ax3.set_ylabel(
        "length (approx. tokens)"
        if unit == APPROX_LABEL
        else "length (tokens)"
        if unit.startswith("tokens(")
        else f"length ({unit[:24]})"
    )
    ax3.set_xlabel("step")
    ax3.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole: no 0.5 ticks on a short replay
    ax3.legend(fontsize=8)
    fig.tight_layout()
    return fig


def write_plot(lines: list[dict], path: Path, title: str, config, unit: str) -> None:
    import matplotlib.pyplot as plt

    fig = replay_figure(lines, config, title, unit)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def format_table(lines: list[dict]) -> str:
    keys = _plot_keys(lines)
    head = ["step", "M", "acc", "len", "adv>0"] + keys
    rows = [head]
    for ln in lines:
        adv = [a for row in ln["advantages"] for a in row]
        s = ln["stats"]
        rows.append(
            [
                str(ln["step"]),
                str(len(ln["advantages"])),
                f"{s['accuracy']:.3f}",
                f"{s['mean_length']:.0f}",
                f"{sum(a > 0 for a in adv) / len(adv):.2f}",
            ]
            + [f"{ln['controller'][k]:.4f}" for k in keys]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows)


def main(argv: list[str]) -> int:
    p = ArgumentParser(
        prog="lead-recipes replay", description="Replay logged rollout statistics through a method and its controller."
    )
    p.add_argument("input", nargs="?", help="input JSONL, one line per step (docs/methods.md)")
    p.add_argument("--output", required=True, help="output JSONL, one line per step")
    r = p.add_argument_group("replay")
    r.add_argument(
        "--replay.from_rollouts",
        dest="from_rollouts",
        metavar="FILE",
        help="build the input from a rollouts JSONL with responses (default: none; read INPUT)",
    )
    r.add_argument(
        "--replay.tokenizer",
        dest="tokenizer",
        metavar="PATH",
        help="local HF tokenizer for lengths (default: chars/4 approx.)",
    )
    r.add_argument(
        "--replay.prompts_per_step",
        dest="prompts_per_step",
        type=int,
        default=16,
        help="groups per step with --replay.from_rollouts",
    )
    r.add_argument(
        "--replay.epochs",
        dest="epochs",
        type=int,
        default=1,
        help="passes over the rollouts with --replay.from_rollouts",
    )
    r.add_argument(
        "--replay.write_input",
        dest="write_input",
        metavar="FILE",
        help="also save the built input JSONL (--replay.from_rollouts; default: not saved)",
    )
    r.add_argument(
        "--replay.plot", dest="plot", metavar="PNG", help="PNG of the controller trajectory (default: OUTPUT with .png)"
    )
    r.add_argument(
        "--replay.progress_enable",
        dest="progress",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="progress bars on stderr (grading, steps)",
    )
    ro = p.add_argument_group("rollout")
    ro.add_argument(
        "--rollout.max_new_tokens",
        dest="max_new_tokens",
        type=int,
        default=4000,
        help="rollout cap (LEAD B_max); default 4000",
    )
    rw = p.add_argument_group("reward")
    rw.add_argument(
        "--reward.stop_properly_penalty_coef",
        dest="stop_properly",
        type=float,
        default=None,
        help="OpenRLHF's truncation scale of the 0/1 reward (grpo, dler; DLER's recipe: 0); default: off",
    )
    add_recipe_flags(p)
    args = p.parse_args(argv)
    if bool(args.input) == bool(args.from_rollouts):
        p.error("give exactly one of INPUT or --replay.from_rollouts FILE")
    if args.prompts_per_step < 1 or args.epochs < 1 or args.max_new_tokens < 1:
        p.error("--replay.prompts_per_step, --replay.epochs and --rollout.max_new_tokens must be ≥ 1")
    try:
        from lead_recipes.methods import build_method
        from lead_recipes.training.args import length_penalty_errors

        config = recipe_config(args)
        method = build_method(config)
        reward = argparse.Namespace(stop_properly_penalty_coef=args.stop_properly)
        errors = length_penalty_errors(
            argparse.Namespace(rollout=argparse.Namespace(max_new_tokens=args.max_new_tokens), reward=reward),
            config.method,
        )
        if errors:
            raise ValueError("; ".join(errors))
        if args.from_rollouts:
            records, unit = records_from_rollouts(
                Path(args.from_rollouts),
                args.prompts_per_step,
                args.max_new_tokens,
                args.tokenizer,
                args.epochs,
                progress=args.progress,
            )
            if args.write_input:
                Path(args.write_input).write_text("".join(json.dumps(r) + "\n" for r in records))
        else:
            records = read_jsonl(Path(args.input))
            unit = logged_unit(records)
        if not records:
            raise ValueError(f"{args.input or args.from_rollouts}: no steps to replay")
        lines = replay(records, method, args.max_new_tokens, progress=args.progress, stop_properly=args.stop_properly)
    except (ValueError, OSError) as e:
        print(f"lead-recipes replay: {e}", file=sys.stderr)
        return 2
    out = Path(args.output)
    out.write_text("".join(json.dumps(ln) + "\n" for ln in lines))
    plot = Path(args.plot) if args.plot else out.with_suffix(".png")
    write_plot(lines, plot, f"{config.method} replay ({len(lines)} steps; lengths: {unit})", config, unit)
    if unit == APPROX_LABEL:
        print(f"NOTE: no --replay.tokenizer given; lengths are an APPROXIMATION: {APPROX_LABEL}")
    print(format_table(lines))
    print(f"wrote {out} and {plot}")
    return 0
