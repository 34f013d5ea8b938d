"""The grading options are declared once (lead_recipes.grading.options): every `--grade.*` flag of `grade`, `serve`
and `eval` parses to the declared default (extraction: the command's own, as docs/grading.md states), `Grader`'s
keyword defaults and the shared grader from a clean environment are the same values, docs/grading.md's Grader(...)
call shows them, and a bad grading variable, flag or Grader argument is an error saying what it must be."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

from evaluation import cli as eval_cli
from lead_recipes.grading import cli as grade_cli
from lead_recipes.grading.options import OPTIONS
from lead_recipes.grading.pool import grader as grading
from lead_recipes.grading.pool.grader import Grader
from lead_recipes.reward import server

ROOT = Path(__file__).resolve().parents[2]
GRADER_OPTIONS = [o for o in OPTIONS.values() if o.grader]
ENV_OPTIONS = [o for o in OPTIONS.values() if o.env]

# command -> (its parser, the least argv it parses)
COMMANDS = {
    "grade": (grade_cli.build_parser, ["--input", "i", "--output", "o"]),
    "serve": (server.build_parser, []),
    "eval": (eval_cli.build_parser, ["--eval.backend", "replay", "--output", "o"]),
}


def _grade_values(command: str) -> dict[str, object]:
    """The `grade.*` values `command` parses with no `--grade.*` flag, by option name."""
    build, argv = COMMANDS[command]
    return {k.removeprefix("grade."): v for k, v in vars(build().parse_args(argv)).items() if k.startswith("grade.")}


@pytest.fixture
def clean_grader(monkeypatch):
    """get_grader() as a process with none of the grading variables set would build it (its pool never starts)."""
    for o in ENV_OPTIONS:
        monkeypatch.delenv(o.env, raising=False)
    monkeypatch.setattr(grading, "_SHARED", None)
    g = grading.get_grader()
    yield g
    g.close()


@pytest.mark.parametrize("command", COMMANDS)
def test_each_commands_grade_flags_parse_to_the_declared_defaults(command):
    """A command may set its own default (`grade` and `eval` do, for extraction: checked against the docs below);
    any other is the declared one."""
    values = _grade_values(command)
    assert values, f"lead-recipes {command} has no --grade.* flag"
    values.pop("extraction", None)
    assert values == {name: OPTIONS[name].default for name in values}


def test_graders_keyword_defaults_are_the_declared_defaults():
    params = inspect.signature(Grader).parameters
    assert {o.grader: params[o.grader].default for o in GRADER_OPTIONS} == {o.grader: o.default for o in GRADER_OPTIONS}


def test_the_shared_grader_from_a_clean_environment_is_a_default_grader(clean_grader):
    with Grader() as default:
        assert {o.grader: getattr(clean_grader, o.grader) for o in GRADER_OPTIONS} == {
            o.grader: getattr(default, o.grader) for o in GRADER_OPTIONS
        }


def _documented_extraction_defaults() -> dict[str, str]:
    """docs/grading.md's "Choosing and recording the policy" table: where -> its stated default policy."""
    rows = re.findall(
        r"^\| (?:`lead-recipes (\w+)`|(reward function)) \|[^|\n]*\(default `(\w+)`\)",
        (ROOT / "docs" / "grading.md").read_text(),
        re.M,
    )
    return {command or where: default for command, where, default in rows}


def test_the_documented_extraction_defaults_are_each_commands_and_the_reward_functions(clean_grader):
    documented = _documented_extraction_defaults()
    assert set(documented) == {*COMMANDS, "reward function"}, "the extraction table of docs/grading.md changed shape"
    actual = {command: _grade_values(command)["extraction"] for command in COMMANDS}
    assert documented == {**actual, "reward function": clean_grader.extraction}


def test_the_documented_grader_call_shows_the_keyword_defaults():
    """docs/grading.md#python-api opens with `Grader(...)` spelled out with every default."""
    text = (ROOT / "docs" / "grading.md").read_text()
    api = text[text.index("## Python API") :]
    call = re.search(r"Grader\((.*?)\)", api, re.S)
    assert call, "docs/grading.md#python-api no longer spells out Grader(...)"
    shown = {k.arg: ast.literal_eval(k.value) for k in ast.parse(f"f({call[1]})", mode="eval").body.keywords}
    params = inspect.signature(Grader).parameters
    assert shown == {o.grader: params[o.grader].default for o in GRADER_OPTIONS}


# each grading variable -> what a value that is no value of its type must be
NOT_A_VALUE = {
    "LEAD_RECIPES_EXTRACTION": "one of boxed, final_answer",
    "LEAD_RECIPES_GRADE_TIMEOUT_S": "a number",
    "LEAD_RECIPES_GRADE_WORKERS": "an integer",
    "LEAD_RECIPES_GRADE_REL_TOL": "a number",
    "LEAD_RECIPES_GRADE_PROBLEM_PRECISION": "0 or 1",
}


def test_every_grading_variable_is_checked_below():
    assert set(NOT_A_VALUE) == {o.env for o in ENV_OPTIONS}


@pytest.mark.parametrize(
    "env,value,must",
    [
        *((env, "abc", must) for env, must in NOT_A_VALUE.items()),
        ("LEAD_RECIPES_GRADE_TIMEOUT_S", "0", "> 0"),
        ("LEAD_RECIPES_GRADE_WORKERS", "0", "≥ 1"),
        ("LEAD_RECIPES_GRADE_REL_TOL", "1", "≥ 0 and < 1"),
        ("LEAD_RECIPES_GRADE_REL_TOL", "nan", "finite"),
    ],
)
def test_a_bad_value_of_a_grading_variable_is_an_error_naming_it(monkeypatch, env, value, must):
    monkeypatch.setattr(grading, "_SHARED", None)
    monkeypatch.setenv(env, value)
    with pytest.raises(ValueError, match=f"^{env} must be {re.escape(must)}, got '{value}'$"):
        grading.get_grader()


@pytest.mark.parametrize(
    "command,flag,value,must",
    [
        ("grade", "--grade.rel_tol", "1", "≥ 0 and < 1"),
        ("grade", "--grade.timeout_s", "0", "> 0"),
        ("grade", "--grade.workers", "-3", "≥ 1"),
        ("serve", "--grade.workers", "0", "≥ 1"),
        ("serve", "--grade.timeout_s", "nan", "finite"),
    ],
)
def test_a_flag_outside_its_declared_range_is_a_usage_error_naming_it(command, flag, value, must, capsys):
    build, argv = COMMANDS[command]
    with pytest.raises(SystemExit) as e:
        build().parse_args([*argv, flag, value])
    assert e.value.code == 2 and f"argument {flag}: must be {must}, got '{value}'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"workers": -3}, "workers must be ≥ 1, got -3"),
        ({"workers": 0}, "workers must be ≥ 1, got 0"),
        ({"timeout_s": 0}, "timeout_s must be > 0, got 0"),
        ({"rel_tol": 1.0}, "rel_tol must be ≥ 0 and < 1, got 1.0"),
    ],
)
def test_a_grader_argument_outside_its_declared_range_is_an_error_naming_it(kwargs, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        Grader(**kwargs)
