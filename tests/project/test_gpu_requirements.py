"""lead_recipes/training/gpu_requirements.py's sizing of the flash-attn build, by hand: the jobs free memory and
cores allow (a job's cgroup limit included), the estimated minutes, and the flash-attn architecture of each compute
capability. The install that uses them: test_gpu_install.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "lead_recipes" / "training"))  # as bootstrap.sh runs it: standalone
import gpu_requirements as req  # noqa: E402


def test_build_jobs_take_nine_gib_each_and_a_core_per_nvcc_thread():
    gib = 2**30
    assert req.build_jobs(40 * gib, cores=64, n_archs=1) == 4  # memory-bound: 40 // 9
    assert req.build_jobs(500 * gib, cores=16, n_archs=1) == 16  # core-bound: one thread per job
    assert req.build_jobs(500 * gib, cores=16, n_archs=4) == 4  # four nvcc threads per job
    assert req.build_jobs(4 * gib, cores=16, n_archs=1) == 1  # never zero: one job on a small node


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_free_memory_is_capped_by_the_cgroup_limit_of_a_job(tmp_path, version):
    gib = 2**30
    (tmp_path / "proc" / "self").mkdir(parents=True)
    (tmp_path / "proc" / "meminfo").write_text(
        f"MemTotal: {200 * gib // 1024} kB\nMemAvailable: {100 * gib // 1024} kB\n"
    )
    job = tmp_path / "cg" / ("memory/slurm/job_7" if version == "v1" else "slurm/job_7")
    job.mkdir(parents=True)
    if version == "v1":
        (tmp_path / "proc" / "self" / "cgroup").write_text("5:cpuset:/slurm/job_7\n4:memory:/slurm/job_7\n")
        (job / "memory.limit_in_bytes").write_text(f"{32 * gib}\n")
        (job / "memory.usage_in_bytes").write_text(f"{4 * gib}\n")
    else:
        (tmp_path / "proc" / "self" / "cgroup").write_text("0::/slurm/job_7\n")
        (job / "memory.max").write_text(f"{32 * gib}\n")
        (job / "memory.current").write_text(f"{4 * gib}\n")
    assert req.available_memory(tmp_path / "proc", tmp_path / "cg") == 28 * gib  # not the node's 100 GiB


def test_free_memory_is_the_node_s_without_a_cgroup_limit(tmp_path):
    (tmp_path / "proc" / "self").mkdir(parents=True)
    (tmp_path / "proc" / "meminfo").write_text("MemAvailable: 1048576 kB\n")
    (tmp_path / "proc" / "self" / "cgroup").write_text("0::/user.slice\n")
    (tmp_path / "cg" / "user.slice").mkdir(parents=True)
    (tmp_path / "cg" / "user.slice" / "memory.max").write_text("max\n")
    (tmp_path / "cg" / "user.slice" / "memory.current").write_text("123\n")
    assert req.available_memory(tmp_path / "proc", tmp_path / "cg") == 2**30


def test_build_minutes_are_core_minutes_over_the_busy_cores():
    assert req.build_minutes(jobs=8, cores=16, n_archs=1) == 28  # 72 sources x 3.1 core-min / 8 busy cores = 27.9
    assert req.build_minutes(jobs=4, cores=4, n_archs=4) == 224  # cores saturated: four archs take four times as long
    # idle cores take the extra archs (NVCC_THREADS compiles up to four archs of a source at once)
    assert req.build_minutes(jobs=4, cores=16, n_archs=4) == req.build_minutes(jobs=4, cores=16, n_archs=1) == 56


def test_each_compute_capability_maps_to_the_flash_attn_arch_of_its_major():
    assert req.flash_attn_archs(["8.0", "8.6", "8.9"]) == ["80"]
    assert req.flash_attn_archs(["12.0", "9.0", "10.3"]) == ["90", "100", "120"]


def test_the_module_runs_on_the_standard_library_alone():
    # bootstrap.sh runs it before anything is installed: -S -I leaves out site-packages and PYTHONPATH
    done = subprocess.run(
        [sys.executable, "-S", "-I", str(Path(req.__file__)), "pin", "torch"], capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout.strip() == f"torch=={req.pins(req.PYPROJECT.read_text())['torch']}", (
        done.stderr
    )
