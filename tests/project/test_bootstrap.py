"""The test command's lint step (launchers/bootstrap.sh `lint`, run by `bootstrap.sh test` before pytest) names
each file it refuses, and the pre-commit hooks run the same pinned ruff. The lint runs on a copy of the tree."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _lint(tree: Path) -> subprocess.CompletedProcess:
    (tree / "launchers").mkdir()
    shutil.copy(ROOT / "launchers" / "bootstrap.sh", tree / "launchers" / "bootstrap.sh")
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")  # the ruff configuration
    script = f'source {tree / "launchers" / "bootstrap.sh"} help >/dev/null && cd "$ROOT" && lint'
    env = {"PATH": "/usr/bin:/bin", "LEAD_RECIPES_VENV": str(ROOT / ".venv")}
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=120)


def test_a_badly_formatted_file_fails_the_lint_step_naming_the_file(tmp_path):
    (tmp_path / "clean.py").write_text('X = {"a": 1}\n')
    (tmp_path / "crooked_layout.py").write_text('X = {  "a":1}\n')
    out = _lint(tmp_path)
    assert out.returncode != 0, out.stdout + out.stderr
    assert "crooked_layout.py" in out.stdout + out.stderr and "clean.py" not in out.stdout + out.stderr
    assert "1 file would be reformatted" in out.stdout + out.stderr


def test_a_lint_finding_fails_the_lint_step_naming_the_file_and_line(tmp_path):
    (tmp_path / "unused_import.py").write_text("import os\n")
    out = _lint(tmp_path)
    assert out.returncode != 0 and "unused_import.py:1:" in out.stdout + out.stderr, out.stdout + out.stderr


def test_a_clean_tree_passes_the_lint_step(tmp_path):
    (tmp_path / "clean.py").write_text('X = {"a": 1}\n')
    out = _lint(tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_pre_commit_hooks_run_the_ruff_the_test_command_pins():
    # two spellings of one pin: the hooks' own environment and the `test` extra must format the tree alike
    pins = re.findall(r'"(ruff==[^"]+)"', (ROOT / "pyproject.toml").read_text())
    hooks = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())["repos"]
    ruff_hooks = [h for repo in hooks for h in repo["hooks"] if h["entry"].split()[0] == "ruff"]
    assert len(pins) == 1 and {h["id"] for h in ruff_hooks} == {"ruff-check", "ruff-format"}
    assert all(h["additional_dependencies"] == pins for h in ruff_hooks), (pins, ruff_hooks)
