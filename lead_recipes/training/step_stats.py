"""Per-step pieces of the OpenRLHF plug-in that need no OpenRLHF: the Method's RolloutBatch from duck-typed experiences
(`rollout_batch`), the logged `recipe/*` statistics (`step_stats`), the per-problem records and their truncation on
a resume, and small tensor utilities. No method math, no OpenRLHF import. See docs/training.md.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os

import torch

from lead_recipes.curriculum import prompt_sha1
from lead_recipes.grading.repetition import laser_repetition_start
from lead_recipes.methods.base import RolloutBatch

STATUS_KEYS = ("status_correct", "status_wrong", "status_no_answer", "status_timeout", "status_error")


@contextlib.contextmanager
def one_intra_op_thread():
    """The advantage step is memory-bound (or tiny), so extra intra-op threads buy little, but on an oversubscribed
    node each multi-threaded op waits for its slowest thread (measured here: 0.7-23 s per call at 2 threads under
    load vs 0.8-2 s at 1). Ray actors run with OMP_NUM_THREADS=1 by default anyway; restored on exit."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def row_chunks(experiences, max_rows):
    """Consecutive index lists of experiences holding up to max_rows rows each (at least one experience)."""
    chunk, rows = [], 0
    for i, e in enumerate(experiences):
        if chunk and rows + len(e.action_mask) > max_rows:
            yield chunk
            chunk, rows = [], 0
        chunk.append(i)
        rows += len(e.action_mask)
    if chunk:
        yield chunk


def finite(name: str, t: torch.Tensor) -> torch.Tensor:
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} has non-finite values; refusing to pass them to the trainer")
    return t


def rollout_batch(experiences, grouped, cap, length_penalty=None) -> tuple[RolloutBatch, dict]:
    """The Method's input from a step's experiences: correctness (`info["correct"]`), response lengths (action-mask
    sums, clamped to 1..cap), truncation, repetition, GRPO-LEAD's, Laser's and AdaptThink's flags, L1 targets and
    ref_acc when every experience has them, regrouped to [prompts, n] by `grouped`, and `length_penalty` [prompts,
    n] (OpenRLHF's, already grouped); plus `extra` = the clamp count and the grading status / latency tensors (flat,
    micro-batch order)."""
    try:
        correct = torch.cat([e.info["correct"].reshape(-1) for e in experiences])
    except KeyError:
        raise ValueError(
            'experience.info has no "correct": the reward function must be lead-recipes\' '
            "(--reward.remote_url <path>/lead_recipes/reward/reward_func.py or the `lead-recipes serve` "
            'URL), which returns extra_logs["correct"] for every sample'
        ) from None
    cap = int(cap)
    lengths = torch.cat([e.action_mask.sum(-1).reshape(-1) for e in experiences]).to(torch.float32)
    # a response is 1..cap tokens; OpenRLHF's dynamic cap (max_new_tokens unset) is max_len - prompt_len
    clamped = int(((lengths < 1) | (lengths > cap)).sum())
    lengths = lengths.clamp(1, cap)
    truncated = None
    if all(e.truncated is not None for e in experiences):
        truncated = grouped(torch.cat([e.truncated.reshape(-1) for e in experiences]).bool())
    repetitive, boxed, answer_boxed, once, nothink = (
        grouped(torch.cat([e.info[key].reshape(-1) for e in experiences]) > 0.5)
        if all(key in e.info for e in experiences)
        else None
        for key in ("repetitive", "think_boxed", "answer_boxed", "think_once", "nothink")
    )
    n_gold, l1_max = _length_targets(experiences, grouped)
    extra = {"clamped": clamped}
    for key in STATUS_KEYS + ("grade_latency_s",):
        if all(key in e.info for e in experiences):
            extra[key] = torch.cat([e.info[key].reshape(-1).float() for e in experiences])
    batch = RolloutBatch(
        correct=grouped(correct) > 0.5,
        lengths=grouped(lengths),
        max_new_tokens=cap,
        truncated=truncated,
        repetitive=repetitive,
        think_boxed=boxed,
        answer_boxed=answer_boxed,
        think_once=once,
        nothink=nothink,
        ref_acc=_reference_accuracy(experiences, grouped),
        n_gold=n_gold,
        l1_max=l1_max,
        length_penalty=length_penalty,
    )
    return batch, extra


def _reference_accuracy(experiences, grouped):
    """ref_acc [M] from the AdaptThink executor's echo of the labels (`info["ref_acc"]`, −1 = the label has none,
    which the method refuses), or None when the executor did not run. A group whose samples disagree is a
    ValueError."""
    if not all("ref_acc" in e.info for e in experiences):
        return None
    acc = grouped(torch.cat([e.info["ref_acc"].reshape(-1) for e in experiences]).double())
    bad = (acc != acc[:, :1]).any(1)
    if bad.any():
        q = int(bad.nonzero()[0, 0])
        raise ValueError(f"prompt group {q} has different ref_acc values {acc[q].tolist()}: one per prompt")
    return acc[:, 0].clone()


def laser_repetition(experiences, grouped) -> torch.Tensor:
    """[prompts, n] bool: Laser's token n-gram detector on each response's token ids (the action-masked tokens of
    `sequences`, whose first token the action mask does not cover), regrouped by `grouped`."""
    flags = [
        laser_repetition_start(ids) < len(ids)
        for e in experiences
        for seq, mask in zip(e.sequences, e.action_mask)
        for ids in [seq[1:][mask.bool()].tolist()]
    ]
    return grouped(torch.tensor(flags))


def _length_targets(experiences, grouped):
    """(n_gold [M], l1_max [M]) from the reward function's echo of the labels (`info["n_gold"]`, `info["l1_max"]`,
    0 = no target), or (None, None) when no prompt of the step has a target. A step that mixes prompts with and
    without a target, or a group whose samples disagree, is a ValueError: the data is broken, not the method."""
    if not all("n_gold" in e.info and "l1_max" in e.info for e in experiences):
        return None, None
    n = grouped(torch.cat([e.info["n_gold"].reshape(-1) for e in experiences]).double())
    mode = grouped(torch.cat([e.info["l1_max"].reshape(-1) for e in experiences]).double())
    target = n.amax(1)
    if not (target > 0).any():
        return None, None
    has = n > 0
    bad = (target <= 0) | ((n != target[:, None]) & has).any(1) | ((mode != mode.amax(1, keepdim=True)) & has).any(1)
    if bad.any():
        q = int(bad.nonzero()[0, 0])
        what = "no L1 target while other prompts of this step have one" if target[q] <= 0 else "different L1 targets"
        raise ValueError(
            f"prompt group {q} has {what} (n_gold {n[q].tolist()}, l1_max {mode[q].tolist()}): every prompt needs "
            "one target, shared by its samples (build the data with `lead-recipes data build --l1.mode`, whose "
            "labels carry n_gold)"
        )
    return target, mode.amax(1) > 0.5


def step_stats(method_name: str, batch: RolloutBatch, out, shaped, penalty, extra) -> dict[str, float]:
    """The per-step `recipe/*` statistics logged into the trainer status: correctness, lengths, shaped reward,
    advantage size, grading status counts and the method's own stats under `recipe/<method>/`; all finite."""
    correct, lengths = batch.correct, batch.lengths
    stats = {
        "recipe/correct_rate": correct.float().mean().item(),
        "recipe/length_mean": lengths.mean().item(),
        "recipe/length_mean_correct": lengths[correct].mean().item() if correct.any() else 0.0,
        "recipe/length_mean_wrong": lengths[~correct].mean().item() if (~correct).any() else 0.0,
        "recipe/reward_mean": shaped.mean().item(),
        "recipe/advantage_abs_mean": out.advantages.abs().float().mean().item(),
        "recipe/groups_all_correct": float(correct.all(-1).sum()),
        "recipe/groups_all_wrong": float((~correct).all(-1).sum()),
        "recipe/length_penalty_mean": penalty.float().mean().item(),
        "recipe/lengths_clamped": float(extra["clamped"]),
    }
    if batch.truncated is not None:
        stats["recipe/truncated_rate"] = batch.truncated.float().mean().item()
    if batch.repetitive is not None:
        stats["recipe/repetitive_rate"] = batch.repetitive.float().mean().item()
    missing = [k for k in STATUS_KEYS if k not in extra]
    for key in STATUS_KEYS:  # counts, so one timeout in 8k samples is visible, never averaged to ~0
        if key in extra:
            stats[f"recipe/grading/{key[len('status_') :]}_count"] = float(extra[key].sum())
    stats["recipe/grading/status_missing"] = float(len(missing) > 0)  # 1 = the reward function is not ours
    if "grade_latency_s" in extra:
        stats["recipe/grading/latency_s_max"] = extra["grade_latency_s"].max().item()
    stats.update({f"recipe/{method_name}/{k}": float(v) for k, v in out.stats.items()})
    bad = [k for k, v in stats.items() if v != v or v in (float("inf"), float("-inf"))]
    if bad:
        raise ValueError(f"non-finite recipe statistics {bad}")
    return stats


def problem_records(experiences, indices, batch: RolloutBatch, n: int) -> list[dict]:
    """One record per prompt group (recipe_problems.jsonl, no "step"): problem id (label["id"] or the prompt hash),
    prompt_sha1, correct count, total and mean length. [] when prompts do not line up with the samples."""
    prompts = list(itertools.chain.from_iterable(e.prompts for e in experiences))
    labels = list(itertools.chain.from_iterable(e.labels for e in experiences))
    if len(prompts) != len(indices):
        return []
    order = [0] * len(indices)
    for pos, idx in enumerate(indices.tolist()):
        order[idx] = pos
    records = []
    for q in range(batch.correct.shape[0]):
        members = [order[q * n + j] for j in range(n)]
        group_prompts = {prompts[p] for p in members}
        if len(group_prompts) != 1:
            raise ValueError(
                f"prompt group {q} mixes {len(group_prompts)} different prompts: samples were not "
                "regrouped by prompt (OpenRLHF keeps each prompt's n samples contiguous)"
            )
        sha = prompt_sha1(prompts[members[0]])
        label = labels[members[0]] if len(labels) == len(prompts) else None
        problem = str(label["id"]) if isinstance(label, dict) and "id" in label else sha[:16]
        records.append(
            {
                "problem": problem,
                "prompt_sha1": sha,
                "correct": int(batch.correct[q].sum()),
                "total": n,
                "mean_length": round(batch.lengths[q].mean().item(), 3),
            }
        )
    return records


def truncate_problem_records(path: str, step: int) -> int:
    """Keep only the per-problem records of steps <= `step` (a resume from global_step `step` trains the later ones
    again); atomic rewrite, returns how many were dropped. A torn last line (crash mid-append) is dropped too."""
    if not os.path.exists(path):
        return 0
    kept, dropped = [], 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                keep = int(json.loads(line)["step"]) <= step
            except (ValueError, KeyError, TypeError):
                keep = False
            if keep:
                kept.append(line if line.endswith("\n") else line + "\n")
            else:
                dropped += 1
    if dropped:
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            f.writelines(kept)
        os.replace(tmp, path)
    return dropped
