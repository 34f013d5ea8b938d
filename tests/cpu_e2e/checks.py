"""Checks on what a CPU end-to-end run left (tests only): each step's advantage as the actor trained on it, rebuilt
from the shim's record and compared per sample and per token with the method's own, problem records, W&B run ids
and the steps a scalar is logged at. It starts nothing. See docs/e2e.md.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from lead_recipes.flags import add_recipe_flags, recipe_config
from lead_recipes.methods import build_method
from lead_recipes.methods.base import RolloutBatch
from lead_recipes.methods.config import entry


def recipe_of(argv: list[str]):
    parser = argparse.ArgumentParser(allow_abbrev=False)
    add_recipe_flags(parser)
    ours, _ = parser.parse_known_args(argv)
    return recipe_config(ours)


def steps_of(rows: list[dict], per_step: int) -> list[list[dict]]:
    assert rows and len(rows) % per_step == 0, f"{len(rows)} trained rows is not a multiple of {per_step} per step"
    return [rows[i : i + per_step] for i in range(0, len(rows), per_step)]


def advantage_mismatches(
    run, argv: list[str], first_step: int, n: int, cap: int, per_step: int, trained: list[dict] | None = None
) -> list[str]:
    """For every trained step: each sample's per-token advantage (all tokens: the KL is a loss term, not in the
    reward) equals the method's advantage for that sample, the method run on the step's whole batch from the
    controller state of the checkpoint before the step. Returns the mismatches ([] = all equal). `trained`: one pass
    per step when the actor trains more than one epoch (default: every row the run trained on)."""
    recipe = recipe_of(argv)
    problems = []
    for k, rows in enumerate(steps_of(run.trained_rows() if trained is None else trained, per_step)):
        step = first_step + k
        method = build_method(recipe)
        if step > 1:
            method.load_state_dict(run.recipe_state(step - 1)["controller"])
        elif entry(recipe.method).monitor:  # step 1 used the pass before it, saved (monitor period > 1) at step 1
            method.load_state_dict({**run.recipe_state(1)["controller"], "step": 0})
        groups: dict[str, list[dict]] = {}
        for r in rows:
            assert r["prompt"] is not None, "the trained experience carries no prompts"
            groups.setdefault(r["prompt"], []).append(r)
        assert all(len(g) == n for g in groups.values()), {p: len(g) for p, g in groups.items()}
        order = [r for g in groups.values() for r in g]
        shape = (len(groups), n)
        firsts = [g[0]["info"] for g in groups.values()]
        targets = {}
        if any(i.get("n_gold", 0) > 0 for i in firsts):  # L1's per-prompt target, echoed by the reward function
            targets = {
                "n_gold": torch.tensor([float(i["n_gold"]) for i in firsts]),
                "l1_max": torch.tensor([i.get("l1_max", 0) > 0.5 for i in firsts]),
            }
        if "nothink" in firsts[0]:  # AdaptThink's executor fields and the reward function's count rule
            targets["nothink"] = torch.tensor([r["info"]["nothink"] > 0.5 for r in order]).reshape(shape)
            targets["think_once"] = torch.tensor([r["info"]["think_once"] > 0.5 for r in order]).reshape(shape)
            targets["ref_acc"] = torch.tensor([float(i["ref_acc"]) for i in firsts], dtype=torch.float64)
        batch = RolloutBatch(
            correct=torch.tensor([r["info"]["correct"] > 0.5 for r in order]).reshape(shape),
            lengths=torch.tensor([float(min(max(len(r["adv"]), 1), cap)) for r in order]).reshape(shape),
            max_new_tokens=cap,
            truncated=torch.tensor([bool(r["truncated"]) for r in order]).reshape(shape),
            repetitive=torch.tensor([r["info"].get("repetitive", 0.0) > 0.5 for r in order]).reshape(shape),
            answer_boxed=torch.tensor([r["info"].get("answer_boxed", 0.0) > 0.5 for r in order]).reshape(shape),
            **targets,
        )
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


def tensorboard_steps(run_dir: Path, tag: str) -> list[int]:
    """Every step at which TensorBoard shows `tag` for one TensorBoard run (a directory of event files, read in
    order as TensorBoard reads them: a writer's purge_step drops the earlier files' events from that step on)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return sorted(e.step for e in acc.Scalars(tag)) if tag in acc.Tags()["scalars"] else []


def wandb_records(path: Path):
    """The protobuf Records of an offline W&B run file (`run-<id>.wandb`: a LevelDB-style log of 32 KiB blocks
    after a 7-byte ':W&B' header; records FULL, or FIRST/MIDDLE.../LAST across blocks)."""
    import struct

    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(path).read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B transaction log"
    pos, block, pending = 7, 32768, b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block tail too short for a header is padding
            pos += block - pos % block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind == 0 and length == 0:
            continue
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(pending)
            yield record


def wandb_steps(wandb_dir: Path, run_id: str, tag: str) -> list[int]:
    """Every `train/global_step` at which the offline W&B runs of `run_id` (a run and its resumes) logged `tag`."""
    steps = []
    # a resume within the same second gets a "-1" suffix on its directory
    for path in sorted(Path(wandb_dir).glob(f"offline-run-*-{run_id}*/run-{run_id}.wandb")):
        for record in wandb_records(path):
            if record.WhichOneof("record_type") != "history":
                continue
            items = {}
            for item in record.history.item:
                key = item.key or "/".join(item.nested_key)
                items[key] = json.loads(item.value_json) if item.value_json else (item.number or item.integer)
            if tag in items and "train/global_step" in items:
                steps.append(int(items["train/global_step"]))
    return sorted(steps)


def epochs_and_steps(rows: list[dict]) -> list[list[list[dict]]]:
    """The trained rows of a dynamic-batching run as passes over the replay buffer (a pass restarts the micro-batch
    index at 0), each cut into its optimizer steps (closed by the micro-batch that the buffer marks `step_end`)."""
    micro: list[list[dict]] = []
    for r in rows:  # one training_step call each
        if not micro or micro[-1][0]["call"] != r["call"]:
            micro.append([])
        micro[-1].append(r)
    passes: list[list[list[dict]]] = []
    for mb in micro:
        if mb[0]["micro_batch"] == 0:
            passes.append([[]])
        passes[-1][-1] += mb
        if mb[0]["step_end"]:
            passes[-1].append([])
    return [[step for step in p if step] for p in passes]


def unstratified_steps(steps: list[list[dict]]) -> list[int]:
    """Indices of the optimizer steps that do not hold one sample of every length stratum (the pass's samples
    sorted by total length and cut into strata of one sample per step): the j-th longest sample of each step must
    lie within stratum j. Ties make a stratum's bounds equal, so ties never fail it."""
    size = len(steps[0])
    ranked = sorted((r["total_length"] for s in steps for r in s), reverse=True)
    n = len(steps)
    bad = []
    for k, step in enumerate(steps):
        own = sorted((r["total_length"] for r in step), reverse=True)
        if len(own) != size or not all(ranked[j * n + n - 1] <= own[j] <= ranked[j * n] for j in range(size)):
            bad.append(k)
    return bad
