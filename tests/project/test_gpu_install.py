"""The GPU install of launchers/bootstrap.sh, on CPU, on a node made of fakes (tests/support/fake_gpu_node.py): the
order of the installs, their flags and pins, the refusals before anything is touched, and reusing an environment's
torch + flash-attn. What only a GPU node can show: README.md#on-a-gpu-node."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.fake_gpu_node import NEED, NEWER_DRIVER, OLD_DRIVER, OTHER_CUDA, PINS, ROOT, Node, req


@pytest.fixture
def node(tmp_path) -> Node:
    return Node(tmp_path)


# ---------------------------------------------------------------- order, flags, pins
def test_torch_installs_first_then_flash_attn_then_the_package(node):
    run = node.bootstrap()
    assert run.rc == 0, run.out
    torch, _ = run.install("torch==")
    flash_attn, _ = run.install("flash-attn==")
    package, call = run.install(str(node.tree))
    assert torch < flash_attn < package, run.pips
    assert call["argv"][-2:] == ["-e", f"{node.tree}[train,eval,test]"]


def test_flash_attn_builds_without_isolation_or_cache_and_never_from_a_wheel(node):
    run = node.bootstrap()
    _, call = run.install("flash-attn==")
    assert {"--no-build-isolation", "--no-cache-dir"} <= set(call["argv"]), call
    assert call["argv"][call["argv"].index("--no-binary") + 1] == "flash-attn", call
    assert call["env"]["FLASH_ATTENTION_FORCE_BUILD"] == "TRUE", call  # no prebuilt-wheel download either


def test_flash_attn_builds_only_for_the_compute_capabilities_present_with_the_nvcc_checked(node):
    node.gpus(driver=NEWER_DRIVER, caps=["8.6", "9.0", "9.0", "8.0"])
    run = node.bootstrap()
    _, call = run.install("flash-attn==")
    assert call["env"]["FLASH_ATTN_CUDA_ARCHS"] == "80;90", call  # not setup.py's default 80;90;100;120
    assert call["env"]["CUDA_HOME"] == str(node.tmp / f"cuda-{req.TORCH_CUDA}"), call


def test_cuda_home_picks_the_toolkit_over_the_nvcc_on_path(node):
    node.nvcc(OTHER_CUDA)  # the wrong major first on PATH
    home = node.toolkit(req.TORCH_CUDA)
    run = node.bootstrap(CUDA_HOME=str(home))
    assert run.rc == 0, run.out
    assert run.install("flash-attn==")[1]["env"]["CUDA_HOME"] == str(home)


def test_max_jobs_and_the_build_estimate_are_printed_before_the_build_starts(node):
    run = node.bootstrap()
    _, call = run.install("flash-attn==")
    jobs = call["env"]["MAX_JOBS"]
    printed = re.search(r"MAX_JOBS=(\d+) \(9 GiB free each.*about (\d+) minutes", run.out)
    assert printed and printed[1] == jobs and int(jobs) >= 1, run.out
    assert run.out.index(printed[0]) < run.out.index("[pip] install --no-build-isolation"), run.out


def test_a_max_jobs_set_by_the_user_is_kept(node):
    run = node.bootstrap(MAX_JOBS="3")
    _, call = run.install("flash-attn==")
    assert call["env"]["MAX_JOBS"] == "3" and "MAX_JOBS=3 (from MAX_JOBS" in run.out, run.out


def _bumped(version: str) -> str:
    head, _, last = version.rpartition(".")
    return f"{head}.{int(last) + 1}"


def test_the_versions_installed_are_pyproject_pins(node):
    torch, flash_attn = _bumped(PINS["torch"]), _bumped(PINS["flash-attn"])
    node.pin("torch", torch)
    node.pin("flash-attn", flash_attn)
    node.installed(torch=f"{torch}+cu130", flash_attn=flash_attn)
    run = node.bootstrap()
    assert run.rc == 0, run.out
    assert run.install("torch==")[1]["argv"][-1] == f"torch=={torch}"
    assert run.install("flash-attn==")[1]["argv"][-1] == f"flash-attn=={flash_attn}"


def test_the_cpu_stack_keeps_its_install_steps(node):
    run = node.bootstrap(LEAD_RECIPES_STACK="cpu")
    assert run.rc == 0, run.out
    assert [c["argv"] for c in run.pips] == [
        ["install", "-q", "--upgrade", "pip"],
        ["install", "-q", f"torch=={PINS['torch']}"],
        ["install", "-q", "--no-deps", f"openrlhf=={PINS['openrlhf']}"],
        ["install", "-q", "-r", f"{node.tree}/launchers/requirements-cpu.txt"],
        ["install", "-q", "--no-deps", "--no-build-isolation", "--no-cache-dir", "--no-binary", "flash-attn"]
        + [f"flash-attn=={PINS['flash-attn']}"],
        ["uninstall", "-y", "-q", "torchvision", "torchaudio", "torchcodec", "triton"],
        ["install", "-q", "-e", f"{node.tree}[eval,test]"],
    ]
    assert (node.venv / "site-packages" / "flash_attn_2_cuda.py").read_text().startswith("# CPU stub")


def test_the_cpu_stack_s_python_only_flash_attn_never_enters_pip_s_cache(node):
    # a GPU node sharing $HOME would take that cached wheel; reading from a cache is closed too (--no-binary)
    _, call = node.bootstrap(LEAD_RECIPES_STACK="cpu").install("flash-attn==")
    assert "--no-cache-dir" in call["argv"], call
    assert call["argv"][call["argv"].index("--no-binary") + 1] == "flash-attn", call


def test_flash_attn_s_build_tools_are_installed_at_pyproject_s_pins_before_it(node):
    node.pin("wheel", _bumped(PINS["wheel"]))  # the list bash installs is read from pyproject.toml
    run = node.bootstrap()
    assert run.rc == 0, run.out
    at, call = run.install("wheel==")
    wanted = req.build_requirements((node.tree / "pyproject.toml").read_text())
    assert f"wheel=={_bumped(PINS['wheel'])}" in wanted and call["argv"][2:] == wanted, call
    assert {"ninja", "packaging", "psutil", "setuptools", "wheel"} <= {r.split("==")[0] for r in wanted}
    assert run.install("torch==")[0] < at < run.install("flash-attn==")[0], run.pips


# ---------------------------------------------------------------- refusals
# case: (make the node so, the reason, the remedy)
REFUSALS = {
    "old driver": (
        lambda n: n.gpus(driver=OLD_DRIVER, caps=["9.0"]),
        f"{OLD_DRIVER} is older than {NEED}",
        f"upgrade the NVIDIA driver to {NEED} or newer",
    ),
    "no driver": (Node.no_driver, "nvidia-smi not found", "run on a GPU node, or LEAD_RECIPES_STACK=cpu"),
    "no nvcc": (
        lambda n: n.nvcc(None),
        "no nvcc on PATH",
        f"install the CUDA {req.TORCH_CUDA} toolkit and put its bin/ on PATH",
    ),
    "nvcc of another major": (
        lambda n: n.nvcc(OTHER_CUDA),
        f"is CUDA {OTHER_CUDA} but torch is built for CUDA {req.TORCH_CUDA}",
        f"point CUDA_HOME (or PATH) at a CUDA {req.TORCH_CUDA.split('.')[0]}.x toolkit",
    ),
    "an nvcc outside a toolkit": (
        Node.wrapped_nvcc,
        "include/cuda_runtime.h is missing",
        f"set CUDA_HOME to the root of the CUDA {req.TORCH_CUDA} toolkit",
    ),
    "a GPU without flash-attn kernels": (
        lambda n: n.gpus(driver=NEWER_DRIVER, caps=["9.0", "7.5"]),
        "this node has 7.5",
        "train on a node with Ampere or newer GPUs",
    ),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_each_refusal_is_one_line_with_its_remedy_before_anything_is_touched(node, case):
    make, reason, remedy = REFUSALS[case]
    make(node)
    node.venv.mkdir()
    (node.venv / "kept").write_text("the previous venv")
    run = node.bootstrap()
    assert run.rc == 1, run.out
    lines = run.out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("[bootstrap] refused: "), run.out
    assert reason in lines[0] and remedy in lines[0].split(reason, 1)[1], lines[0]
    assert run.pips == [] and (node.venv / "kept").exists(), run.out


def test_the_oldest_driver_that_runs_torch_cuda_is_accepted(node):
    node.gpus(driver=req.min_driver(req.TORCH_CUDA), caps=["9.0"])
    assert node.bootstrap().rc == 0


def test_a_torch_without_cuda_stops_the_install_before_flash_attn_builds(node):
    node.installed(torch=f"{PINS['torch']}+cpu", cuda=None)  # what a find-links to a CPU wheel would install
    run = node.bootstrap()
    assert run.rc == 1 and "is built for CUDA None" in run.out, run.out
    assert run.install("torch==") and not any("flash-attn" in " ".join(c["argv"]) for c in run.pips), run.pips


def test_an_install_that_left_the_cpu_stub_of_flash_attn_2_cuda_fails(node):
    node.installed(extension="stub")  # what a cached python-only flash-attn wheel would leave
    run = node.bootstrap()
    assert run.rc == 1 and "flash_attn_2_cuda is the CPU stack's stub" in run.out, run.out
    assert not (node.venv / ".bootstrap-stamp").exists()


# ---------------------------------------------------------------- reusing the environment's torch + flash-attn
def test_reuse_installs_only_the_package_into_a_venv_that_sees_the_environment(node):
    node.nvcc(None)  # nothing is compiled: no nvcc needed
    run = node.bootstrap(LEAD_RECIPES_REUSE_GPU_STACK="1")
    assert run.rc == 0, run.out
    assert (node.venv / "venv-flags").read_text().split() == ["--system-site-packages"]
    installs = [c["argv"] for c in run.pips if c["argv"][0] == "install"]
    assert installs == [["install", "-q", "--upgrade", "pip"], ["install", "-e", f"{node.tree}[train,eval,test]"]]
    assert "no nvcc: DeepSpeed's FusedAdam" in run.out, run.out


BAD_ENVIRONMENTS = {
    "torch of another version": (
        {"torch": f"{_bumped(PINS['torch'])}+cu130"},
        f"torch is {_bumped(PINS['torch'])}+cu130, pyproject.toml pins torch=={PINS['torch']}",
    ),
    "torch of another CUDA": ({"cuda": OTHER_CUDA}, f"is built for CUDA {OTHER_CUDA}, not {req.TORCH_CUDA}"),
    "a CPU torch": ({"torch": f"{PINS['torch']}+cpu", "cuda": None}, "is built for CUDA None"),
    "flash-attn of another version": (
        {"flash_attn": _bumped(PINS["flash-attn"])},
        f"flash-attn is {_bumped(PINS['flash-attn'])}, pyproject.toml pins",
    ),
    "flash_attn_2_cuda that does not load": ({"extension": "broken"}, "does not load (ImportError: flash_attn_2_cuda"),
    "the CPU stub": ({"extension": "stub"}, "flash_attn_2_cuda is the CPU stack's stub"),
}


@pytest.mark.parametrize("case", BAD_ENVIRONMENTS)
def test_reuse_refuses_an_environment_that_differs_from_the_pins_before_touching_the_venv(node, case):
    installed, says = BAD_ENVIRONMENTS[case]
    node.installed(**installed)
    node.venv.mkdir()
    run = node.bootstrap(LEAD_RECIPES_REUSE_GPU_STACK="1")
    assert run.rc == 1 and says in run.out and "unset LEAD_RECIPES_REUSE_GPU_STACK" in run.out, run.out
    assert run.pips == [] and not (node.venv / "venv-flags").exists(), run.out


def test_an_unchanged_venv_is_kept_and_turning_reuse_on_rebuilds_it(node):
    first = node.bootstrap()
    again = node.bootstrap()
    assert first.rc == again.rc == 0 and len(again.pips) == len(first.pips), again.out
    reuse = node.bootstrap(LEAD_RECIPES_REUSE_GPU_STACK="1")
    assert reuse.rc == 0 and len(reuse.pips) > len(first.pips), reuse.out
    assert (node.venv / "venv-flags").read_text().split() == ["--system-site-packages"]


# ---------------------------------------------------------------- the script itself
def test_bootstrap_sh_is_shellcheck_clean():
    shellcheck = Path(sys.executable).parent / "shellcheck"
    done = subprocess.run([str(shellcheck), str(ROOT / "launchers" / "bootstrap.sh")], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout
