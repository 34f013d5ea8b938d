"""The field helper of every method's config dataclass: a default with its help text, string choices and numeric
range, stored in the dataclass field's metadata, from which the `--recipe.*` flags, their validation and the docs'
flag reference are generated. Torch-free. See docs/methods.md#flags-recipe.
"""

from __future__ import annotations

import math
import operator
from dataclasses import field
from typing import Mapping

# range metadata of a number field: key -> (test the value must pass, symbol in the error message)
BOUNDS = {"ge": (operator.ge, "≥"), "gt": (operator.gt, ">"), "le": (operator.le, "≤"), "lt": (operator.lt, "<")}


def range_text(bounds: Mapping[str, float]) -> str:
    """The range the BOUNDS keys of `bounds` allow, in words: {"ge": 0, "lt": 1} -> "≥ 0 and < 1" (none: "")."""
    return " and ".join(f"{BOUNDS[key][1]} {bounds[key]}" for key in BOUNDS if key in bounds)


def range_problem(value: float, bounds: Mapping[str, float]) -> str | None:
    """What the number `value` must be ("finite", or its range per `bounds`, e.g. "≥ 0 and < 1"), None when it is."""
    if not math.isfinite(value):
        return "finite"
    if all(BOUNDS[key][0](value, bounds[key]) for key in BOUNDS if key in bounds):
        return None
    return range_text(bounds)


def option(default, help: str, choices: tuple[str, ...] | None = None, **bounds: float):
    """A field with its help, choices (strings) and range (numbers: `ge`, `gt`, `le`, `lt`, see BOUNDS)."""
    if set(bounds) - set(BOUNDS):
        raise TypeError(f"unknown range keys {sorted(set(bounds) - set(BOUNDS))}")  # pragma: no cover
    return field(default=default, metadata={"help": help, **({"choices": choices} if choices else {}), **bounds})
