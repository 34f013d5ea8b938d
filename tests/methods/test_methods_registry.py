"""The method registry (lead_recipes/methods/config.py: REGISTRY) is the one list of methods: each entry's Method class
carries its name, its recipe runs it, and adding a method to a copy of the package (its own module, its config
dataclass, one registry line, nothing else) makes it a `--recipe.method` choice with its flags, buildable, with its
statistics logged, saved settings and a base recipe."""

from __future__ import annotations

import importlib.util
import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lead_recipes.methods import sections_read
from lead_recipes.methods.base import RolloutBatch
from lead_recipes.methods.config import METHODS, REGISTRY, SECTIONS, RecipeConfig, method_name
from lead_recipes.methods.lead import LeadMethod
from lead_recipes.training.resume import method_settings, recipe_client_state, restore_recipe_state
from lead_recipes.training.step_stats import step_stats

ROOT = Path(__file__).resolve().parents[2]

DUMMY_MODULE = '''"""A dummy method: r = scale·1[correct], group normalised."""
from lead_recipes.methods.base import Method
from lead_recipes.methods.common import BASE_STATS, finish, group_normalize


class DummyMethod(Method):
    STATS_KEYS = BASE_STATS + ("scale",)

    @classmethod
    def from_config(cls, cfg):
        return cls(cfg.dummy_method)

    def _step(self, b):
        r = self.config.scale * b.correct.double()
        return finish(b, r, group_normalize(r), {"scale": self.config.scale})
'''
DUMMY_CONFIG = '''@dataclass(frozen=True)
class DummyConfig:
    """A dummy method."""
    scale: float = option(1.0, "reward of a correct rollout", gt=0)


'''
DUMMY_ENTRY = '    MethodEntry("dummy-method", "lead_recipes.methods.dummy:DummyMethod", DummyConfig, "lead-1.5b"),\n'

CHECK = r"""
import argparse, json, torch
import lead_recipes
from lead_recipes.flags import add_recipe_flags, recipe_argv, recipe_config
from lead_recipes.methods import build_method
from lead_recipes.methods.base import RolloutBatch
from lead_recipes.recipes.recipe import recipe_parser
from lead_recipes.training.args import resolve
from lead_recipes.training.cli import _our_parser
from lead_recipes.training.resume import method_settings
from lead_recipes.training.step_stats import step_stats

parser = argparse.ArgumentParser()
add_recipe_flags(parser)
choices = next(a.choices for a in parser._actions if a.dest == "recipe.method")
cfg = recipe_config(parser.parse_args(["--recipe.method", "dummy-method", "--recipe.dummy_method.scale", "3"]))
method = build_method(cfg)
batch = RolloutBatch(correct=torch.tensor([[True, False], [True, True]]), lengths=torch.tensor([[5., 9.], [4., 4.]]),
                     max_new_tokens=16)
out = method.step(batch)
logged = step_stats(method.name, batch, out, out.rewards, torch.zeros(4), {"clamped": 0})
print(json.dumps({
    "package": lead_recipes.__file__,
    "choices": list(choices),
    "name": method.name,
    "stats": out.stats,
    "logged": logged.get("recipe/dummy-method/scale"),
    "argv": recipe_argv(cfg),
    "settings": method_settings(method, 16),
    "recipe_file_ok": vars(recipe_parser().parse_args(
        ["--recipe.method", "dummy-method", "--recipe.dummy_method.scale", "2"]))["recipe.dummy_method.scale"],
    "base": resolve(["--recipe.method", "dummy-method"], _our_parser()).base,
}))
"""


def test_every_registered_class_carries_its_registry_name_and_every_method_a_section():
    assert [method_name(e.load()) for e in REGISTRY] == list(METHODS)
    assert all(
        SECTIONS[e.section] is e.config and isinstance(getattr(RecipeConfig(), e.section), e.config) for e in REGISTRY
    )


def test_each_registry_entry_names_exactly_the_sections_its_built_method_reads():
    """`MethodEntry.sections` (torch-free: what a recipe may set for the method) against the config objects the
    built method holds; `guard` and `resume` apply to every method."""
    for e in REGISTRY:
        assert set(e.sections) == set(sections_read(e.name)) | {"guard", "resume"}, e.name


def test_adding_a_method_needs_only_its_module_its_config_dataclass_and_one_registry_line(tmp_path):
    pkg = tmp_path / "lead_recipes"
    shutil.copytree(ROOT / "lead_recipes", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "launchers").symlink_to(ROOT / "launchers")  # the recipes
    (pkg / "methods" / "dummy.py").write_text(DUMMY_MODULE)
    config = (pkg / "methods" / "config.py").read_text()
    anchor_class, anchor_registry = "@dataclass(frozen=True)\nclass MethodEntry", "REGISTRY = (\n"
    assert config.count(anchor_class) == 1 and config.count(anchor_registry) == 1
    config = config.replace(anchor_class, DUMMY_CONFIG + anchor_class).replace(
        anchor_registry, anchor_registry + DUMMY_ENTRY
    )
    (pkg / "methods" / "config.py").write_text(config)
    run = subprocess.run([sys.executable, "-c", CHECK], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["package"] == str(pkg / "__init__.py")  # the copy ran, not the installed package
    assert "dummy-method" in got["choices"] and got["name"] == "dummy-method"
    assert list(got["stats"])[-1] == "scale" and got["stats"]["scale"] == 3.0 and got["logged"] == 3.0
    assert got["argv"] == ["--recipe.method", "dummy-method", "--recipe.dummy_method.scale", "3.0"]
    assert got["settings"] == {"--recipe.method": "dummy-method", "--recipe.dummy_method.scale": 3.0}
    assert got["recipe_file_ok"] == 2.0 and got["base"] == "lead-1.5b"


class _TunedLead(LeadMethod):
    """A user's subclass of a registered method (module-level, so it pickles)."""


def test_a_subclass_of_a_registered_method_carries_its_base_methods_name_into_stats_and_checkpoints():
    method = _TunedLead.from_config(RecipeConfig(method="lead"))
    batch = RolloutBatch(correct=torch.tensor([[True, False]]), lengths=torch.tensor([[5.0, 9.0]]), max_new_tokens=16)
    out = method.step(batch)
    assert "recipe/lead/lambda_c" in step_stats(method.name, batch, out, out.rewards, torch.zeros(2), {"clamped": 0})
    state = recipe_client_state(method, None, method_settings(method, 16))
    assert state["method"] == "lead" and state["settings"]["--recipe.method"] == "lead"
    fresh = _TunedLead.from_config(RecipeConfig(method="lead"))
    assert restore_recipe_state(fresh, {"recipe": state}) == [] and fresh.state_dict() == method.state_dict()
    assert pickle.loads(pickle.dumps(method)).name == "lead"


@pytest.mark.parametrize(
    "line",
    [
        '    MethodEntry("grpo_lead", "lead_recipes.methods.grpo:GrpoMethod", GrpoConfig, "grpo-1.5b"),\n',
        '    MethodEntry("resume", "lead_recipes.methods.grpo:GrpoMethod", GrpoConfig, "grpo-1.5b"),\n',
    ],
    ids=["same-section-as-grpo-lead", "section-of-every-method"],
)
def test_a_registry_line_whose_flag_section_is_taken_is_refused_at_import_naming_it(tmp_path, monkeypatch, line):
    # section = name with '-' -> '_': a second entry on a taken section would silently replace its config
    config = (ROOT / "lead_recipes" / "methods" / "config.py").read_text()
    path = tmp_path / "config_copy.py"
    path.write_text(config.replace("REGISTRY = (\n", "REGISTRY = (\n" + line, 1))
    spec = importlib.util.spec_from_file_location("config_copy", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "config_copy", module)  # dataclasses look their module up there
    with pytest.raises(ValueError, match=r"--recipe\.(grpo_lead|resume)\.\*"):
        spec.loader.exec_module(module)


def _names_tests_use() -> set[str]:
    """Every string literal inside a test function (decorators included) of a tests/methods module."""
    import ast

    found = set()
    for path in Path(__file__).parent.glob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                found |= {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return found


def test_every_registered_method_has_its_own_tests_under_tests_methods():
    # CONTRIBUTING's item 6: a test function that names the method (e.g. step("kimi", ...)) counts; the modules
    # looping over REGISTRY name no method, so they do not
    untested = [e.name for e in REGISTRY if e.name not in _names_tests_use()]
    assert not untested, f"no test under tests/methods names {untested}: add the method's own tests there"
