"""The --recipe.* flags: defined once from the config dataclasses, OpenRLHF-style dotted dests that survive
OpenRLHF's own `hierarchize`, validation errors that name the flag, and argv round trips."""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys

import pytest

from lead_recipes.flags import add_recipe_flags, recipe_argv, recipe_config
from lead_recipes.methods import build_method
from lead_recipes.methods.config import SECTIONS, LeadConfig, RecipeConfig, base_type, validate


def parser():
    p = argparse.ArgumentParser(allow_abbrev=False)
    add_recipe_flags(p)
    return p


def test_every_config_field_has_exactly_one_flag_with_the_config_default():
    p = parser()
    dests = {a.dest: a for a in p._actions if a.dest.startswith("recipe.")}
    expected = {"recipe.method"} | {f"recipe.{s}.{f.name}" for s, c in SECTIONS.items() for f in dataclasses.fields(c)}
    assert set(dests) == expected
    for s, c in SECTIONS.items():
        for f in dataclasses.fields(c):
            assert dests[f"recipe.{s}.{f.name}"].default == f.default


def test_boolean_flags_end_in_enable_and_turn_off_with_no():
    switches = [a for a in parser()._actions if a.dest.endswith("_enable")]
    bools = [(s, f) for s, c in SECTIONS.items() for f in dataclasses.fields(c) if base_type(f) is bool]
    assert len(switches) == len(bools) and all(f.name.endswith("_enable") for _, f in bools)
    for a in switches:
        assert isinstance(a, argparse.BooleanOptionalAction), a.dest
        on, off = a.option_strings
        assert off == "--no-" + on[2:] and parser().parse_args([on, off]).__dict__[a.dest] is False


def test_empty_command_line_gives_the_default_recipe_with_lead():
    ns = recipe_config(parser().parse_args([]))
    assert ns == RecipeConfig() and ns.method == "lead" and ns.lead.aggregator == "mean_correct"


def test_dotted_flags_survive_openrlhf_hierarchize():
    from openrlhf.utils.config import hierarchize

    args = parser().parse_args(["--recipe.lead.aggregator", "min_correct", "--recipe.leash.target_length", "2048"])
    via_openrlhf = recipe_config(hierarchize(args))
    assert via_openrlhf.lead.aggregator == "min_correct" and via_openrlhf.leash.target_length == 2048.0
    assert via_openrlhf == recipe_config(args)


@pytest.mark.parametrize(
    "argv,flag",
    [
        (["--recipe.lead.beta_ema", "1.0"], "--recipe.lead.beta_ema"),
        (["--recipe.lead.lambda_min", "-0.1"], "--recipe.lead.lambda_min"),
        (["--recipe.lead.static_lambda_c", "1.5"], "--recipe.lead.static_lambda_c"),
        (["--recipe.leash.lr", "nan"], "--recipe.leash.lr"),
        (["--recipe.leash.target_length", "0"], "--recipe.leash.target_length"),
        (["--recipe.leash.lambda_min", "0.5", "--recipe.leash.lambda_max", "0.2"], "--recipe.leash.lambda_max"),
        (["--recipe.grpo_lead.rho0", "2"], "--recipe.grpo_lead.rho0"),
        (["--recipe.shorter_better.beta", "inf"], "--recipe.shorter_better.beta"),
        (["--recipe.gdpo.correct_weight", "0", "--recipe.gdpo.length_weight", "0"], "--recipe.gdpo.correct_weight"),
    ],
)
def test_bad_values_raise_value_error_naming_the_flag(argv, flag):
    with pytest.raises(ValueError, match=flag.replace(".", r"\.")):
        validate(recipe_config(parser().parse_args(argv)))


def test_bad_choice_is_refused_by_the_parser():
    with pytest.raises(SystemExit):
        parser().parse_args(["--recipe.lead.aggregator", "max_correct"])


@pytest.mark.parametrize("value,match", [("drpo", "DRPO is a loss"), ("ppo", "--recipe.method")])
def test_unknown_method_names_the_flag(value, match):
    with pytest.raises(ValueError, match=match):
        validate(RecipeConfig(method=value))


def test_wrong_types_from_a_yaml_recipe_are_named():
    with pytest.raises(ValueError, match=r"--recipe\.lead\.zero_psi_skip_enable must be true or false"):
        validate(RecipeConfig.of({"lead": {"zero_psi_skip_enable": "yes"}}))
    with pytest.raises(ValueError, match=r"--recipe\.lead\.b_max must be an integer"):
        validate(RecipeConfig.of({"lead": {"b_max": 4000.5}}))


def test_unknown_keys_are_refused_by_name():
    with pytest.raises(ValueError, match=r"--recipe\.leash\.targetlength is not a recipe flag"):
        RecipeConfig.of({"leash": {"targetlength": 4096}})


def test_recipe_argv_round_trips_through_the_parser():
    ns = RecipeConfig.of(
        {
            "method": "grpo-lead",
            "grpo_lead": {"repetition_penalty_enable": True, "alpha": 0.0},
            "lead": {"static_lambda_c": 0.7, "b_max": 8000},
            "leash": {"lr": 0.003},
        }
    )
    assert recipe_config(parser().parse_args(recipe_argv(ns))) == ns
    assert recipe_config(parser().parse_args(recipe_argv(ns, only_changed=False))) == ns
    assert recipe_argv(RecipeConfig()) == []


def test_build_method_validates_before_building():
    with pytest.raises(ValueError, match=r"--recipe\.lead\.alpha must be > 0"):
        build_method(RecipeConfig(lead=LeadConfig(alpha=-1.0)))  # built directly, never validated before


def test_build_method_takes_only_a_recipe_config():
    with pytest.raises(TypeError, match="RecipeConfig"):
        build_method({"method": "lead"})


def _just_outside(f: dataclasses.Field):
    """(a value just outside, the closed bound or None) for each bound of the field's declared range."""
    m, step = f.metadata, (1 if base_type(f) is int else 1e-3)
    if "ge" in m:
        yield m["ge"] - step, m["ge"]
    if "gt" in m:
        yield m["gt"], None
    if "le" in m:
        yield m["le"] + step, m["le"]
    if "lt" in m:
        yield m["lt"], None


def test_every_range_on_a_config_field_is_enforced_at_its_bound_and_names_the_flag():
    checked = 0
    for section, config in SECTIONS.items():
        for f in dataclasses.fields(config):
            for bad, closed_bound in _just_outside(f):
                with pytest.raises(ValueError, match=rf"--recipe\.{section}\.{f.name} must be"):
                    RecipeConfig.of({section: {f.name: bad}})
                if closed_bound is not None:
                    RecipeConfig.of({section: {f.name: closed_bound}})  # the closed bound itself is allowed
                checked += 1
    assert checked >= 25  # every range the configs declare was tried (27 today)


def test_importing_flags_does_not_import_torch():
    code = "import sys, lead_recipes.flags; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_integer_values_for_float_flags_become_floats():
    ns = RecipeConfig.of({"leash": {"target_length": 4096, "lambda_init": 0}, "lead": {"b_max": 4000}})
    assert type(ns.leash.target_length) is float and type(ns.leash.lambda_init) is float
    assert type(ns.lead.b_max) is int
