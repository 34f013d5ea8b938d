"""The GPU stack that launchers/bootstrap.sh installs resolves against the package index with an empty cache, and
agrees with OpenRLHF's own requirements: `pip install --dry-run --report` of the base dependencies and the `train`,
`eval` and `test` extras, with no pip configuration (a find-links or constraint of this machine would change the
answer; on it, a CPU torch wheel would win). flash-attn is set aside: its only release is an sdist whose setup.py
needs torch and nvcc, so a metadata-only wheel of the pinned version with the sdist's install_requires (torch,
einops) stands in for it. Needs the package index: skipped, with the reason, where it cannot be reached.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "lead_recipes" / "training"))
import gpu_requirements as req  # noqa: E402

PINNED_BY_US_AND_OPENRLHF = ("torch", "vllm", "deepspeed", "transformers", "ray", "flash-attn")
OFFLINE = ("NewConnectionError", "Network is unreachable", "Temporary failure in name resolution", "ProxyError")


def _stand_in_wheel(directory: Path, name: str, version: str) -> None:
    """A wheel with nothing but metadata: enough for the resolver, never installed."""
    dist = f"{name.replace('-', '_')}-{version}"
    with zipfile.ZipFile(directory / f"{dist}-py3-none-any.whl", "w") as whl:
        whl.writestr(
            f"{dist}.dist-info/METADATA",
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nRequires-Dist: torch\nRequires-Dist: einops\n",
        )
        whl.writestr(f"{dist}.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        whl.writestr(f"{dist}.dist-info/RECORD", "")


@pytest.fixture(scope="module")
def resolved(tmp_path_factory) -> dict:
    """{"install": {name: report item}, "environment": markers} of the dry run; its time is printed."""
    tmp = tmp_path_factory.mktemp("resolve")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    requirements = project["dependencies"] + extras["train"] + extras["eval"] + extras["test"]
    flash_attn = req.pin("flash-attn", (ROOT / "pyproject.toml").read_text()).split("==")[1]
    _stand_in_wheel(tmp, "flash-attn", flash_attn)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull  # no configuration file at all: the index as a GPU node sees it
    argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-cache-dir", "--quiet"]
    argv += ["--retries", "1", "--timeout", "30", "--report", str(tmp / "report.json"), "--find-links", str(tmp)]
    start = time.monotonic()
    done = subprocess.run([*argv, *requirements], capture_output=True, text=True, env=env, timeout=900)
    print(f"pip --dry-run of the GPU stack: {time.monotonic() - start:.1f} s")
    if done.returncode != 0 and any(word in done.stderr for word in OFFLINE):
        pytest.skip(f"the package index cannot be reached: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp / "report.json").read_text())
    install = {item["metadata"]["name"].lower().replace("_", "-"): item for item in report["install"]}
    return {"install": install, "environment": report["environment"]}


def _pins() -> dict[str, str]:
    return req.pins((ROOT / "pyproject.toml").read_text())


def _requires(item: dict, environment: dict, extras: tuple[str, ...] = ("",)) -> list[Requirement]:
    """The item's Requires-Dist that apply on the resolved platform with these extras."""
    out = []
    for line in item["metadata"].get("requires_dist", []):
        r = Requirement(line)
        if r.marker is None or any(r.marker.evaluate({**environment, "extra": extra}) for extra in extras):
            out.append(r)
    return out


@pytest.mark.slow
def test_the_stack_resolves_to_pyproject_pins(resolved):
    pins = _pins()
    got = {name: resolved["install"][name]["metadata"]["version"] for name in PINNED_BY_US_AND_OPENRLHF + ("openrlhf",)}
    assert got == {name: pins[name] for name in got}, got


@pytest.mark.slow
def test_pyproject_pins_satisfy_openrlhf_declared_requirements(resolved):
    pins = _pins()
    openrlhf = resolved["install"]["openrlhf"]
    declared = {r.name.lower(): r for r in _requires(openrlhf, resolved["environment"], ("", "vllm"))}
    assert set(PINNED_BY_US_AND_OPENRLHF) <= set(declared), sorted(declared)  # each one is checked below
    wrong = {n: str(declared[n].specifier) for n in PINNED_BY_US_AND_OPENRLHF if pins[n] not in declared[n].specifier}
    assert not wrong, (
        f"openrlhf {pins['openrlhf']} requires {wrong}; pyproject.toml pins { {n: pins[n] for n in wrong} }"
    )


@pytest.mark.slow
def test_torch_resolves_to_a_build_for_torch_cuda(resolved):
    major = req.TORCH_CUDA.split(".")[0]
    needs = _requires(resolved["install"]["torch"], resolved["environment"])
    cuda_builds = {r.name for r in needs if r.name.startswith("nvidia-") and "-cu" in r.name}
    assert cuda_builds and all(name.endswith(f"-cu{major}") for name in cuda_builds), cuda_builds
    assert f"nvidia-nccl-cu{major}" in resolved["install"], "the resolved stack has no NCCL of torch's CUDA"
    toolkit = next(r for r in needs if r.name == "cuda-toolkit")
    assert resolved["install"]["cuda-toolkit"]["metadata"]["version"].startswith(f"{req.TORCH_CUDA}."), toolkit
