"""The CPU end-to-end shim (tests/cpu_e2e/shim/sitecustomize.py) guards itself: every patched symbol has the
signature the patch was written for (a version bump fails loudly), it does nothing unless E2E_CPU_SHIM=1, and it
refuses to run where a CUDA GPU is visible. Its flash-attn stand-in (flash_attn_cpu.py) equals attention per packed
sequence, and a packed forward through OpenRLHF's Actor gives the unpacked log-probs."""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import subprocess
import sys
from types import SimpleNamespace as NS

import pytest
import torch
from cpu_e2e import harness

TESTS = str(harness.ROOT / "tests")


def load_shim():
    spec = importlib.util.spec_from_file_location("e2e_shim_under_test", harness.SHIM / "sitecustomize.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # inert: E2E_CPU_SHIM is not set in the test process
    return module


@pytest.fixture(scope="module")
def shim():
    pytest.importorskip("vllm")
    return load_shim()


def test_every_patched_symbol_matches_the_installed_packages(shim):
    assert shim.signature_problems() == []


def test_a_changed_signature_is_named(shim, monkeypatch):
    from openrlhf.trainer.ray.vllm_worker_wrap import WorkerWrap

    def update_weight(self, name, dtype, shape, empty_cache=False, packed=False):
        pass

    monkeypatch.setattr(WorkerWrap, "update_weight", update_weight)
    problems = shim.signature_problems()
    assert len(problems) == 1 and "WorkerWrap.update_weight" in problems[0] and "packed" in problems[0]
    with pytest.raises(shim.ShimMismatch, match="update_weight"):
        shim._worker_wrap(sys.modules["openrlhf.trainer.ray.vllm_worker_wrap"])


def test_a_missing_symbol_is_named(shim, monkeypatch):
    import openrlhf.utils.distributed_util as du

    monkeypatch.delattr(du, "stateless_init_process_group")
    assert any("stateless_init_process_group is missing" in p for p in shim.signature_problems())


def test_it_refuses_where_a_cuda_gpu_is_visible(shim):
    fake = NS(cuda=NS(is_available=lambda: True))
    with pytest.raises(shim.ShimMismatch, match="GPU"):
        shim._torch(fake)


def test_it_is_inert_unless_switched_on():
    code = (
        "import sitecustomize, torch; print(sitecustomize.ENABLED, sitecustomize.APPLIED, "
        "torch.cuda.current_device.__module__)"
    )
    env = {k: v for k, v in harness.shim_env().items() if k != "E2E_CPU_SHIM"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[:2] == ["False", "[]"] and out.stdout.split()[2] == "torch.cuda"


def _attention(q, k, v, causal):
    """Reference attention of one sequence, written out: q (s, h, d), k/v (s, h_kv, d); query head i reads
    key/value head i // (h / h_kv), as flash-attn documents for grouped-query attention."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q.double(), k.double()) / q.shape[-1] ** 0.5
    if causal:
        scores = scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), float("-inf"))
    return torch.einsum("hqk,khd->qhd", scores.softmax(-1), v.double()).to(q.dtype)


def _packed(lengths=(5, 1, 9, 3), heads=4, kv_heads=2, dim=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    total = sum(lengths)
    q, k, v = (torch.randn(total, h, dim, generator=g) for h in (heads, kv_heads, kv_heads))
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)
    return q, k, v, cu


def _per_sequence(q, k, v, cu, causal=True):
    b = cu.tolist()
    return torch.cat([_attention(q[s:e], k[s:e], v[s:e], causal) for s, e in zip(b, b[1:])])


@pytest.fixture(scope="module")
def flash_cpu():
    spec = importlib.util.spec_from_file_location("flash_attn_cpu_under_test", harness.SHIM / "flash_attn_cpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def float32_math(flash_cpu, monkeypatch):
    """The stand-in with float32 allowed: these tests compare its math in float32, not the kernel's input checks."""
    monkeypatch.setattr(flash_cpu, "ALLOW_FLOAT32", True)
    return flash_cpu


# float32 through two matmuls and a softmax over <= 9 keys: rounding is ~1e-6; a wrong boundary changes outputs by O(1)
ATOL = 1e-5


def test_the_flash_attn_stand_in_equals_attention_per_sequence_causal_and_grouped(float32_math):
    flash_cpu = float32_math
    q, k, v, cu = _packed()
    out = flash_cpu.flash_attn_varlen_func(q, k, v, cu, cu, 9, 9, causal=True)
    assert out.shape == q.shape
    assert torch.allclose(out, _per_sequence(q, k, v, cu), atol=ATOL)
    batch = flash_cpu.flash_attn_func(q[None, :5], k[None, :5], v[None, :5], causal=True)
    assert torch.allclose(batch[0], _attention(q[:5], k[:5], v[:5], True), atol=ATOL)


def test_wrong_sequence_boundaries_give_another_result(float32_math):
    """The comparison above can fail: the same packed batch cut at other boundaries (one moved by one token, or
    none at all) differs from attention per sequence far beyond the tolerance."""
    flash_cpu = float32_math
    q, k, v, cu = _packed()
    want = _per_sequence(q, k, v, cu)
    moved = cu.clone()
    moved[2] += 1
    whole = torch.tensor([0, q.shape[0]], dtype=torch.int32)
    for wrong in (moved, whole):
        out = flash_cpu.flash_attn_varlen_func(q, k, v, wrong, wrong, 10, 18, causal=True)
        assert (out - want).abs().max() > 100 * ATOL


def test_the_stand_in_refuses_what_it_does_not_compute(float32_math):
    flash_cpu = float32_math
    q, k, v, cu = _packed()
    with pytest.raises(NotImplementedError, match="dropout_p.*run this path on a GPU"):
        flash_cpu.flash_attn_varlen_func(q, k, v, cu, cu, 9, 9, dropout_p=0.1, causal=True)
    with pytest.raises(NotImplementedError, match="seqlen_q == seqlen_k"):
        flash_cpu.flash_attn_func(q[None, :3], k[None, :5], v[None, :5], causal=True)


def test_the_stand_in_refuses_the_inputs_the_real_kernel_refuses(flash_cpu):
    """float32 (unless a math comparison allows it), head dims above 256, key/value heads that do not divide the
    query heads; a head dim that is no multiple of 8 passes, as flash-attn's Python wrapper pads it."""
    q, k, v, cu = _packed()
    with pytest.raises(RuntimeError, match="only support fp16 and bf16.*ALLOW_FLOAT32"):
        flash_cpu.flash_attn_varlen_func(q, k, v, cu, cu, 9, 9, causal=True)
    with pytest.raises(RuntimeError, match="only support fp16 and bf16"):
        flash_cpu.flash_attn_func(q[None, :5], k[None, :5], v[None, :5], causal=True)
    wide = _packed(dim=264)
    with pytest.raises(RuntimeError, match="head dimension at most 256 \\(got 264\\)"):
        flash_cpu.flash_attn_varlen_func(*(t.bfloat16() for t in wide[:3]), wide[3], wide[3], 9, 9, causal=True)
    odd = _packed(heads=4, kv_heads=3, dim=32)
    with pytest.raises(RuntimeError, match="must divide number of heads in query"):
        flash_cpu.flash_attn_varlen_func(*(t.bfloat16() for t in odd[:3]), odd[3], odd[3], 9, 9, causal=True)
    padded = _packed(dim=12)
    q, k, v = (t.bfloat16() for t in padded[:3])
    assert flash_cpu.flash_attn_varlen_func(q, k, v, padded[3], padded[3], 9, 9, causal=True).shape == q.shape


def test_the_stand_ins_have_flash_attns_signatures(shim, flash_cpu):
    """transformers reads the varlen function's parameters to choose the kwargs it passes."""
    for name in ("flash_attn_varlen_func", "flash_attn_func"):
        assert list(inspect.signature(getattr(flash_cpu, name)).parameters) == shim.EXPECTED[("flash_attn", name)]


@pytest.mark.timeout(300)
def test_a_packed_forward_gives_the_unpacked_log_probs(model):
    """OpenRLHF's Actor.forward with --ds.packing_samples + flash_attention_2 (the stand-in) against sdpa without
    packing, on the tiny model, in a process with the shim on. Tolerances: float32 1e-4 (the same math on the same
    tokens, only rounding differs: measured 2e-6); bf16 4 bf16 steps of the largest logit, an empirical margin, not
    a derivation (one step at |logit| 8-16 is 0.0625; measured 0.073, as the packed and padded matmuls round
    differently through both layers). A pack whose boundaries are ignored differs by O(1) (measured 3.8)."""
    out = subprocess.run(
        [sys.executable, "-m", "cpu_e2e.packing", str(model)],
        env={**harness.shim_env(), "PYTHONPATH": os.pathsep.join([str(harness.SHIM), str(harness.ROOT), TESTS])},
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    gaps = json.loads(out.stdout.strip().splitlines()[-1])
    assert gaps["varlen_sequences"] == [4]  # the batch's 4 samples went through one varlen call per layer
    assert gaps["float32"] < 1e-4, gaps
    assert gaps["bfloat16"] <= 4 * gaps["bfloat16_logit_step"], gaps
    assert gaps["leak_float32"] > 100 * 1e-4, gaps
