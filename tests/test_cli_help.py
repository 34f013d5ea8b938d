"""Every `lead-recipes` command's --help shows each flag's default, wraps without splitting recipe names at hyphens,
and `lead-recipes --version` prints the installed version. The parsers are the real ones, caught as each command
formats its help."""
from __future__ import annotations

import argparse
import contextlib
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lead_recipes.cli import COMMANDS
from lead_recipes.renamed_flags import parser_options, renamed_hint

ROOT = Path(__file__).resolve().parents[1]


def _parsers_formatted_by(command: str, argv: list[str], monkeypatch) -> list[argparse.ArgumentParser]:
    seen = []
    original = argparse.ArgumentParser.format_help

    def record(self):
        seen.append(self)
        return original(self)

    monkeypatch.setattr(argparse.ArgumentParser, "format_help", record)
    # `lead-recipes train --help` returns 0; the others exit through argparse
    with contextlib.nullcontext() if command == "train" else pytest.raises(SystemExit):
        importlib.import_module(COMMANDS[command][0]).main(argv)
    return seen


HELP_ARGVS = [("train", ["--help"]), ("launch", ["--help"]), ("data", ["build", "--help"]),
              ("data", ["curriculum", "--help"]), ("grade", ["--help"]), ("serve", ["--help"]),
              ("replay", ["--help"]), ("eval", ["--help"])]


@pytest.mark.parametrize("command,argv", HELP_ARGVS, ids=[" ".join([c, *a]) for c, a in HELP_ARGVS])
def test_every_flag_with_a_default_shows_it_in_help(command, argv, monkeypatch, capsys):
    parsers = _parsers_formatted_by(command, argv, monkeypatch)
    assert parsers, f"lead-recipes {command} {' '.join(argv)} formatted no help"
    missing = []
    for parser in parsers:
        formatter = parser._get_formatter()
        for action in parser._actions:
            if not action.option_strings or action.default in (None, argparse.SUPPRESS, False):
                continue
            if "default" not in (formatter._get_help_string(action) or "").lower():
                missing.append(f"{parser.prog}: {action.option_strings[0]} (default {action.default!r})")
    assert missing == []


def test_help_never_splits_a_recipe_name_at_a_hyphen(monkeypatch, capsys):
    from lead_recipes.recipes.recipe import recipe_names
    monkeypatch.setenv("COLUMNS", "60")    # narrow: plenty of wrapping
    with pytest.raises(SystemExit):
        importlib.import_module(COMMANDS["launch"][0]).main(["--help"])
    words = set(re.findall(r"[\w.-]+", capsys.readouterr().out))
    assert [n for n in recipe_names() if n not in words] == []


def test_version_flag_prints_the_installed_version():
    out = subprocess.run([sys.executable, "-m", "lead_recipes.cli", "--version"], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout.strip()
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)[1]
    assert out == f"lead-recipes {version}"


def _table_and_parser(command: str, argv: list[str], monkeypatch):
    """The rename table and the parser a command parses its flags with (caught as it calls parse_args)."""
    module = importlib.import_module(COMMANDS[command][0])
    seen = {}

    def capture(parser, args, table):
        seen.update(table=table, parser=parser)
        raise SystemExit(0)

    monkeypatch.setattr(module, "parse_args", capture)
    with pytest.raises(SystemExit):
        module.main(argv)
    return seen["table"], seen["parser"]


RENAME_ARGVS = [("launch", ["lead-1.5b"]), ("data", ["build"]), ("grade", []), ("serve", []), ("replay", []),
                ("eval", [])]


@pytest.mark.parametrize("command,argv", RENAME_ARGVS, ids=[c for c, _ in RENAME_ARGVS])
def test_every_rename_hint_names_a_flag_the_command_has(command, argv, monkeypatch):
    table, parser = _table_and_parser(command, argv, monkeypatch)
    options = parser_options(parser)
    assert {old: new for old, new in table.items() if new.split()[0] not in options} == {}


def test_train_rename_hints_name_flags_train_has():
    from lead_recipes.training import cli as train
    assert {o: n for o, n in train.RENAMED.items() if n.split()[0] not in parser_options(train._our_parser())} == {}


@pytest.mark.parametrize("old,new", [("--partition", "--slurm.partition"), ("--save-timeout", "--slurm.save_timeout"),
                                     ("--resume", "--slurm.resume_enable")])
def test_an_old_dashed_flag_is_matched_to_its_one_dotted_successor(old, new, capsys):
    from lead_recipes.recipes import launch
    with pytest.raises(SystemExit):
        launch.main(["lead-1.5b", "--launch.target", "slurm", old, "x"])
    assert f"{old} is now {new}" in capsys.readouterr().err


def test_a_dashed_flag_with_two_dotted_candidates_gets_no_guess():
    parser = argparse.ArgumentParser()
    parser.add_argument("--a.seed")
    parser.add_argument("--b.seed")
    assert renamed_hint(["--seed", "1"], {}, parser) is None
    assert renamed_hint(["--a.seed", "1", "--", "--b-seed"], {}, parser) is None   # known flags and after `--`
