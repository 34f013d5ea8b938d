"""Every generated block of the docs is up to date with its sources. The blocks and their generator are
docs/generate.py (`python docs/generate.py` rewrites them); this test only imports it and checks."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("generate_docs", ROOT / "docs" / "generate.py")
generate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(generate)


@pytest.mark.parametrize("path", generate.BLOCKS)
def test_the_generated_blocks_are_up_to_date(path):
    assert (ROOT / path).read_text() == generate.rendered(path), f"{path} is stale: python docs/generate.py"


def test_the_check_names_a_file_whose_block_was_edited_by_hand(tmp_path):
    for path in generate.BLOCKS:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / path, tmp_path / path)
    edited = next(iter(generate.BLOCKS))
    name = next(iter(generate.BLOCKS[edited]))
    text = (tmp_path / edited).read_text()
    begin = text.index(generate.BEGIN.format(name=name))
    (tmp_path / edited).write_text(text[:begin] + text[begin:].replace("|", "¦", 1))
    assert generate.stale(tmp_path) == [edited]


def test_the_layout_has_a_line_for_every_package_folder_and_top_level_folder():
    # found here by walking the tree, not by the generator's own search, so a folder it misses fails
    packages = [
        p.parent.name + "/"
        for pkg in generate.PACKAGES
        for p in (ROOT / pkg).rglob("__init__.py")
        if "__pycache__" not in p.parts
    ]
    labels = [line.split()[0] for line in generate.repository_layout().splitlines()[1:-1]]
    assert sorted(labels) == sorted(packages + list(generate.FOLDERS))
