"""The preflight's `context` check: `data.max_len` within the model's context, read from its local or cached
`config.json` (lead_recipes/recipes/own_model.py). See docs/training.md (preflight).
"""

from __future__ import annotations

from lead_recipes.recipes.own_model import context_problem, model_context
from lead_recipes.training.data_check import Check


def check_args(args) -> Check:
    """The preflight's `context` check on `lead-recipes train`'s parsed (hierarchized) OpenRLHF arguments."""
    # read as the other checks' callers may hand it: a namespace holding only some groups
    model = getattr(getattr(args, "actor", None), "model_name_or_path", None)
    max_len = getattr(getattr(args, "data", None), "max_len", None)
    problem = context_problem(model, max_len)
    if problem:
        return Check("context", False, problem)
    found = model_context(model)
    if found is None:
        return Check("context", True, f"{model}: no local config.json to read its context from; not checked")
    return Check("context", True, f"data.max_len {max_len} fits {model}'s context of {found[0]} tokens")
