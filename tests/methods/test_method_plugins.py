"""A method registered from outside the package (lead_recipes/method_plugins.py): a tiny distribution, installed by
pip into a directory of its own, declares an entry point in the group `lead_recipes.methods`; `lead-recipes replay`
then runs it by name with its own flags, its config pickles into a fresh interpreter (what a Ray worker is), and a
broken entry point is refused naming its distribution and the fix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PYPROJECT = """[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "{name}"
version = "0.1.0"

[tool.setuptools]
packages = ["{module}"]

[project.entry-points."lead_recipes.methods"]
{entry} = "{module}:ENTRY"
"""

REGISTRY_MODULE = '''"""The registry side: torch-free, as lead_recipes.methods.config imports it."""
from dataclasses import dataclass

from lead_recipes.methods.config import MethodEntry
from lead_recipes.methods.fields import option


@dataclass(frozen=True)
class ScaledConfig:
    """Reward scale·1[correct], group normalised."""
    scale: float = option(1.0, "reward of a correct rollout", gt=0)


ENTRY = MethodEntry("scaled-correct", "scaled_method.method:ScaledMethod", ScaledConfig, "grpo-correctness-1.5b")
'''

METHOD_MODULE = '''"""r = scale·1[correct] (plus OpenRLHF's length penalty), group normalised."""
from lead_recipes.methods.base import Method
from lead_recipes.methods.common import BASE_STATS, finish, group_normalize


class ScaledMethod(Method):
    STATS_KEYS = BASE_STATS + ("scale",)

    @classmethod
    def from_config(cls, cfg):
        return cls(cfg.scaled_correct)

    def _step(self, b):
        r = self.config.scale * b.correct.double() + b.length_penalty.double()
        return finish(b, r, group_normalize(r), {"scale": self.config.scale})
'''


def install(tmp_path: Path, name: str, module: str, files: dict[str, str], entry: str = "scaled-correct") -> Path:
    """pip-install a one-package distribution into its own target directory (no index, no build isolation)."""
    src = tmp_path / f"src-{name}"
    (src / module).mkdir(parents=True)
    (src / "pyproject.toml").write_text(PYPROJECT.format(name=name, module=module, entry=entry))
    for rel, text in files.items():
        (src / module / rel).write_text(text)
    target = tmp_path / f"site-{name}"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index"]
    subprocess.run([*pip, "--target", str(target), str(src)], check=True, capture_output=True, timeout=300)
    return target


def run(target: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": f"{target}:{ROOT}", "PATH": "/usr/bin:/bin", "HOME": str(cwd)}
    return subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("plugin")
    return install(tmp, "scaled-method", "scaled_method", {"__init__.py": REGISTRY_MODULE, "method.py": METHOD_MODULE})


def test_an_installed_method_replays_by_name_with_its_own_flags(plugin, tmp_path):
    steps = [{"step": 1, "groups": [{"correct": [True, False, True, False], "lengths": [5, 9, 7, 3]}]}]
    (tmp_path / "steps.jsonl").write_text("".join(json.dumps(s) + "\n" for s in steps))
    argv = ["-m", "lead_recipes.cli", "replay", "steps.jsonl", "--output", "out.jsonl", "--recipe.method"]
    argv += ["scaled-correct", "--recipe.scaled_correct.scale", "3", "--rollout.max_new_tokens", "16"]
    got = run(plugin, *argv, cwd=tmp_path)
    assert got.returncode == 0, got.stderr[-3000:]
    (line,) = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert line["rewards"] == [[3.0, 0.0, 3.0, 0.0]] and line["stats"]["scale"] == 3.0
    assert line["advantages"][0][0] > 0 > line["advantages"][0][1]


def test_without_the_package_the_name_is_refused_listing_the_methods(tmp_path):
    got = run(
        tmp_path, "-m", "lead_recipes.cli", "replay", "x.jsonl", "--recipe.method", "scaled-correct", cwd=tmp_path
    )
    assert got.returncode == 2 and "scaled-correct" in got.stderr and "lead" in got.stderr


PICKLE_OUT = """
import pickle, sys
from lead_recipes.methods import build_method
from lead_recipes.methods.config import RecipeConfig
cfg = RecipeConfig.of({"method": "scaled-correct", "scaled_correct": {"scale": 2.5}})
sys.stdout.buffer.write(pickle.dumps((cfg, build_method(cfg))))
"""
PICKLE_IN = """
import pickle, sys, torch
from lead_recipes.methods.base import RolloutBatch
cfg, method = pickle.loads(sys.stdin.buffer.read())
out = method.step(RolloutBatch(torch.tensor([[True, False]]), torch.tensor([[4.0, 6.0]]), 16))
print(cfg.method, cfg.scaled_correct.scale, out.rewards.tolist())
"""


def test_its_config_and_method_unpickle_in_a_fresh_interpreter(plugin, tmp_path):
    """What Ray does with the RecipeConfig and the built method: pickle here, unpickle in another process."""
    env = {"PYTHONPATH": f"{plugin}:{ROOT}", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", PICKLE_OUT], env=env, capture_output=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    back = subprocess.run(
        [sys.executable, "-c", PICKLE_IN], env=env, input=out.stdout, capture_output=True, timeout=300
    )
    assert back.returncode == 0, back.stderr[-3000:]
    assert back.stdout.decode().split()[:2] == ["scaled-correct", "2.5"] and "2.5, 0.0" in back.stdout.decode()


def test_an_entry_point_naming_something_else_is_refused_naming_the_distribution_and_the_fix(tmp_path):
    target = install(tmp_path, "broken-method", "broken_method", {"__init__.py": "ENTRY = 'not an entry'\n"})
    got = run(target, "-c", "import lead_recipes.methods.config", cwd=tmp_path)
    assert got.returncode != 0
    assert "broken-method 0.1.0" in got.stderr and "not a lead_recipes.methods.config.MethodEntry" in got.stderr


def test_an_entry_point_taking_a_builtin_flag_section_is_refused_naming_it(tmp_path):
    module = REGISTRY_MODULE.replace('MethodEntry("scaled-correct"', 'MethodEntry("grpo_lead"')
    target = install(tmp_path, "clash-method", "clash_method", {"__init__.py": module})
    got = run(target, "-c", "import lead_recipes.methods.config", cwd=tmp_path)
    assert got.returncode != 0 and "clash-method 0.1.0" in got.stderr and "--recipe.grpo_lead.*" in got.stderr


@pytest.mark.parametrize("name", ["method", "name", "resume"])
def test_an_entry_point_named_after_a_reserved_flag_is_refused_naming_the_reserved_names(tmp_path, name):
    module = REGISTRY_MODULE.replace('MethodEntry("scaled-correct"', f'MethodEntry("{name}"')
    target = install(tmp_path, "reserved-method", "reserved_method", {"__init__.py": module})
    got = run(target, "-c", "import lead_recipes.methods.config", cwd=tmp_path)
    assert got.returncode != 0 and "reserved-method 0.1.0" in got.stderr
    assert f"{name!r} is reserved" in got.stderr and "method, name" in got.stderr
