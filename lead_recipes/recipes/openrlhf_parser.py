"""OpenRLHF's own command-line parser, as installed: the one way lead-recipes reads OpenRLHF's flags and defaults.
OpenRLHF builds it under `if __name__ == "__main__"` in its cli scripts, so `openrlhf_parser` compiles just the
add_argument statements of that block, read from the installed file, never copied. It imports neither OpenRLHF
nor torch. See docs/training.md.
"""

from __future__ import annotations

import argparse
import ast
import functools
import importlib.util
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from lead_recipes.recipes import RecipeError

ENTRYPOINTS = {"train": "openrlhf.cli.train_ppo_ray", "sft": "openrlhf.cli.train_sft"}


@functools.lru_cache(maxsize=None)
def openrlhf_parser(entrypoint: str = "train") -> argparse.ArgumentParser:
    """The installed OpenRLHF CLI's own ArgumentParser: the statements of its ``__main__`` block up to
    ``parse_args()`` (add_argument calls only), compiled from the installed file so flag names, types, choices and
    defaults are exactly those of the version users run."""
    module = ENTRYPOINTS[entrypoint]
    top, *inner = module.split(".")
    spec = importlib.util.find_spec(top)  # a top-level spec: found without importing the package
    if spec is None or not spec.submodule_search_locations:
        raise RecipeError(f"OpenRLHF is not installed (cannot find {module}); install the `train` extra")
    path = Path(list(spec.submodule_search_locations)[0]).joinpath(*inner[:-1], inner[-1] + ".py")
    tree = ast.parse(path.read_text(), str(path))
    for node in tree.body:
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            body = []
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and "parse_args" in ast.unparse(stmt.value):
                    break
                body.append(stmt)
            scope: dict[str, Any] = {"argparse": argparse, "datetime": datetime, "os": os}
            code = compile(ast.Module(body=body, type_ignores=[]), str(path), "exec")
            exec(code, scope)  # safe: OpenRLHF's own installed source, not model/user text
            return scope["parser"]
    raise RecipeError(f"cannot find the argument parser in {path} (OpenRLHF layout changed?)")


def openrlhf_default(key: str, entrypoint: str = "train") -> Any:
    """The installed OpenRLHF's default of flag `--KEY` (e.g. "rollout.batch_size"); KeyError for an unknown flag."""
    for action in openrlhf_parser(entrypoint)._actions:
        if f"--{key}" in action.option_strings:
            return action.default
    raise KeyError(f"--{key} is not a flag of {ENTRYPOINTS[entrypoint]}")
