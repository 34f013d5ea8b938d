"""A GPU node made of fakes, for the tests of launchers/bootstrap.sh's GPU stack (tests/project/test_gpu_*.py): a
fake `nvidia-smi` and `nvcc` on PATH and a fake `PYTHON` whose `-m venv DIR` writes a DIR/bin/python that records every
`pip` call (argv and the build's environment) and runs anything else with the real interpreter. What only a GPU node
can show (that the flash-attn build compiles, and the real nvidia-smi/nvcc output formats) is not proven by them:
README.md#on-a-gpu-node.

The installed torch / flash-attn that the post-install and reuse checks import are stand-ins on PYTHONPATH (a
CUDA torch and a compiled flash_attn_2_cuda cannot exist on a CPU machine); the checks themselves are the real ones.
Each node runs a copy of the files bootstrap.sh reads, so a test can change a pin, and LEAD_RECIPES_VENV in tmp.
"""

from __future__ import annotations

import json
import py_compile
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "lead_recipes" / "training"))  # the file bash runs, as bash runs it: standalone
import gpu_requirements as req  # noqa: E402

TREE_FILES = ["launchers/bootstrap.sh", "pyproject.toml", "lead_recipes/training/gpu_requirements.py"]
PINS = req.pins((ROOT / "pyproject.toml").read_text())
NEED = req.min_driver(req.TORCH_CUDA)
OLD_DRIVER = f"{req.version_tuple(NEED)[0] - 5}.57.08"
NEWER_DRIVER = f"{req.version_tuple(NEED)[0]}.95.05"
OTHER_CUDA = f"{int(req.TORCH_CUDA.split('.')[0]) - 1}.8"
RECORDED_ENV = ["FLASH_ATTN_CUDA_ARCHS", "MAX_JOBS", "CUDA_HOME", "FLASH_ATTENTION_FORCE_BUILD"]


@dataclass
class Run:
    rc: int
    out: str  # stdout and stderr, interleaved in order
    pips: list[dict]  # {"argv": [...], "env": {...}} of each pip call, in order
    venv: Path

    def install(self, requirement_prefix: str) -> tuple[int, dict]:
        """(index, call) of the one `pip install` whose arguments name a requirement starting with the prefix."""
        found = [
            (i, call)
            for i, call in enumerate(self.pips)
            if call["argv"][0] == "install" and any(a.startswith(requirement_prefix) for a in call["argv"][1:])
        ]
        assert len(found) == 1, (requirement_prefix, self.pips)
        return found[0]


class Node:
    """A GPU node made of fakes in tmp_path: GPUs (driver, compute capabilities), an nvcc, and the torch/flash-attn
    that an install would leave (or an environment would offer for reuse)."""

    def __init__(self, tmp_path: Path):
        self.tmp = tmp_path
        self.tree = tmp_path / "tree"
        for name in TREE_FILES + [str(p.relative_to(ROOT)) for p in (ROOT / "launchers").glob("requirements-*.txt")]:
            (self.tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / name, self.tree / name)
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        self.venv = tmp_path / "venv"
        self.log = tmp_path / "pip.jsonl"
        self.env = {
            "PATH": f"{self.bin}:/usr/bin:/bin",
            "HOME": str(tmp_path),
            "LEAD_RECIPES_VENV": str(self.venv),
            "LEAD_RECIPES_STACK": "gpu",
            "PYTHON": str(self._fake_python()),
            "PYTHONPATH": str(tmp_path / "site"),
        }
        self.gpus(driver=NEWER_DRIVER, caps=["9.0"])
        self.nvcc(req.TORCH_CUDA)
        self.installed()

    def gpus(self, driver: str, caps: list[str]) -> None:
        lines = {"-L": [f"GPU {i}: NVIDIA Fake (UUID: GPU-{i})" for i in range(len(caps))]}
        lines["driver_version"] = [driver] * len(caps)
        lines["compute_cap"] = caps
        cases = "\n".join(
            f'  *{key}*) printf "%s\\n" {" ".join(repr(v) for v in vals)} ;;' for key, vals in lines.items()
        )
        self._script(self.bin / "nvidia-smi", f'#!/bin/bash\ncase "$*" in\n{cases}\n  *) exit 2 ;;\nesac\n')

    def no_driver(self) -> None:
        (self.bin / "nvidia-smi").unlink()

    def toolkit(self, release: str) -> Path:
        """A CUDA toolkit of `release` at tmp/cuda-RELEASE: bin/nvcc and include/cuda_runtime.h."""
        home = self.tmp / f"cuda-{release}"
        (home / "include").mkdir(parents=True, exist_ok=True)
        (home / "include" / "cuda_runtime.h").write_text("")
        (home / "bin").mkdir(exist_ok=True)
        text = f"Cuda compilation tools, release {release}, V{release}.88"
        self._script(
            home / "bin" / "nvcc", f'#!/bin/bash\necho "nvcc: NVIDIA (R) Cuda compiler driver"\necho "{text}"\n'
        )
        return home

    def nvcc(self, release: str | None) -> None:
        """The nvcc of a CUDA `release` toolkit on PATH; None: no nvcc at all."""
        self.env["PATH"] = ":".join(p for p in self.env["PATH"].split(":") if "/cuda-" not in p)
        if release is not None:
            self.env["PATH"] = f"{self.toolkit(release) / 'bin'}:{self.env['PATH']}"

    def wrapped_nvcc(self) -> None:
        """Only a wrapper script on PATH that runs the toolkit's nvcc (as /usr/local/bin/nvcc can be)."""
        self.nvcc(None)
        real = self.toolkit(req.TORCH_CUDA) / "bin" / "nvcc"
        self._script(self.bin / "nvcc", f'#!/bin/sh\nexec {real} "$@"\n')

    def installed(
        self, torch=f"{PINS['torch']}+cu130", cuda=req.TORCH_CUDA, flash_attn=PINS["flash-attn"], extension="compiled"
    ):
        """The torch / flash-attn stand-ins. extension: compiled (a sourceless module, as a built .so would be),
        stub (the CPU stack's flash_attn_2_cuda.py), broken (fails to load like an ABI mismatch)."""
        site = self.tmp / "site"
        shutil.rmtree(site, ignore_errors=True)
        (site / "torch").mkdir(parents=True)
        (site / "torch" / "__init__.py").write_text(f"__version__ = {torch!r}\nfrom torch import version\n")
        (site / "torch" / "version.py").write_text(f"cuda = {cuda!r}\n")
        (site / "flash_attn").mkdir()
        (site / "flash_attn" / "__init__.py").write_text(f"__version__ = {flash_attn!r}\n")
        module = site / "flash_attn_2_cuda.py"
        if extension == "broken":
            module.write_text("raise ImportError('flash_attn_2_cuda.so: undefined symbol: _ZN3c104cuda9SetDevice')\n")
        else:
            module.write_text("# CPU stub: lets the python-only flash-attn build import.\n")
        if extension == "compiled":
            py_compile.compile(str(module), cfile=str(site / "flash_attn_2_cuda.pyc"))
            module.unlink()

    def pin(self, package: str, version: str) -> None:
        """Change one pin in the tree's pyproject.toml."""
        path = self.tree / "pyproject.toml"
        text, n = re.subn(
            rf'"{re.escape(package)}((?:\[[^\]]*\])?)==[^"]+"', rf'"{package}\1=={version}"', path.read_text()
        )
        assert n == 1, package
        path.write_text(text)

    def bootstrap(self, *args: str, **env: str) -> Run:
        done = subprocess.run(
            ["bash", str(self.tree / "launchers" / "bootstrap.sh"), *(args or ["setup"])],
            env={**self.env, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=300,
        )
        pips = [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []
        return Run(done.returncode, done.stdout, pips, self.venv)

    def _fake_python(self) -> Path:
        recorder = f"""#!{sys.executable}
import json, os, sys, sysconfig
argv = sys.argv[1:]
if argv[:2] == ["-m", "pip"]:
    with open({str(self.log)!r}, "a") as f:
        f.write(json.dumps({{"argv": argv[2:], "env": {{k: os.environ.get(k) for k in {RECORDED_ENV!r}}}}}) + "\\n")
    print("[pip]", *argv[2:], flush=True)
    sys.exit(0)
if argv[:1] == ["-c"] and "sysconfig" in argv[1]:  # the CPU stack's site-packages: this venv's, never the real one
    site = os.path.join(os.path.dirname(os.path.dirname(__file__)), "site-packages")
    os.makedirs(site, exist_ok=True)
    print(site)
    sys.exit(0)
os.execv({sys.executable!r}, [{sys.executable!r}, *argv])
"""
        python = self.tmp / "python"
        self._script(
            python,
            f"""#!/bin/bash
if [[ "$1 $2" == "-m venv" ]]; then
  shift 2; flags=()
  while [[ "$1" == --* ]]; do flags+=("$1"); shift; done
  mkdir -p "$1/bin"; echo "${{flags[*]}}" > "$1/venv-flags"
  cat > "$1/bin/python" <<'EOF'
{recorder}EOF
  chmod +x "$1/bin/python"; exit 0
fi
exec {sys.executable} "$@"
""",
        )
        return python

    @staticmethod
    def _script(path: Path, text: str) -> None:
        path.write_text(text)
        path.chmod(0o755)
