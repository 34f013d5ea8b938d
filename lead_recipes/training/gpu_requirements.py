"""What a GPU node needs for the pinned training stack, written once: the CUDA of the pinned torch wheel, the NVIDIA
driver that CUDA needs, the nvcc that builds flash-attn and DeepSpeed's ops, and how flash-attn's build is sized.
Standard library only: `launchers/bootstrap.sh` runs this file as a script before anything is installed
(`plan`, `pin`, `check-built`); the doctor imports it. Pinned versions live in pyproject.toml.
See README.md#on-a-gpu-node.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
REUSE_ENV = "LEAD_RECIPES_REUSE_GPU_STACK"
ARCHS_FILE = ".flash-attn-archs"  # in the venv: the FLASH_ATTN_CUDA_ARCHS its flash-attn was compiled for
NO_DRIVER_FIX = "run on a GPU node, or LEAD_RECIPES_STACK=cpu for the CPU stack"

# torch==2.13.0 from the package index is built for CUDA 13.0 (it pulls cuda-toolkit 13 and nvidia-nccl-cu13).
TORCH_CUDA = "13.0"

# Oldest Linux driver branch that runs each CUDA major (NVIDIA's minor-version compatibility: any driver of the
# major's first branch runs every minor release of it). CUDA 13.0 GA shipped with 580.65.06.
MIN_DRIVER = {"12": "525.60.13", "13": "580.65.06"}

# flash-attn 2.8.3's setup.py compiles only these FLASH_ATTN_CUDA_ARCHS and silently drops any other value. A cubin
# for sm_X0 runs on every X.y GPU (CUDA's binary compatibility within a major), so a GPU's major picks its entry;
# flash-attn 2 has no kernels for 7.x (Volta, Turing), and 11.x is not in its list.
FLASH_ATTN_ARCH = {8: "80", 9: "90", 10: "100", 12: "120"}
# The CUDA sources of flash_attn_2_cuda in 2.8.3's setup.py; each is one ninja job compiling every listed arch.
FLASH_ATTN_SOURCES = 72
# setup.py's own sizing: a job peaks at "~8-9GB when threads = 4" (NVCC_THREADS, default 4, compiles up to four
# archs of one source at once); one arch measured 4.3 GB (a forward source) and 6.3 GB (a backward one), see below.
# We keep the upper figure for any arch count: an OOM-killed nvcc costs the build.
GIB_PER_BUILD_JOB = 9
NVCC_THREADS = 4
# CPU-minutes per (source, arch), measured: nvcc 13.0 compiled flash_fwd_hdim128_bf16_sm80.cu and
# flash_bwd_hdim128_bf16_sm80.cu for sm_90 in 3.0 and 3.3 minutes of user time on the project's CPU test machine (no
# GPU needed to compile). The whole build has not been run; a node's faster cores make the estimate run long.
CORE_MINUTES_PER_SOURCE_ARCH = 3.1
# The GPU stack's wheels: 4.1 GB for its 77 largest packages (the sizes of the files a dry-run resolve picked, of
# 274), measured; unpacked they take about twice that (an estimate), and the flash-attn build tree sits in $TMPDIR.
DOWNLOAD_GB = 4.1
DISK_GB = 15


class Refusal(Exception):
    """Why the GPU install cannot go on, and its remedy; str() is the one line bootstrap.sh prints."""

    def __init__(self, reason: str, fix: str):
        super().__init__(reason, fix)
        self.reason, self.fix = reason, fix

    def __str__(self) -> str:
        return f"{self.reason}: {self.fix}"


def min_driver(cuda: str) -> str:
    """The oldest driver that runs CUDA `cuda` ("13.0" -> "580.65.06"); KeyError names the majors known."""
    major = cuda.split(".")[0]
    if major not in MIN_DRIVER:
        raise KeyError(f"no driver requirement recorded for CUDA {cuda} (known majors: {sorted(MIN_DRIVER)})")
    return MIN_DRIVER[major]


def version_tuple(version: str) -> tuple[int, ...]:
    """'580.65.06' -> (580, 65, 6); non-numeric parts end the tuple."""
    out = []
    for part in version.strip().split("."):
        if not part.isdigit():
            break
        out.append(int(part))
    return tuple(out)


def pins(text: str) -> dict[str, str]:
    """{package: version} of every `"name[extras]==version"` string in pyproject.toml's text."""
    found = re.findall(r'"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([^"]+)"', text)
    return {name.lower().replace("_", "-"): version for name, version in found}


def pin(name: str, text: str) -> str:
    """`name==version` as pyproject.toml pins it; Refusal when it pins no such package."""
    found = pins(text)
    if name not in found:
        raise Refusal(f"pyproject.toml pins no {name}", "pin it (name==version) in an extra or [tool.lead-recipes]")
    return f"{name}=={found[name]}"


def build_requirements(text: str) -> list[str]:
    """[tool.lead-recipes] flash-attn-build: what flash-attn's setup.py imports, pinned (no build isolation)."""
    found = re.search(r"^flash-attn-build = \[(.*?)\]", text, re.M | re.S)
    if found is None or not pins(found[1]):
        raise Refusal(
            "pyproject.toml has no flash-attn-build list", "pin flash-attn's build tools in [tool.lead-recipes]"
        )
    return re.findall(r'"([^"]+)"', found[1])


# ---------------------------------------------------------------- what the node has
def _run(argv: list[str]) -> str | None:
    """stdout of argv, None when it is missing or fails."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def query_gpus(field: str) -> list[str]:
    """nvidia-smi's `field` for each GPU (driver_version, compute_cap); [] when there is no working nvidia-smi."""
    out = _run(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader"])
    return [line.strip() for line in (out or "").splitlines() if line.strip()]


def find_nvcc() -> Path | None:
    """The nvcc torch's extension builder will use: $CUDA_HOME/bin/nvcc when CUDA_HOME is set, else nvcc on PATH."""
    if os.environ.get("CUDA_HOME"):
        nvcc = Path(os.environ["CUDA_HOME"]) / "bin" / "nvcc"
        return nvcc if nvcc.is_file() else None
    found = shutil.which("nvcc")
    return Path(found) if found else None


def nvcc_release(version_output: str) -> str | None:
    """'Cuda compilation tools, release 13.0, V13.0.88' -> '13.0'."""
    found = re.search(r"release (\d+\.\d+)", version_output)
    return found[1] if found else None


def available_memory(proc: Path = Path("/proc"), cgroups: Path = Path("/sys/fs/cgroup")) -> int:
    """Bytes this process may still allocate: MemAvailable, capped by its cgroup's limit (a Slurm job's memory)."""
    meminfo = (proc / "meminfo").read_text()
    free = int(re.search(r"^MemAvailable:\s+(\d+) kB", meminfo, re.M)[1]) * 1024
    for line in (proc / "self" / "cgroup").read_text().splitlines():
        hierarchy, controllers, path = line.split(":", 2)
        if hierarchy == "0":  # cgroup v2
            limit, used = (cgroups / path.lstrip("/") / f for f in ("memory.max", "memory.current"))
        elif "memory" in controllers.split(","):  # cgroup v1
            base = cgroups / "memory" / path.lstrip("/")
            limit, used = base / "memory.limit_in_bytes", base / "memory.usage_in_bytes"
        else:
            continue
        if limit.is_file() and used.is_file() and limit.read_text().strip().isdigit():
            free = min(free, int(limit.read_text()) - int(used.read_text()))
    return max(free, 0)


# ---------------------------------------------------------------- sizing the flash-attn build
def flash_attn_archs(compute_caps: list[str]) -> list[str]:
    """flash-attn's FLASH_ATTN_CUDA_ARCHS entries for these GPUs ('9.0' -> '90'), sorted; Refusal names the others."""
    unsupported = sorted({c for c in compute_caps if int(c.split(".")[0]) not in FLASH_ATTN_ARCH})
    if unsupported:
        known = ", ".join(f"{major}.x" for major in FLASH_ATTN_ARCH)
        raise Refusal(
            f"flash-attn builds for compute capability {known}; this node has {', '.join(unsupported)}",
            "train on a node with Ampere or newer GPUs",
        )
    return sorted({FLASH_ATTN_ARCH[int(c.split(".")[0])] for c in compute_caps}, key=int)


def build_jobs(free_bytes: int, cores: int, n_archs: int) -> int:
    """ninja jobs for the flash-attn build: GIB_PER_BUILD_JOB of free memory each, and a core per nvcc thread."""
    by_memory = free_bytes // (GIB_PER_BUILD_JOB * 2**30)
    by_cores = cores // min(n_archs, NVCC_THREADS)
    return max(1, min(by_memory, by_cores))


def build_minutes(jobs: int, cores: int, n_archs: int) -> int:
    """Estimated wall minutes of the flash-attn build (CORE_MINUTES_PER_SOURCE_ARCH), rounded up."""
    busy_cores = min(cores, jobs * min(n_archs, NVCC_THREADS))
    return math.ceil(FLASH_ATTN_SOURCES * n_archs * CORE_MINUTES_PER_SOURCE_ARCH / busy_cores)


def driver_versions() -> list[str]:
    """nvidia-smi's driver_version of each GPU; Refusal naming why there is none (no nvidia-smi, its error)."""
    if shutil.which("nvidia-smi") is None:
        raise Refusal("nvidia-smi not found: no NVIDIA driver here", NO_DRIVER_FIX)
    argv = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise Refusal("nvidia-smi did not answer in 60 s", "the driver is hung: reboot the node") from None
    found = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or not found:
        said = (done.stdout.strip() or done.stderr.strip() or f"exit {done.returncode}").splitlines()[0]
        raise Refusal(f"nvidia-smi failed ({said})", f"load or reinstall the driver, or {NO_DRIVER_FIX}")
    return found


def check_driver(torch_pin: str) -> str:
    """The oldest driver of the node's GPUs (the install and the doctor's check); Refusal when there is none or it is
    older than TORCH_CUDA, the pinned torch's CUDA, needs."""
    oldest = min(driver_versions(), key=version_tuple)
    need = min_driver(TORCH_CUDA)
    if version_tuple(oldest) < version_tuple(need):
        raise Refusal(
            f"NVIDIA driver {oldest} is older than {need}, the oldest for CUDA {TORCH_CUDA} ({torch_pin}'s build)",
            f"upgrade the NVIDIA driver to {need} or newer (README.md#on-a-gpu-node)",
        )
    return oldest


def check_archs(venv: Path) -> None:
    """The flash-attn archs `venv` was built for (ARCHS_FILE) cover this node's GPUs; Refusal names the missing ones.
    No file (a reused environment's flash-attn) or no GPU here: nothing to check."""
    if not (venv / ARCHS_FILE).is_file():
        return
    built = set((venv / ARCHS_FILE).read_text().strip().split(";"))
    caps = query_gpus("compute_cap")
    missing = [arch for arch in flash_attn_archs(caps) if arch not in built]
    if missing:
        sm = "-".join(f"sm{a}" for a in missing)  # a venv name per GPU kind
        raise Refusal(
            f"{venv}'s flash-attn has kernels for sm_{',sm_'.join(sorted(built, key=int))}, not for this node's GPUs "
            f"(compute capability {', '.join(sorted(set(caps)))}: sm_{',sm_'.join(missing)})",
            f"build one for them on this node with LEAD_RECIPES_VENV={venv}-{sm}, or run on the GPUs it was built for",
        )


def check_nvcc() -> tuple[Path, Path]:
    """(nvcc, CUDA_HOME) of TORCH_CUDA's major that flash-attn will build with; Refusal when nvcc is missing, of
    another major, or outside a toolkit (torch's builder takes headers from CUDA_HOME/include)."""
    reuse = f"or set {REUSE_ENV}=1 to use a torch + flash-attn already built (README.md#on-a-gpu-node)"
    nvcc = find_nvcc()
    if nvcc is None:
        where = "$CUDA_HOME/bin" if os.environ.get("CUDA_HOME") else "PATH"
        raise Refusal(
            f"no nvcc on {where}: flash-attn compiles against torch's CUDA {TORCH_CUDA}",
            f"install the CUDA {TORCH_CUDA} toolkit and put its bin/ on PATH or set CUDA_HOME, {reuse}",
        )
    release = nvcc_release(_run([str(nvcc), "--version"]) or "")
    if release is None or release.split(".")[0] != TORCH_CUDA.split(".")[0]:
        raise Refusal(
            f"{nvcc} is CUDA {release or '(unreadable `nvcc --version`)'} but torch is built for CUDA {TORCH_CUDA}",
            f"point CUDA_HOME (or PATH) at a CUDA {TORCH_CUDA.split('.')[0]}.x toolkit, {reuse}",
        )
    # a wrapper script on PATH (/usr/local/bin/nvcc exec'ing the toolkit's) would make torch guess a wrong CUDA_HOME
    home = Path(os.environ["CUDA_HOME"]) if os.environ.get("CUDA_HOME") else nvcc.resolve().parent.parent
    if not (home / "include" / "cuda_runtime.h").is_file():
        raise Refusal(
            f"{nvcc} is not inside a CUDA toolkit ({home}/include/cuda_runtime.h is missing)",
            f"set CUDA_HOME to the root of the CUDA {TORCH_CUDA} toolkit, {reuse}",
        )
    return nvcc, home


def plan(text: str, reuse: bool) -> tuple[list[str], list[str]]:
    """(KEY=value lines for the flash-attn build, lines to print) for this node; Refusal before anything installs."""
    torch_pin = pin("torch", text)
    driver = check_driver(torch_pin)
    notes = [f"NVIDIA driver {driver} runs CUDA {TORCH_CUDA} (needs {min_driver(TORCH_CUDA)})"]
    if reuse:
        if find_nvcc() is None:
            notes.append("no nvcc: DeepSpeed's FusedAdam, compiled at the first training start, will fail without it")
        return [], notes
    nvcc, cuda_home = check_nvcc()
    archs = flash_attn_archs(query_gpus("compute_cap"))
    cores = len(os.sched_getaffinity(0))
    free = available_memory()
    user_jobs = os.environ.get("MAX_JOBS", "")
    jobs = int(user_jobs) if user_jobs.isdigit() and int(user_jobs) > 0 else build_jobs(free, cores, len(archs))
    why = "from MAX_JOBS" if user_jobs.isdigit() and int(user_jobs) > 0 else f"{GIB_PER_BUILD_JOB} GiB free each"
    notes.append(
        f"building {pin('flash-attn', text)} with {nvcc} for sm_{',sm_'.join(archs)}: MAX_JOBS={jobs} ({why}; "
        f"{free / 2**30:.0f} GiB free, {cores} cores): about {build_minutes(jobs, cores, len(archs))} minutes"
    )
    return [f"CUDA_HOME={cuda_home}", f"FLASH_ATTN_CUDA_ARCHS={';'.join(archs)}", f"MAX_JOBS={jobs}"], notes


# ---------------------------------------------------------------- what is installed
_LOADS = "import torch, flash_attn_2_cuda as m; print(m.__file__)"


def check_built(text: str, torch_only: bool = False) -> str:
    """torch and flash-attn in this interpreter are the pinned versions, CUDA TORCH_CUDA's major, and
    flash_attn_2_cuda loads (in a subprocess: a bad extension can crash the interpreter); Refusal names the first gap.
    torch_only: right after torch is installed, before flash-attn compiles against it.
    """
    torch_pin, fa_pin = pin("torch", text), pin("flash-attn", text)
    if os.environ.get(REUSE_ENV) == "1":
        fix = f"fix the environment's torch/flash-attn, or unset {REUSE_ENV} to build them (README.md#on-a-gpu-node)"
    else:
        fix = (
            "the install did not produce it: read the pip output above (a find-links or index in the pip "
            "configuration can serve a CPU torch), then rerun bash launchers/bootstrap.sh setup"
        )
    try:
        import torch
    except ImportError as exc:
        raise Refusal(f"{sys.executable} cannot import torch ({exc})", fix) from None
    if torch.__version__.split("+")[0] != torch_pin.split("==")[1]:
        raise Refusal(f"torch is {torch.__version__}, pyproject.toml pins {torch_pin}", fix)
    cuda = torch.version.cuda
    if cuda is None or cuda.split(".")[0] != TORCH_CUDA.split(".")[0]:
        raise Refusal(f"torch {torch.__version__} is built for CUDA {cuda}, not {TORCH_CUDA}", fix)
    if torch_only:
        return f"torch {torch.__version__} (CUDA {cuda})"
    try:
        import flash_attn
    except ImportError as exc:
        raise Refusal(f"{sys.executable} cannot import flash_attn ({exc})", fix) from None
    if flash_attn.__version__ != fa_pin.split("==")[1]:
        raise Refusal(f"flash-attn is {flash_attn.__version__}, pyproject.toml pins {fa_pin}", fix)
    done = subprocess.run([sys.executable, "-c", _LOADS], capture_output=True, text=True, timeout=300)
    said = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    if done.returncode != 0:
        raise Refusal(f"flash_attn_2_cuda does not load ({said})", fix)
    if done.stdout.strip().endswith(".py"):
        raise Refusal(f"flash_attn_2_cuda is the CPU stack's stub ({done.stdout.strip()})", fix)
    return f"torch {torch.__version__} (CUDA {cuda}), flash-attn {flash_attn.__version__}, flash_attn_2_cuda loads"


def requirements_table() -> str:
    """The README's table of what a GPU node needs (docs/generate.py writes it there)."""
    text = PYPROJECT.read_text()
    torch_pin, fa_pin = pin("torch", text), pin("flash-attn", text)
    major = TORCH_CUDA.split(".")[0]
    caps = ", ".join(f"{m}.x" for m in FLASH_ATTN_ARCH)
    gib = 2**30  # two typical nodes, one GPU architecture; the jobs as the install would choose them
    small, large = (build_minutes(build_jobs(free * gib, cores, 1), cores, 1) for free, cores in ((110, 16), (500, 64)))
    rows = [
        (
            "NVIDIA driver",
            f"{min_driver(TORCH_CUDA)} or newer",
            f"runs CUDA {TORCH_CUDA}, which `{torch_pin}` is built for",
        ),
        (
            "nvcc",
            f"CUDA {major}.x: `$CUDA_HOME/bin/nvcc`, else on `PATH`",
            f"compiles `{fa_pin}` and, at the first training start, DeepSpeed's FusedAdam",
        ),
        (
            "flash-attn build tools",
            ", ".join(f"`{r}`" for r in build_requirements(text)),
            "what its `setup.py` imports; installed first, as the build has no isolation",
        ),
        ("GPUs", f"compute capability {caps}", "the architectures flash-attn has kernels for"),
        (
            "memory",
            f"{GIB_PER_BUILD_JOB} GiB per compile job",
            "flash-attn's own figure; `MAX_JOBS` follows free memory",
        ),
        (
            "disk",
            f"{DISK_GB} GB",
            f"{DOWNLOAD_GB} GB of wheels (measured), about twice that unpacked, and the build tree in `$TMPDIR`",
        ),
        (
            "build time",
            f"about {small} min on 16 cores with 110 GiB free, {large} min on 64 with 500 GiB (one GPU architecture)",
            "an estimate from two sources compiled and timed, the whole build not run; printed for the node first",
        ),
    ]
    lines = ["| requirement | value | why |", "|---|---|---|"]
    return "\n".join(lines + [f"| {name} | {value} | {why} |" for name, value, why in rows])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu_requirements.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("pin", help="print NAME==VERSION as pyproject.toml pins it").add_argument("name")
    sub.add_parser("build-deps", help="print flash-attn's pinned build requirements, one a line")
    sub.add_parser("check-archs", help="the venv's flash-attn archs cover this node's GPUs").add_argument("venv")
    sub.add_parser("plan", help="check the node; print the flash-attn build's KEY=value lines").add_argument(
        "--reuse", action="store_true", help="torch + flash-attn come from the environment: no build to plan"
    )
    sub.add_parser("check-built", help="check this interpreter's torch, flash-attn and flash_attn_2_cuda").add_argument(
        "--torch-only", action="store_true", help="only torch: before flash-attn is built against it"
    )
    args = parser.parse_args(argv)
    text = PYPROJECT.read_text()
    try:
        if args.command == "pin":
            print(pin(args.name, text))
        elif args.command == "build-deps":
            print("\n".join(build_requirements(text)))
        elif args.command == "check-archs":
            check_archs(Path(args.venv))
        elif args.command == "plan":
            exports, notes = plan(text, args.reuse)
            for note in notes:
                print(f"[bootstrap] {note}", file=sys.stderr)
            print("\n".join(exports))
        else:
            print(f"[bootstrap] {check_built(text, args.torch_only)}", file=sys.stderr)
    except Refusal as exc:
        print(f"[bootstrap] refused: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
