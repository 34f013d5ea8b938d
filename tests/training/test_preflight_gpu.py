"""The training preflight's GPU checks are the doctor's: GPUs counted as OpenRLHF 0.11.2's train_ppo_ray places
them (async + colocate_all gives vLLM GPUs of its own), flash-attn loaded in a subprocess and never "not needed",
and the optional packages the flags need. Real OpenRLHF-parsed args; fake modules on the subprocesses' PYTHONPATH."""

from __future__ import annotations

import os
import stat
from types import SimpleNamespace as NS

import torch

from lead_recipes.recipes.openrlhf_parser import openrlhf_args
from lead_recipes.training import preflight
from lead_recipes.training.gpu_requirements import TORCH_CUDA, min_driver
from lead_recipes.training.preflight import required_gpus

ONLY = {"flash-attn", "packages"}
SKIP = tuple(n for n in preflight.CHECK_NAMES if n not in ONLY)


def _layout(async_enable: bool, colocate_all: bool = True):
    return NS(
        actor=NS(num_nodes=1, num_gpus_per_node=4),
        ref=NS(num_nodes=1, num_gpus_per_node=4),
        vllm=NS(num_engines=2, tensor_parallel_size=2),
        algo=NS(kl=NS(init_coef=0.01)),
        train=NS(colocate_all=colocate_all, colocate_actor_ref=False, async_enable=async_enable),
    )


def test_async_with_colocate_all_counts_vllms_own_gpus():
    """train_ppo_ray passes its placement group to create_vllm_engines only `if colocate_all and not async_enable`:
    under async the engines take num_engines x TP GPUs beside the actor's (counting only the actor's hangs Ray)."""
    assert required_gpus(_layout(async_enable=True)) == 4 + 2 * 2
    assert required_gpus(_layout(async_enable=False)) == 4


def test_the_placement_rule_is_still_openrlhfs():
    """The condition the count above follows, read in the installed train_ppo_ray (a changed OpenRLHF fails here)."""
    from lead_recipes.recipes.openrlhf_parser import ENTRYPOINTS, _package_file

    source = _package_file(ENTRYPOINTS["train"]).read_text()
    assert "pg if args.train.colocate_all and not args.train.async_enable else None," in source


def _args(*flags: str):
    args, _ = openrlhf_args(["--actor.model_name_or_path", "m", "--reward.remote_url", "r.py", *flags])
    return args


def _preflight(args) -> dict:
    return {c.name: c for c in preflight.run_preflight(args, skip=SKIP)}


def test_flash_attn_that_fails_to_load_is_missing_under_sdpa_too(tmp_path, monkeypatch):
    (tmp_path / "flash_attn_2_cuda.py").write_text("raise ImportError('built against another torch')")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    check = _preflight(_args("--ds.attn_implementation", "sdpa"))["flash-attn"]
    assert not check.ok and "built against another torch" in check.detail and "not needed" not in check.detail


def test_flash_attn_cpu_stub_is_missing_with_packing_and_enough_under_sdpa():
    packed = _preflight(_args("--ds.packing_samples", "--vllm.num_engines", "1"))["flash-attn"]
    assert not packed.ok and "CPU stub" in packed.detail
    plain = _preflight(_args("--ds.attn_implementation", "sdpa"))["flash-attn"]
    assert plain.ok and "imports" in plain.detail


def test_preflight_names_the_package_ring_attention_needs():
    args = _args("--ds.ring_attn_size", "2", "--ds.packing_samples", "--vllm.num_engines", "1")
    check = _preflight(args)["packages"]
    assert not check.ok and "--ds.ring_attn_size 2 needs ring_flash_attn" in check.detail
    assert "fix: pip install ring-flash-attn" in check.detail


def test_no_gpu_seen_names_a_too_old_driver_with_its_fix(tmp_path, monkeypatch):
    """torch sees no GPU (this machine) and nvidia-smi reports a driver older than torch's CUDA needs: the gpu line
    carries the doctor's driver line, which names the driver found, the one needed and the fix."""
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 535.104.05\n")
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(torch.version, "cuda", TORCH_CUDA)
    skip = tuple(n for n in preflight.CHECK_NAMES if n != "gpu")
    check = {c.name: c for c in preflight.run_preflight(_args("--vllm.num_engines", "1"), skip=skip)}["gpu"]
    assert not check.ok and check.detail.startswith("no CUDA GPU visible")
    assert f"driver 535.104.05 is older than {min_driver(TORCH_CUDA)}" in check.detail
    assert "fix: upgrade the NVIDIA driver" in check.detail
