"""Every value a recipe sets has a row in docs/recipes.md (hyperparameter, value, source) whose value is the file's,
and every source is a paper (arXiv id), the authors' code, or "not stated: our choice, because ...". Recipes whose
sources live on another docs page (a method's own page) must name it in their header."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from lead_recipes.recipes.recipe import RECIPES_DIR, _read, recipe_names

DOC = Path(__file__).resolve().parents[1] / "docs" / "recipes.md"
SOURCE_FORMS = re.compile(r"arXiv \d{4}\.\d{5}|authors' code|^not stated: our choice, because \S")
SECTIONS = {"resources": "resources.", "openrlhf": "", "recipe": "recipe."}


def tables(text: str) -> dict[str, dict[str, tuple[str, str]]]:
    """{recipe: {hyperparameter: (value cell, source)}} from the `<a id="NAME">` sections of the page."""
    out: dict[str, dict[str, tuple[str, str]]] = {}
    current = None
    for line in text.splitlines():
        anchor = re.fullmatch(r'<a id="([^"]+)"></a>', line.strip())
        if anchor:
            current = out.setdefault(anchor.group(1), {})
            continue
        row = re.fullmatch(r"\| `([^`]+)` \| `([^`]*)` \| (.+) \|", line.strip())
        if row and current is not None:
            assert row.group(1) not in current, f"two rows for {row.group(1)}"
            current[row.group(1)] = (row.group(2), row.group(3))
    return out


def cell_value(cell: str):
    try:
        return json.loads(cell)
    except ValueError:
        return cell


def header(name: str) -> str:
    lines = (RECIPES_DIR / f"{name}.yaml").read_text().splitlines()
    return "\n".join(line for line in lines[:next(i for i, l in enumerate(lines) if not l.startswith("#"))])


def flat(raw: dict) -> dict:
    return {prefix + k: v for section, prefix in SECTIONS.items() for k, v in (raw.get(section) or {}).items()}


TABLES = tables(DOC.read_text())
DOCUMENTED = [n for n in recipe_names() if "docs/recipes.md" in header(n)]


@pytest.mark.parametrize("name", recipe_names())
def test_every_recipe_header_points_to_the_page_with_its_sources(name):
    page = re.search(r"docs/([a-z_-]+\.md)#([\w.-]+)", header(name))
    assert page, f"{name}: the header names no docs page with the sources of its values"
    if page.group(1) == "recipes.md":
        assert page.group(2) == name and name in TABLES


@pytest.mark.parametrize("name", DOCUMENTED)
def test_every_value_the_recipe_file_sets_has_a_row_with_that_value(name):
    own = flat(yaml.safe_load((RECIPES_DIR / f"{name}.yaml").read_text()))
    rows = TABLES[name]
    missing = sorted(set(own) - set(rows))
    assert not missing, f"{name}: values without a provenance row in docs/recipes.md: {missing}"
    for key, value in own.items():
        assert cell_value(rows[key][0]) == value, f"{name}: {key} = {value!r} in the file, {rows[key][0]!r} in the docs"


@pytest.mark.parametrize("name", DOCUMENTED)
def test_every_row_is_a_value_the_recipe_runs_with_and_names_its_source(name):
    merged = flat(_read(RECIPES_DIR / f"{name}.yaml"))
    for key, (cell, source) in TABLES[name].items():
        assert key in merged and cell_value(cell) == merged[key], f"{name}: stale row {key} = {cell}"
        assert SOURCE_FORMS.search(source), f"{name}: {key}: source {source!r} is not a paper, code or our choice"


def test_leash_values_the_paper_does_not_state_are_marked_as_ours():
    rows = TABLES["leash-1.5b"]
    for key in ("train.num_episodes", "rollout.n_samples_per_prompt", "rollout.temperature", "rollout.top_p",
                "actor.lr_scheduler", "recipe.leash.target_length", "rollout.batch_size", "actor.adam.lr"):
        assert rows[key][1].startswith("not stated"), key


def test_the_page_cites_papers_not_local_paths():
    text = DOC.read_text()
    assert "../shared" not in text and not re.search(r"(?<![\w.$}])/(work|home|tmp)/", text)
    for name in recipe_names():
        assert "algorithms.md" not in (RECIPES_DIR / f"{name}.yaml").read_text(), name
