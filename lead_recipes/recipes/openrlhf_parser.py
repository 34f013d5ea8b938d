"""OpenRLHF's own command line, as installed: the one way lead-recipes reads OpenRLHF's flags, defaults and
validation. OpenRLHF builds its parser and validates the parsed args under `if __name__ == "__main__"` in its cli
scripts, so `openrlhf_parser` compiles the add_argument statements of that block and `openrlhf_args` the whole block
up to `train(args)`, read from the installed file, never copied. It imports neither OpenRLHF's packages nor torch,
and checks the version pin. See docs/training.md.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import functools
import importlib.metadata
import importlib.util
import io
import os
import re
import sys
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from lead_recipes.recipes import RecipeError

ENTRYPOINTS = {"train": "openrlhf.cli.train_ppo_ray", "sft": "openrlhf.cli.train_sft"}
SUPPORTED_OPENRLHF = "0.11.2"
# OpenRLHF 0.11.2's own printed messages still name these flags as before its dotted names, in a spelling the
# dotted names do not derive: translated so its messages name flags our users can type (not a lead-recipes alias).
_OPENRLHF_MESSAGE_NAMES = {
    "colocate_all_models": "train.colocate_all",
    "use_dynamic_batch": "train.dynamic_batch_enable",
    "remote_rm_url": "reward.remote_url",
}


class OpenRLHFMismatch(RuntimeError):
    """The installed OpenRLHF is not the version the plug-in is pinned to."""


def check_openrlhf() -> None:
    """OpenRLHFMismatch unless openrlhf==SUPPORTED_OPENRLHF is installed (the seams the plug-in patches are checked
    against that version by tests/training/test_openrlhf_seams.py)."""
    try:
        version = importlib.metadata.version("openrlhf")
    except importlib.metadata.PackageNotFoundError:
        raise OpenRLHFMismatch(
            f"openrlhf is not installed; lead-recipes train needs openrlhf=={SUPPORTED_OPENRLHF} (the `train` extra)"
        ) from None
    if version != SUPPORTED_OPENRLHF:
        raise OpenRLHFMismatch(
            f"openrlhf=={version} is installed; lead-recipes' plug-in is pinned to "
            f"openrlhf=={SUPPORTED_OPENRLHF}\n(pip install 'openrlhf=={SUPPORTED_OPENRLHF}')"
        )


def _package_file(module: str) -> Path:
    """The installed file of `module`, found without importing its packages (a top-level spec only)."""
    top, *inner = module.split(".")
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        raise RecipeError(f"OpenRLHF is not installed (cannot find {module}); install the `train` extra")
    return Path(list(spec.submodule_search_locations)[0]).joinpath(*inner[:-1], inner[-1] + ".py")


@functools.lru_cache(maxsize=None)
def _main_block(entrypoint: str) -> tuple[str, tuple[ast.stmt, ...], int]:
    """(file, statements of its `__main__` block, index of the `args = parser.parse_args()` statement)."""
    path = _package_file(ENTRYPOINTS[entrypoint])
    tree = ast.parse(path.read_text(), str(path))
    for node in tree.body:
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            for i, stmt in enumerate(node.body):
                if isinstance(stmt, ast.Assign) and "parse_args" in ast.unparse(stmt.value):
                    return str(path), tuple(node.body), i
    raise RecipeError(f"cannot find the argument parser in {path} (OpenRLHF layout changed?)")


def _run(path: str, statements, scope: dict) -> None:
    code = compile(ast.Module(body=list(statements), type_ignores=[]), path, "exec")
    exec(code, scope)  # safe: OpenRLHF's own installed source, not model/user text


def _new_parser(entrypoint: str) -> tuple[argparse.ArgumentParser, dict]:
    path, body, at = _main_block(entrypoint)
    scope: dict[str, Any] = {"argparse": argparse, "datetime": datetime, "os": os}
    _run(path, body[:at], scope)
    return scope["parser"], scope


@functools.lru_cache(maxsize=None)
def openrlhf_parser(entrypoint: str = "train") -> argparse.ArgumentParser:
    """The installed OpenRLHF CLI's own ArgumentParser: the statements of its ``__main__`` block up to
    ``parse_args()`` (add_argument calls only), compiled from the installed file so flag names, types, choices and
    defaults are exactly those of the version users run."""
    return _new_parser(entrypoint)[0]


def openrlhf_default(key: str, entrypoint: str = "train") -> Any:
    """The installed OpenRLHF's default of flag `--KEY` (e.g. "rollout.batch_size"); KeyError for an unknown flag."""
    for action in openrlhf_parser(entrypoint)._actions:
        if f"--{key}" in action.option_strings:
            return action.default
    raise KeyError(f"--{key} is not a flag of {ENTRYPOINTS[entrypoint]}")


class OpenRLHFArgumentError(RecipeError):
    """OpenRLHF's parser refused a value; the message is its own one line (not its usage page)."""


class _Validated(Exception):
    def __init__(self, args):
        super().__init__("validated")
        self.args_ = args


def _hierarchize():
    """OpenRLHF's own `hierarchize`, loaded from its file: importing openrlhf.utils would import torch and DeepSpeed
    for a function of ten lines that needs only `types`."""
    path = _package_file("openrlhf.utils.config")
    spec = importlib.util.spec_from_file_location("_lead_recipes_openrlhf_config", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.hierarchize


def openrlhf_args(argv: list[str], entrypoint: str = "train") -> tuple[SimpleNamespace, list[str]]:
    """OpenRLHF's own parse and validation of `argv`: its whole ``__main__`` block up to ``train(args)``, compiled
    from the installed file, without importing OpenRLHF's trainer (seconds of torch, DeepSpeed and vLLM imports).
    Returns (the nested args train() would get, the lines its validation printed, in current flag names).
    OpenRLHFArgumentError for a value its parser refuses, AssertionError for a configuration it refuses."""
    check_openrlhf()
    parser, scope = _new_parser(entrypoint)

    def error(message):
        raise OpenRLHFArgumentError(message)

    def stop(args):
        raise _Validated(args)

    parser.error = error  # one line instead of argparse's usage page and exit
    path, body, at = _main_block(entrypoint)
    rest = [s for s in body[at:] if not (isinstance(s, ast.ImportFrom) and s.module == "openrlhf.utils.config")]
    scope.update(hierarchize=_hierarchize(), train=stop)
    printed, saved = io.StringIO(), sys.argv
    sys.argv = [ENTRYPOINTS[entrypoint], *argv]

    def messages() -> list[str]:
        return [current_flag_names(line) for line in printed.getvalue().splitlines() if line.strip()]

    try:
        with contextlib.redirect_stdout(printed):
            _run(path, rest, scope)
    except _Validated as done:
        return done.args_, messages()
    except Exception:  # what it printed before refusing may be why (e.g. packing it turned on)
        sys.stderr.write("".join(f"OpenRLHF: {m}\n" for m in messages()))
        raise
    finally:
        sys.argv = saved
    raise RecipeError(f"{path}: its __main__ block ended without calling train(args) (OpenRLHF layout changed?)")


@functools.lru_cache(maxsize=None)
def _old_names(entrypoint: str = "train") -> dict[str, str]:
    """Pre-0.11 flag name -> dotted name: every underscore-joined tail of a dotted flag that names only that flag
    (`--rollout_max_tokens_per_gpu` -> `--rollout.max_tokens_per_gpu`), plus _OPENRLHF_MESSAGE_NAMES."""
    candidates: dict[str, set[str]] = {}
    current = set()
    for action in openrlhf_parser(entrypoint)._actions:
        for flag in action.option_strings:
            current.add(flag[2:])
            parts = flag[2:].split(".")
            for k in range(len(parts)):
                candidates.setdefault("_".join(parts[k:]), set()).add(flag[2:])
    old = {name: next(iter(new)) for name, new in candidates.items() if len(new) == 1 and name not in current}
    return {**old, **_OPENRLHF_MESSAGE_NAMES}


def current_flag_names(text: str, entrypoint: str = "train") -> str:
    """`text` with OpenRLHF's old flag names (`--packing_samples`) replaced by the dotted ones it now parses."""
    old = _old_names(entrypoint)
    return re.sub(r"--([A-Za-z_][A-Za-z0-9_]*)\b", lambda m: f"--{old.get(m[1], m[1])}", text)
