"""Every `lead-recipes` command's --help shows each flag's default once (never a secret), wraps without splitting
recipe names at hyphens, and `lead-recipes --version` prints the installed version; every command refuses an unknown
or abbreviated flag, naming the closest real one. The parsers are the real ones, caught as each command formats its
help or parses."""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lead_recipes.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[2]


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


HELP_ARGVS = [
    ("train", ["--help"]),
    ("launch", ["--help"]),
    ("data", ["build", "--help"]),
    ("data", ["curriculum", "--help"]),
    ("grade", ["--help"]),
    ("serve", ["--help"]),
    ("replay", ["--help"]),
    ("eval", ["--help"]),
    ("eval", ["compare", "--help"]),
    ("doctor", ["--help"]),
]
_DEFAULT = re.compile(r"\bdefault\b", re.I)


@pytest.mark.parametrize("command,argv", HELP_ARGVS, ids=[" ".join([c, *a]) for c, a in HELP_ARGVS])
def test_every_flag_shows_its_default_once_in_help_and_ours_say_what_none_means(command, argv, monkeypatch, capsys):
    """Every flag's default shows once, also on flags without help text (`--vllm.dtype`, `--slurm.*`, `--openai.*`),
    booleans, None defaults, and --recipe.* flags whose text names the default (no second `(default: ...)`).
    Rendered as `--help` renders each flag; OpenRLHF's own flags may show `(default: None)`, ours say it in words."""
    from lead_recipes.recipes.openrlhf_parser import openrlhf_parser

    parsers = _parsers_formatted_by(command, argv, monkeypatch)
    assert parsers, f"lead-recipes {command} {' '.join(argv)} formatted no help"
    wrong = []
    for parser in parsers:
        formatter = parser._get_formatter()
        for action in parser._actions:
            if not action.option_strings or isinstance(action, argparse._HelpAction):
                continue
            text = " ".join(formatter._format_action(action).split())
            shown = len(_DEFAULT.findall(text))
            if shown != (0 if action.required else 1):
                wrong.append(f"{action.option_strings[-1]}: default shown {shown} times: {text}")
            elif parser is not openrlhf_parser("train") and "(default: None)" in text:
                wrong.append(f"{action.option_strings[-1]}: says `(default: None)`, not what None means")
    assert wrong == []


def test_eval_help_never_prints_the_api_key_from_the_environment(monkeypatch, capsys):
    """--openai.api_key's default is named `$OPENAI_API_KEY`, never its value, so `--help` cannot print the key."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    with pytest.raises(SystemExit):
        importlib.import_module(COMMANDS["eval"][0]).main(["--help"])
    out = capsys.readouterr().out
    assert "sk-from-the-environment" not in out and "$OPENAI_API_KEY" in out


def test_help_never_splits_a_recipe_name_at_a_hyphen(monkeypatch, capsys):
    from lead_recipes.recipes.recipe import recipe_names

    monkeypatch.setenv("COLUMNS", "60")  # narrow: plenty of wrapping
    with pytest.raises(SystemExit):
        importlib.import_module(COMMANDS["launch"][0]).main(["--help"])
    words = set(re.findall(r"[\w.-]+", capsys.readouterr().out))
    assert [n for n in recipe_names() if n not in words] == []


def test_version_flag_prints_the_installed_version():
    out = subprocess.run(
        [sys.executable, "-m", "lead_recipes.cli", "--version"], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.strip()
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)[1]
    assert out == f"lead-recipes {version}"


def _failure(command: str, argv: list[str], capsys) -> tuple[int, str]:
    """(exit code, stderr) of a command run in-process on flags it must refuse."""
    try:
        code = importlib.import_module(COMMANDS[command][0]).main(argv)
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr().err


UNKNOWN_FLAGS = [
    ("train", ["--recipe.name", "none", "--recipe.leash.target_lenght", "3"], "--recipe.leash.target_length"),
    ("train", ["--recipe.name", "none", "--vllm.num_engine", "2"], "--vllm.num_engines"),
    ("launch", ["lead-1.5b", "--launch.targt", "local"], "--launch.target"),
    (
        "data",
        ["build", "--input", "s", "--output", "o", "--data.preset", "jsonl", "--data.problm_key", "q"],
        "--data.problem_key",
    ),
    (
        "data",
        [
            "curriculum",
            "--output",
            "o",
            "--curriculum.problems",
            "p",
            "--curriculum.dataset",
            "d",
            "--curriculum.treshold",
            "0.5",
        ],
        "--curriculum.threshold",
    ),
    ("grade", ["--input", "i", "--output", "o", "--grade.extractoin", "boxed"], "--grade.extraction"),
    ("serve", ["--serve.prot", "0"], "--serve.port"),
    ("replay", ["--output", "o", "--replay.epohcs", "2"], "--replay.epochs"),
    ("eval", ["--eval.backend", "replay", "--output", "o", "--eval.presett", "sober"], "--eval.preset"),
    ("eval", ["compare", "r", "--eval.bsae", "b"], "--eval.base"),
    ("doctor", ["--doctor.timout_s", "5"], "--doctor.timeout_s"),
]


@pytest.mark.parametrize("command,argv,closest", UNKNOWN_FLAGS, ids=[f"{c} {a[-2]}" for c, a, _ in UNKNOWN_FLAGS])
def test_an_unknown_flag_fails_naming_the_closest_real_flag_once(command, argv, closest, capsys):
    code, err = _failure(command, argv, capsys)
    assert code == 2 and argv[-2] in err
    assert f"(did you mean {closest}?)" in err and err.count("did you mean") == 1


ABBREVIATIONS = [
    ("train", ["--recipe.name", "none", "--recipe.lead.aggreg", "min_correct"]),
    ("launch", ["lead-1.5b", "--launch.tar", "local"]),
    ("data", ["build", "--input", "s", "--output", "o", "--data.preset", "jsonl", "--data.problem", "q"]),
    ("grade", ["--input", "i", "--output", "o", "--grade.extr", "boxed"]),
    ("replay", ["--output", "o", "--replay.epo", "2"]),
    ("eval", ["--eval.backend", "replay", "--output", "o", "--eval.pre", "sober"]),
    ("doctor", ["--doctor.time", "5"]),
]


@pytest.mark.parametrize("command,argv", ABBREVIATIONS, ids=[f"{c} {a[-2]}" for c, a in ABBREVIATIONS])
def test_an_abbreviated_flag_is_refused(command, argv, capsys):
    code, err = _failure(command, argv, capsys)
    assert code == 2 and argv[-2] in err and "did you mean" in err


@pytest.mark.parametrize(
    "script", sorted([*ROOT.glob("benchmarks/*.py"), *ROOT.glob("launchers/*.py")]), ids=lambda p: p.name
)
def test_the_scripts_outside_the_package_refuse_abbreviated_flags_too(script):
    # an abbreviation that is a prefix of a later flag would silently change its meaning
    calls = [
        node
        for node in ast.walk(ast.parse(script.read_text()))
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "ArgumentParser"
    ]
    for call in calls:
        helper = isinstance(call.func, ast.Name)  # lead_recipes.help_format.ArgumentParser sets allow_abbrev=False
        assert helper or any(k.arg == "allow_abbrev" and k.value.value is False for k in call.keywords), script.name
