"""The shipped recipes' GPU paths through the real `lead-recipes train` loop on CPU (tests/cpu_e2e's shim, one Ray
cluster and fixture model for the module, 2 steps each): sample packing with flash_attention_2 (the shim's per-sequence
SDPA stand-in for flash-attn's varlen kernel), dynamic batching over 2 epochs with the step-order actor, ZeRO-3. Each
run's flags come from launchers/gpu_smoke.py's PATHS; ZeRO-3 with DeepSpeed sleep is test_e2e_zero3_sleep.py (e2e_full).
What each proves: docs/e2e.md#what-each-run-proves; what cannot run on CPU (vLLM tensor parallel 2):
docs/e2e.md#what-cannot-run-on-cpu."""

from __future__ import annotations

import json
from types import SimpleNamespace as NS

import pytest
import torch
from cpu_e2e import harness
from cpu_e2e.checks import advantage_mismatches, epochs_and_steps, unstratified_steps

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.skipif(harness.available() is not None, reason=str(harness.available())),
]
P = harness.gpu_smoke.PROFILES["cpu"]
PER_STEP, N, CAP = P["rollout_batch"] * P["n"], P["n"], P["max_new_tokens"]


def _argv(method):
    return harness.gpu_smoke.method_flags(method, CAP) + ["--recipe.method", method]


# CPU-only extra flag of the flash-attention paths: the preflight rightly refuses the CPU stub flash_attn_2_cuda
# (the shim's stand-in replaces the kernels, not the check), so these runs skip that check as well as `gpu`
FLASH_ATTN_STUB = ["--preflight.skip", "gpu,flash-attn"]


def _run(cluster, model, tmp_path, method, path, extra=(), episodes=1):
    run = harness.Run(cluster, model, tmp_path / f"{method}-{path}", method, episodes, path=path, extra=extra)
    assert run.wait() == 0, run.tail()
    print(f"{path}: {method}, 2 steps, {run.wall_s:.0f} s wall")
    return run


def test_packed_flash_attention_run_trains_on_the_methods_advantage(cluster, model, tmp_path):
    """lead, 2 steps, --ds.packing_samples with flash_attention_2: the actor's forward went through the varlen
    stand-in with several sequences in one call, and each sample trained on the method's advantage."""
    run = _run(cluster, model, tmp_path, "lead", "packing", FLASH_ATTN_STUB)
    rows = run.trained_rows()
    assert len(rows) == 2 * PER_STEP
    assert all(r["varlen"] and r["varlen"]["varlen"] > 0 for r in rows), rows[0]["varlen"]
    assert max(r["varlen"]["most_sequences"] for r in rows) > 1  # packed: several samples per forward
    assert advantage_mismatches(run, _argv("lead"), 1, N, CAP, PER_STEP) == []


def _sample(r):
    return (r["prompt"], tuple(r["response_ids"]))


def _upstream_steps(lengths: list[float], step_size: int) -> list[list[dict]]:
    """OpenRLHF's own order (balance_experiences, one rank) of samples of these lengths, cut into optimizer steps."""
    import torch
    from openrlhf.trainer.ppo_utils.experience import Experience, balance_experiences, split_experience_batch

    one = [Experience(sequences=torch.ones(1, 1), total_length=torch.tensor([n])) for n in lengths]
    args = NS(actor=NS(num_nodes=1, num_gpus_per_node=1), ds=NS(ring_attn_size=1, tensor_parallel_size=1))
    (rank,) = balance_experiences(one, args)
    order = [{"total_length": float(e.total_length)} for e in split_experience_batch(rank)]
    return [order[i : i + step_size] for i in range(0, len(order), step_size)]


def test_dynamic_batching_deals_each_epoch_into_steps_that_span_the_lengths(cluster, model, tmp_path):
    """lead, 2 steps, --train.dynamic_batch_enable --train.max_epochs 2 (packing, flash_attention_2), with the
    step-order actor (lead_recipes/training/step_order.py): each rollout is trained in two passes over the same
    samples with the same advantages, every optimizer step of every pass holds one sample of each length stratum
    (OpenRLHF's own order, on the same lengths, gives the first steps the extremes and the last the middle), and
    the advantages are the method's. The 4 prompts are 40 tokens apart in length (more than the responses vary),
    so the strata are the prompts."""
    rows = [
        {"prompt": "Please think. " * (4 * i) + q, "label": a}
        for i, (q, a) in enumerate(
            (("What is 1 + 1?", "2"), ("What is 6 / 2?", "3"), ("What is 5 - 3?", "2"), ("What is 9 / 3?", "3"))
        )
    ]
    (tmp_path / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    # CPU-only extras: every prompt in each rollout (16 samples) and --train.batch_size 4, so each rollout is 4
    # optimizer steps (with the CPU profile's 8 samples and batch 8, one step holds every sample: any order passes)
    extra = [*FLASH_ATTN_STUB, "--rollout.batch_size", "4", "--train.batch_size", "4"]
    run = _run(cluster, model, tmp_path, "lead", "dynamic-batching", extra, episodes=2)
    passes = epochs_and_steps(run.trained_rows())
    assert len(passes) == 2 * 2, [[len(s) for s in p] for p in passes]  # 2 global steps x 2 epochs
    for first, second in zip(passes[::2], passes[1::2]):
        assert [len(s) for s in first] == [len(s) for s in second] == [4] * 4
        # the same samples (a sample is its prompt and response; the same response twice gets the same advantage)
        assert sorted(_sample(r) for s in first for r in s) == sorted(_sample(r) for s in second for r in s)
        adv = {_sample(r): r["adv"] for s in first for r in s}
        assert all(r["adv"] == adv[_sample(r)] for s in first + second for r in s)
        lengths = [[r["total_length"] for r in s] for s in first + second]
        assert unstratified_steps(first) == [] and unstratified_steps(second) == [], lengths
        assert unstratified_steps(_upstream_steps([r["total_length"] for s in first for r in s], 4)), lengths
    once = [r for p in passes[::2] for s in p for r in s]
    assert advantage_mismatches(run, _argv("lead"), 1, N, CAP, 16, trained=once) == []


def test_zero3_trains_on_the_methods_advantage_and_saves_the_method_state(cluster, model, tmp_path):
    """lead, 2 steps, --ds.zero_stage 3 (partitioned parameters: the forward, the step, the gathered weight sync
    to vLLM and a ZeRO-3 checkpoint with the method's state). With --ds.enable_sleep: test_e2e_zero3_sleep.py."""
    run = _run(cluster, model, tmp_path, "lead", "zero3")
    assert advantage_mismatches(run, _argv("lead"), 1, N, CAP, PER_STEP) == []
    assert run.recipe_state(2)["method"] == "lead"
    # the run was ZeRO-3, not a ZeRO-2 run that passes the lines above as well: DeepSpeed 0.19.6 names the model
    # states per rank only when it partitions the weights (engine._get_ckpt_name: zero_pp_rank_R_mp_rank_00_...,
    # else mp_rank_00_...) and saves the engine's config beside them (_common_checkpoint_state: ds_config)
    saved = sorted(p.name for p in (run.ckpt / "_actor" / "global_step2").glob("*model_states.pt"))
    assert saved and all(n.startswith("zero_pp_rank_") for n in saved), saved
    state = torch.load(run.ckpt / "_actor" / "global_step2" / saved[0], map_location="cpu", weights_only=False)
    assert state["ds_config"]["zero_optimization"]["stage"] == 3, state["ds_config"]["zero_optimization"]
