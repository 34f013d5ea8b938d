"""The field helper of every method's config dataclass: a default with its help text, string choices and numeric
range, stored in the dataclass field's metadata, from which the `--recipe.*` flags, their validation and the docs'
flag reference are generated. Torch-free. See docs/methods.md#flags-recipe.
"""

from __future__ import annotations

import operator
from dataclasses import field

# range metadata of a number field: key -> (test the value must pass, symbol in the error message)
BOUNDS = {"ge": (operator.ge, "≥"), "gt": (operator.gt, ">"), "le": (operator.le, "≤"), "lt": (operator.lt, "<")}


def option(default, help: str, choices: tuple[str, ...] | None = None, **bounds: float):
    """A field with its help, choices (strings) and range (numbers: `ge`, `gt`, `le`, `lt`, see BOUNDS)."""
    if set(bounds) - set(BOUNDS):
        raise TypeError(f"unknown range keys {sorted(set(bounds) - set(BOUNDS))}")  # pragma: no cover
    return field(default=default, metadata={"help": help, **({"choices": choices} if choices else {}), **bounds})
