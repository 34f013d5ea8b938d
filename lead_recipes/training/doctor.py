"""The doctor's checks of a GPU node, each a `Check` whose detail ends in its remedy (`fix: ...`): a CUDA GPU, the
driver against the pinned torch's CUDA (the install's own check), flash-attn, DeepSpeed's FusedAdam, an NCCL
all-reduce, vLLM at its pin, and the optional packages a train command's flags need. What can crash, hang or compile
runs in a subprocess (lead_recipes.training.gpu_probes) with a timeout. Imports only the standard library and torch
(inside the checks), so it runs on a box without OpenRLHF, vLLM or Ray; `lead-recipes doctor` (doctor_cli) and the
training preflight call it. See docs/gpu.md.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import signal
import subprocess
import sys
import warnings
from pathlib import Path

from lead_recipes.training import gpu_requirements
from lead_recipes.training.data_check import Check
from lead_recipes.training.gpu_probes import NO_GPU
from lead_recipes.training.gpu_requirements import TORCH_CUDA, min_driver

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
# FusedAdam is compiled by DeepSpeed's JIT at first use (with nvcc; not yet timed on a GPU node), later runs load
# the cache: the timeout leaves that first build minutes
DEFAULT_TIMEOUT = 300
SETUP = "bash launchers/bootstrap.sh setup on the GPU node, see docs/gpu.md"

# (flag of OpenRLHF's train_ppo_ray, needed when its value >= this, module imported, requirement to install)
OPTIONAL_PACKAGES = (
    ("ds.ring_attn_size", 2, "ring_flash_attn", "ring-flash-attn"),
    ("ds.use_liger_kernel", True, "liger_kernel", "liger-kernel"),
    # Ray's NCCL collective group, which --vllm.sync_with_ray uses for the weight sync, runs on cupy
    ("vllm.sync_with_ray", True, "cupy", f"cupy-cuda{TORCH_CUDA.split('.')[0]}x"),
)


def pins() -> dict[str, str]:
    """{package: version} pinned by pyproject.toml: read from the checkout beside the package, else from the
    installed distribution's requirements (which lack [tool.lead-recipes])."""
    path = PACKAGE_ROOT / "pyproject.toml"
    if path.is_file():
        return gpu_requirements.pins(path.read_text())
    import importlib.metadata

    requires = importlib.metadata.requires("lead-recipes") or []
    found = [m.groups() for r in requires if (m := re.match(r"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([^;\s]+)", r))]
    return {name.lower().replace("_", "-"): version for name, version in found}


def _pin(name: str) -> str:
    return f"{name}=={pins().get(name, '(see pyproject.toml)')}"


def run_probe(*probe: str, timeout: float = DEFAULT_TIMEOUT) -> tuple[bool, str]:
    """(ok, detail) of `python -m lead_recipes.training.gpu_probes PROBE...` in its own process group: a crash
    (signal), a timeout (the whole group is killed) or a probe that printed no result is a failure naming it."""
    path = [str(PACKAGE_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
    argv = [sys.executable, "-m", "lead_recipes.training.gpu_probes", *probe]
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    ) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # spawned workers too (the NCCL probe's ranks)
            proc.communicate()
            return False, f"did not finish in {timeout:g} s (killed)"
    if proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name
        return False, f"the process crashed with {name} (a native library failed; nothing else ran after it)"
    lines = out.strip().splitlines()
    try:
        result = json.loads(lines[-1])
        return bool(result["ok"]), str(result["detail"])
    except (IndexError, ValueError, KeyError, TypeError):
        said = (err.strip().splitlines() or ["no output"])[-1]
        return False, f"exit {proc.returncode} without a result: {said}"


def _failed(name: str, detail: str, fix: str) -> Check:
    """A failed check; a probe that found no GPU gets that remedy instead of the check's own."""
    return Check(name, False, f"{detail}; fix: {'run it on a GPU node (the gpu line)' if NO_GPU in detail else fix}")


def _torch():
    """torch, imported without its pynvml deprecation warning (nothing the user can act on), or None."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            import torch
        except ImportError:
            return None
    return torch


def check_gpu() -> Check:
    """At least one CUDA GPU visible to torch."""
    torch = _torch()
    if torch is None:
        return Check("gpu", False, f"no GPU: torch is not installed; fix: pip install {_pin('torch')} ({SETUP})")
    if torch.version.cuda is None:
        return Check(
            "gpu",
            False,
            f"no GPU: torch {torch.__version__} is a CPU build; fix: on a GPU node install the CUDA build "
            f"{_pin('torch')} ({SETUP})",
        )
    with warnings.catch_warnings():  # a too-old driver warns here; the driver check names it
        warnings.simplefilter("ignore")
        count = torch.cuda.device_count()
    if count == 0:
        return Check(
            "gpu",
            False,
            f"no GPU: torch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA device; fix: run on a GPU "
            "node, check CUDA_VISIBLE_DEVICES and the driver line below",
        )
    names = sorted({torch.cuda.get_device_name(i) for i in range(count)})
    return Check("gpu", True, f"{count} CUDA GPU(s): {', '.join(names)}")


def check_driver() -> Check:
    """The oldest GPU's driver runs the pinned torch's CUDA: gpu_requirements.check_driver, the install's own check."""
    try:
        driver = gpu_requirements.check_driver(_pin("torch"))
    except gpu_requirements.Refusal as refusal:
        return Check("driver", False, f"{refusal.reason}; fix: {refusal.fix}")
    return Check("driver", True, f"driver {driver} runs CUDA {TORCH_CUDA} (needs >= {min_driver(TORCH_CUDA)})")


def check_flash_attn(need_kernels: bool = True, timeout: float = DEFAULT_TIMEOUT) -> Check:
    """flash_attn_2_cuda loads in a subprocess (a crash there is reported, not suffered) and flash_attn imports, as
    OpenRLHF imports it always; with `need_kernels` (flash attention or packing) it must be the CUDA build, and on a
    GPU one varlen call must equal SDPA per sequence."""
    ok, detail = run_probe("flash-attn", "1" if need_kernels else "0", timeout=timeout)
    if ok:
        return Check("flash-attn", True, detail)
    why = "" if need_kernels else " (OpenRLHF imports flash_attn even under sdpa)"
    fix = f"build {_pin('flash-attn')} against this torch with --no-build-isolation ({SETUP})"
    return _failed("flash-attn", detail + why, fix)


def check_fused_adam(timeout: float = DEFAULT_TIMEOUT) -> Check:
    """DeepSpeed's FusedAdam builds (JIT) and one step equals torch's Adam."""
    ok, detail = run_probe("fused-adam", timeout=timeout)
    if ok:
        return Check("fused-adam", True, detail)
    return _failed("fused-adam", detail, _deepspeed_fix())


def _deepspeed_fix() -> str:
    return (
        f"install {_pin('deepspeed')} and ninja; its JIT build needs nvcc for CUDA {TORCH_CUDA} (CUDA_HOME) and a "
        "writable ~/.cache/torch_extensions"
    )


def check_zero3(timeout: float = DEFAULT_TIMEOUT) -> Check:
    """DeepSpeed ZeRO-3 initialises a tiny model in one process and one step moves it (CPU too, over gloo)."""
    ok, detail = run_probe("zero3", timeout=timeout)
    return Check("zero3", True, detail) if ok else _failed("zero3", detail, _deepspeed_fix())


def check_nccl(timeout: float = DEFAULT_TIMEOUT) -> Check:
    """An NCCL all-reduce across every visible GPU."""
    ok, detail = run_probe("nccl", timeout=timeout)
    if ok:
        return Check("nccl", True, detail)
    fix = "rerun with NCCL_DEBUG=INFO; NCCL_P2P_DISABLE=1 or NCCL_IB_DISABLE=1 isolates a transport"
    return _failed("nccl", detail, fix)


def check_vllm(timeout: float = DEFAULT_TIMEOUT) -> Check:
    """vLLM imports at the version pyproject.toml pins."""
    pin = pins().get("vllm")
    ok, detail = run_probe("version", "vllm", timeout=timeout)
    if ok and detail.split("+")[0] == pin:
        return Check("vllm", True, f"vllm {detail} imports, the pinned version")
    said = f"vllm {detail} imports, not the pinned {pin}" if ok else detail
    return Check("vllm", False, f"{said}; fix: pip install {_pin('vllm')} ({SETUP})")


def _value(args, flag: str):
    for part in flag.split("."):
        args = getattr(args, part)
    return args


def check_packages(args=None, timeout: float = DEFAULT_TIMEOUT) -> Check:
    """Each optional package the train command's flags need (OPTIONAL_PACKAGES) imports; `args` is the nested
    namespace OpenRLHF's parser gives (None: no train command, nothing to check)."""
    rules = ", ".join(f"{req} for --{flag}" for flag, _, _, req in OPTIONAL_PACKAGES)
    if args is None:
        return Check("packages", True, f"no train command given to check ({rules})")
    needed = [(f, m, r, _value(args, f)) for f, at, m, r in OPTIONAL_PACKAGES if _value(args, f) >= at]
    if not needed:
        return Check("packages", True, f"none needed by these flags ({rules})")
    with concurrent.futures.ThreadPoolExecutor(len(needed)) as pool:
        results = list(pool.map(lambda n: run_probe("version", n[1], timeout=timeout), needed))
    missing = [
        f"--{flag} {value} needs {module}: {detail}; fix: pip install {req}"
        for (flag, module, req, value), (ok, detail) in zip(needed, results)
        if not ok
    ]
    if missing:
        return Check("packages", False, "; ".join(missing))
    return Check("packages", True, ", ".join(f"{m} {d} (--{f})" for (f, m, _, _), (_, d) in zip(needed, results)))


def run_doctor(args=None, timeout: float = DEFAULT_TIMEOUT) -> list[Check]:
    """Every check, the subprocess ones side by side (the slowest, a first FusedAdam build, sets the time)."""
    with concurrent.futures.ThreadPoolExecutor(5) as pool:
        probed = (check_flash_attn, check_fused_adam, check_nccl, check_vllm)
        slow = [pool.submit(check, timeout=timeout) for check in probed]
        packages = pool.submit(check_packages, args, timeout=timeout)
        first = [check_gpu(), check_driver()]
        return first + [f.result() for f in slow] + [packages.result()]


def report_line(check: Check) -> str:
    return f"[{'ok' if check.ok else 'FAIL':>4}] {check.name:<10} {check.detail}"
