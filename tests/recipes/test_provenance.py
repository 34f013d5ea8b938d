"""Every value a recipe file sets has a source in a comment of that file (a paper's arXiv id, the authors' code, or
"ours:" with the reason), and docs/recipes.md is the page generated from those comments. Rules: docs/recipes.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lead_recipes.recipes.provenance import SOURCE_FORM, merged_values, own_values, read
from lead_recipes.recipes.recipe import RECIPES_DIR, recipe_names

DOC = Path(__file__).resolve().parents[2] / "docs" / "recipes.md"


@pytest.mark.parametrize("name", recipe_names())
def test_every_value_the_recipe_file_sets_has_a_source_comment(name):
    sources = read(RECIPES_DIR / f"{name}.yaml").sources
    missing = sorted(set(own_values(name)) - set(sources))
    assert not missing, f"{name}: values without a source comment: {missing}"


@pytest.mark.parametrize("name", recipe_names())
def test_every_source_is_a_paper_the_authors_code_or_ours_with_a_reason(name):
    prov = read(RECIPES_DIR / f"{name}.yaml")
    for key, source in {**prov.sources, **prov.inherited}.items():
        assert SOURCE_FORM.search(source), f"{name}: {key}: source {source!r} is not a paper, code or ours: reason"


@pytest.mark.parametrize("name", recipe_names())
def test_inherited_sources_name_values_the_recipe_inherits_and_does_not_set(name):
    prov, own, merged = read(RECIPES_DIR / f"{name}.yaml"), own_values(name), merged_values(name)
    for key in prov.inherited:
        assert key in merged and key not in own, f"{name}: '# inherited {key}' names no inherited value"


def test_a_block_comment_is_the_source_of_the_uncommented_values_just_below_it_only(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(
        "# header\nopenrlhf:\n  # arXiv 1234.56789, block\n  a: 1\n  b: 2   # ours: own\n"
        "                # continued\n  c: 3\n\n  d: 4\n  # ours: a note\n  e: 5  # authors' code\n"
        "  f: 6\nrecipe:\n  g: 7  # ours: '#' in a comment\n  h: \"x # y\"\n"
    )
    prov = read(path)
    assert prov.header == ["header"]
    assert prov.unused == ["ours: a note"]
    assert prov.sources == {
        "a": "arXiv 1234.56789, block",
        "b": "ours: own continued",
        "e": "authors' code",
        "recipe.g": "ours: '#' in a comment",
    }


@pytest.mark.parametrize("name", recipe_names())
def test_every_comment_among_the_values_is_the_source_of_a_value(name):
    unused = read(RECIPES_DIR / f"{name}.yaml").unused
    assert not unused, f"{name}: comments that are no value's source (move them to the header): {unused}"


def test_leash_values_the_paper_does_not_state_are_marked_as_ours():
    prov = read(RECIPES_DIR / "leash-1.5b.yaml")
    sources = {**prov.sources, **prov.inherited}
    for key in (
        "train.num_episodes",
        "rollout.n_samples_per_prompt",
        "rollout.temperature",
        "rollout.top_p",
        "actor.lr_scheduler",
        "recipe.leash.target_length",
        "rollout.batch_size",
        "actor.adam.lr",
    ):
        assert sources[key].startswith("ours:"), key


def test_the_page_cites_papers_not_local_paths():
    text = DOC.read_text()
    assert "../shared" not in text and not re.search(r"(?<![\w.$}])/(work|home|tmp)/", text)
    for name in recipe_names():
        assert "algorithms.md" not in (RECIPES_DIR / f"{name}.yaml").read_text(), name
