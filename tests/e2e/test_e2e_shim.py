"""The CPU end-to-end shim (tests/cpu_e2e/shim/sitecustomize.py) guards itself: every patched symbol has the
signature the patch was written for (a version bump fails loudly), it does nothing unless E2E_CPU_SHIM=1, and it
refuses to run where a CUDA GPU is visible."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from types import SimpleNamespace as NS

import pytest
from cpu_e2e import harness


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
