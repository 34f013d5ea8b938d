"""`lead-recipes train`: OpenRLHF's `train_ppo_ray` with a lead-recipes method in the group step. Our flags
(`--recipe.*`, `--run.*`, `--preflight.*`) overlay a base recipe and are checked, with every flag's spelling, before
anything heavy is imported; then OpenRLHF validates its own (its code, read from its file), the preflight checks what
it can, and training starts. Secrets are masked in everything printed, third-party import banners are not printed.
It never imports OpenRLHF itself (lead_recipes.training.openrlhf_plugin does) and never starts Ray before the
preflight. See docs/training.md.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import re
import shlex
import sys
import tempfile
from types import SimpleNamespace

from lead_recipes.flags import add_recipe_flags, recipe_argv, recipe_config
from lead_recipes.help_format import ArgumentParser, HelpFormatter, did_you_mean, option_strings
from lead_recipes.methods import sections_read
from lead_recipes.methods.config import SECTIONS, RecipeConfig, entry, flag, validate
from lead_recipes.recipes import RecipeError
from lead_recipes.recipes.openrlhf_parser import (
    OpenRLHFArgumentError,
    OpenRLHFMismatch,
    current_flag_names,
    openrlhf_args,
    openrlhf_default,
    openrlhf_parser,
)
from lead_recipes.training.actor_env import forward_env_to_actors
from lead_recipes.training.args import (
    REQUIRED,
    graded_by,
    length_penalty_errors,
    monitor_errors,
    resolve,
    reward_func_path,
    with_recipe,
)
from lead_recipes.training.first_token import adaptthink_errors
from lead_recipes.training.guard import grading_failure
from lead_recipes.training.preemption import PREEMPTED_EXIT, SaveOnSignal, saved_on_request
from lead_recipes.training.preflight import (
    PROG,
    add_preflight_flags,
    build_missing_data,
    prepare_hint,
    report,
    run_preflight,
)

_URL_SECRET = re.compile(r"([?&](?:token|key|api_key|apikey|access_token|secret|password)=)[^&\s\"']+", re.I)


def mask_secrets(text: str, args=None) -> str:
    """URL query secrets (`?token=...`), the W&B key and our tokens from the environment, replaced by ***."""
    secrets = [os.environ.get(k) for k in ("LEAD_RECIPES_SERVE_TOKEN", "WANDB_API_KEY")]
    if args is not None:
        secrets.append(getattr(getattr(getattr(args, "logger", None), "wandb", None), "key", None))
    for secret in sorted({s for s in secrets if isinstance(s, str) and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, "***")
    return _URL_SECRET.sub(r"\1***", text)


class UsageError(Exception):
    """A bad command line; the message says which flag and why."""


class _Parser(ArgumentParser):
    def error(self, message):  # one clear line instead of argparse's page-long usage dump
        raise UsageError(message)


def _our_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG, add_help=False, description="OpenRLHF train_ppo_ray flags plus the --recipe.* flags below."
    )
    parser.add_argument("-h", "--help", action="store_true", help="show this help and exit")
    run = parser.add_argument_group("run")
    run.add_argument(
        "--run.dry_run_enable",
        dest="dry_run",
        action="store_true",
        help="print the resolved command and configuration, exit 0",
    )
    parser.add_argument(
        "--recipe.name",
        dest="base_recipe",
        default=None,
        metavar="NAME|FILE|none",
        help="base recipe the flags given here overlay (default: the --recipe.method's reference "
        "recipe, e.g. lead-1.5b; none = OpenRLHF's defaults plus the method's)",
    )
    add_preflight_flags(parser)
    add_recipe_flags(parser)
    return parser


def parse_command_line(argv: list[str]):
    """Split argv into (our options, recipe namespace, OpenRLHF argv, resolved argv). The user's flags overlay the
    base recipe and the method's implied defaults are filled in (lead_recipes.training.args). Bad --recipe flags and
    missing required flags raise UsageError here, before anything is imported or started."""
    parser = _our_parser()
    ours, rest = parser.parse_known_args(argv)
    resolved = None
    if not ours.help:
        try:
            resolved = resolve(list(argv), parser)
        except RecipeError as exc:
            raise UsageError(f"--recipe.name: {exc}") from None
        ours, rest = parser.parse_known_args(resolved.argv)
    _refuse_unknown_flags(rest, option_strings(parser))
    if resolved is not None and resolved.missing:
        raise UsageError(
            f"missing required flag(s) {', '.join(resolved.missing)}\n  "
            + "; ".join(f"{flag}: {REQUIRED[flag]}" for flag in resolved.missing)
        )
    try:
        recipe = recipe_config(ours)
        validate(recipe)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return ours, recipe, rest, resolved


def _refuse_unknown_flags(rest: list[str], ours: set[str]) -> None:
    """UsageError for the first flag left over that OpenRLHF's parser lacks too (read from its source, no import;
    exact names only: OpenRLHF would accept an abbreviation). Without OpenRLHF only our own groups are checked."""
    try:
        theirs = option_strings(openrlhf_parser("train"))
    except RecipeError:
        theirs = None
    for token in rest:
        flag = token.split("=", 1)[0]
        if flag == "--":
            break
        if not flag.startswith("--") or flag in (theirs or ()):
            continue
        if theirs is not None or flag.startswith(("--recipe.", "--run.", "--preflight.")):
            raise UsageError(f"unknown flag {flag}{did_you_mean(flag, ours | (theirs or set()))}")


MIN_PROMPT_ROOM = 256  # fewest prompt tokens --data.max_len may leave beside the rollout cap


def recipe_conflicts(args) -> tuple[list[str], list[str]]:
    """(errors, warnings) about OpenRLHF settings the recipe cannot run with; all decidable from the args alone."""
    errors, warnings = [], []
    if args.algo.advantage.estimator not in ("group_norm", "dr_grpo"):
        errors.append(
            f"--algo.advantage.estimator {args.algo.advantage.estimator}: use group_norm (the --recipe.method "
            "replaces its group step; other estimators add a critic or batch whitening)"
        )
    if args.rollout.max_new_tokens is None:
        errors.append("--rollout.max_new_tokens is unset: the methods need the rollout cap (LEAD B_max, truncation)")
    cap, max_len = args.rollout.max_new_tokens, args.data.max_len
    if cap is not None and max_len is not None and max_len - cap < MIN_PROMPT_ROOM:
        # OpenRLHF keeps only the last max_len - max_new_tokens prompt tokens (SingleTurnAgentExecutor.execute):
        # no room at all is an error; little room (tiny test models use short prompts) is a warning
        room = max_len - cap
        (errors if room <= 0 else warnings).append(
            f"--data.max_len {max_len} minus --rollout.max_new_tokens {cap} leaves {room} prompt tokens "
            f"(< {MIN_PROMPT_ROOM}): OpenRLHF cuts longer prompts from the left without a message; raise "
            "--data.max_len (the cap plus ~1024)"
        )
    if tuple(args.reward.clip_range or ()) != tuple(openrlhf_default("reward.clip_range")):
        warnings.append(
            f"--reward.clip_range {' '.join(map(str, args.reward.clip_range))} has no effect: the "
            "method's advantage is the final reward (clipping it would cut the method's signal)"
        )
    urls = graded_by(args)
    if args.recipe.method == "adaptthink":
        errors += adaptthink_errors(args)
    if not urls or urls == ["agent"]:
        errors.append(
            "--reward.remote_url is unset: pass lead-recipes' reward function "
            f"({reward_func_path()}) or a `lead-recipes serve` URL; the plug-in reads extra_logs['correct']"
        )
    elif len(urls) > 1:
        warnings.append(
            "several --reward.remote_url values: OpenRLHF sends each one-sample request to the first "
            "URL only; use one URL (or a load balancer)"
        )
    if args.ckpt.disable_ds:  # OpenRLHF then skips the DeepSpeed save, yet a requested save would be marked done
        errors.append(
            "--ckpt.disable_ds: OpenRLHF then writes no DeepSpeed checkpoint, so nothing could resume "
            "this run (nor a save on request); drop --ckpt.disable_ds (--ckpt.save_hf adds HF weights)"
        )
    overlong_problems(args, errors, warnings)
    errors += monitor_errors(args, args.recipe.method)
    if args.reward.overlong_buffer_len is not None or args.reward.stop_properly_penalty_coef is not None:
        warnings.append(
            "DAPO overlong / stop-properly penalty on: the method adds its per-sample reward change to its length "
            "channel (else its reward) before group normalisation, logged as recipe/length_penalty_mean"
        )
    warnings += unread_settings(args.recipe)
    b_max = getattr(getattr(args.recipe, "lead", None), "b_max", None)
    # sections_read builds the method (imports torch), so it is asked last, only when the two caps differ
    if (
        b_max
        and args.rollout.max_new_tokens
        and b_max != args.rollout.max_new_tokens
        and "lead" in sections_read(args.recipe.method)
    ):
        warnings.append(
            f"--recipe.lead.b_max {b_max} differs from --rollout.max_new_tokens {args.rollout.max_new_tokens}"
        )
    return errors, warnings


def unread_settings(recipe) -> list[str]:
    """A warning per --recipe.<section>.* value off its default in a section the method does not read."""
    reads, default, out = entry(recipe.method).sections, RecipeConfig(), []
    for section in SECTIONS:
        if section in reads:
            continue
        for f in dataclasses.fields(SECTIONS[section]):
            value = getattr(getattr(recipe, section), f.name)
            if value != getattr(getattr(default, section), f.name):
                out.append(
                    f"{flag(section, f.name)} {value} has no effect: --recipe.method {recipe.method} does not read "
                    f"--recipe.{section}.*"
                )
    return out


def overlong_problems(args, errors: list[str], warnings: list[str]) -> None:
    """OpenRLHF's DAPO overlong / ProRL stop-properly flags that would not do what they say
    (docs/training.md#dapos-overlong-penalty)."""
    reward = args.reward
    if reward.overlong_buffer_len is None and reward.overlong_penalty_factor != openrlhf_default(
        "reward.overlong_penalty_factor"
    ):
        warnings.append(
            f"--reward.overlong_penalty_factor {reward.overlong_penalty_factor} has no effect without "
            "--reward.overlong_buffer_len"
        )
    errors += length_penalty_errors(args, args.recipe.method)


def plain(x):
    """A nested namespace or config as JSON-able data (inf/nan as strings)."""
    if isinstance(x, (SimpleNamespace, argparse.Namespace)) or dataclasses.is_dataclass(x):
        return {k: plain(v) for k, v in sorted(vars(x).items())}
    if isinstance(x, dict):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set)):
        return [plain(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return x if isinstance(x, (str, int, float, bool)) or x is None else str(x)


def dry_run_text(openrlhf_argv: list[str], recipe, args, warnings: list[str]) -> str:
    """The resolved command, OpenRLHF's equivalent and the validated configuration, then the warnings."""
    command = ["lead-recipes", "train", *openrlhf_argv, *recipe_argv(recipe, only_changed=False)]
    lines = [
        "# resolved command",
        shlex.join(command),
        "",
        "# equivalent OpenRLHF entry point (the recipe rides along as args.recipe)",
        shlex.join([sys.executable, "-m", "openrlhf.cli.train_ppo_ray", *openrlhf_argv]),
        "",
        "# configuration after OpenRLHF's validation",
        json.dumps(plain(args), indent=2),
    ]
    lines += [f"# warning: {w}" for w in warnings]
    return "\n".join(lines)


def _help(parser: argparse.ArgumentParser) -> str:
    text = parser.format_help()
    try:
        openrlhf = openrlhf_parser("train")
        openrlhf.formatter_class = HelpFormatter  # its defaults shown like ours
        text += "\nOpenRLHF train_ppo_ray flags (installed version):\n" + openrlhf.format_help()
    except Exception as exc:  # noqa: BLE001 - help must still print without the training stack
        text += f"\n(OpenRLHF's flags could not be listed: {exc})\n"
    return text


@contextlib.contextmanager
def held_output():
    """File descriptors 1 and 2 held in a temporary file while third-party code imports or starts: their banners
    (torch's pynvml FutureWarning, DeepSpeed's accelerator line, vLLM's Triton INFO, Ray's start-up lines) are not
    ours to print. Printed after all when the block fails, so nothing of a failure is lost."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile() as hold:
        os.dup2(hold.fileno(), 1)
        os.dup2(hold.fileno(), 2)
        failed = True
        try:
            yield
            failed = False
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            if failed:
                hold.seek(0)
                sys.stderr.write(hold.read().decode(errors="replace"))
                sys.stderr.flush()


def main(argv: list[str]) -> int:
    try:
        ours, recipe, openrlhf_argv, resolved = parse_command_line(list(argv))
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    if ours.help:
        print(_help(_our_parser()))
        return 0
    os.environ.update(resolved.env)  # the driver's copy; lead_recipes.training.actor_env forwards it into the actors
    print(
        f"{PROG}: base recipe {resolved.base or 'none (OpenRLHF defaults)'} (--recipe.name), overlaid by the "
        "flags given",
        file=sys.stderr,
    )
    for line in resolved.filled:
        print(mask_secrets(f"{PROG}: default {line}"), file=sys.stderr)
    try:
        args, messages = openrlhf_args(openrlhf_argv)
    except (OpenRLHFMismatch, OpenRLHFArgumentError) as exc:
        print(mask_secrets(f"{PROG}: error: {exc}"), file=sys.stderr)
        return 2
    except AssertionError as exc:
        print(f"{PROG}: error: OpenRLHF rejected the configuration: {current_flag_names(str(exc))}", file=sys.stderr)
        return 2
    args = with_recipe(args, recipe, openrlhf_argv)
    for message in messages:  # what OpenRLHF's validation changed or advises, in today's flag names
        print(mask_secrets(f"{PROG}: OpenRLHF: {message.removeprefix('[Warning] ')}", args), file=sys.stderr)
    errors, warnings = recipe_conflicts(args)
    if errors:  # the answer, alone: a dry run's whole configuration would bury it
        print(mask_secrets(f"{PROG}: error: " + "\n  ".join(errors), args), file=sys.stderr)
        return 2
    if ours.dry_run:
        print(mask_secrets(dry_run_text(openrlhf_argv, recipe, args, warnings), args))
        return 0
    for w in warnings:
        print(mask_secrets(f"{PROG}: warning: {w}", args), file=sys.stderr)
    if ours.preflight:  # nothing trains, so no checkpoint to request: SIGUSR1/SIGTERM keep their defaults
        return _preflight(ours, args, resolved)
    with SaveOnSignal(args.recipe_save_request).installed():
        return _preflight_and_train(ours, recipe, openrlhf_argv, resolved, args)


def _preflight(ours, args, resolved) -> int:
    """The preflight report; 1 with what is missing (and how to build missing prompt data), else 0."""
    with held_output():
        checks = run_preflight(args, skip=ours.preflight_skip)
    print(mask_secrets(report(checks), args), flush=True)
    if all(c.ok for c in checks):
        return 0
    missing = "; ".join(f"{c.name}: {c.detail}" for c in checks if not c.ok)
    print(mask_secrets(f"{PROG}: cannot start training, missing: {missing}", args), file=sys.stderr)
    for name, key, path in (
        ("data", "data.prompt_dataset", args.data.prompt_dataset),
        ("eval-data", "eval.dataset", args.eval.dataset),
    ):
        hint = (
            prepare_hint(path, recipe=resolved.base, key=key)
            if any(c.name == name and not c.ok for c in checks)
            else None
        )
        if hint:
            print(hint, file=sys.stderr)
    return 1


def _preflight_and_train(ours, recipe, openrlhf_argv, resolved, args) -> int:
    build_missing_data(args.data.prompt_dataset, recipe=resolved.base)  # from the source, when it is there
    monitor_set = getattr(getattr(args, "eval", None), "dataset", None)  # Laser-D's (data.prepare_eval)
    if monitor_set:
        build_missing_data(monitor_set, recipe=resolved.base, key="eval.dataset")
    failed = _preflight(ours, args, resolved)
    if failed:
        return failed
    with held_output():
        from lead_recipes.training import openrlhf_plugin as plugin  # torch, Ray, DeepSpeed, vLLM: seconds
    try:
        with forward_env_to_actors():
            plugin.run_openrlhf(openrlhf_argv, recipe)
    except Exception as exc:  # Ray re-raises the trainer's SavedOnRequest as a RayTaskError subclass of it
        failed = grading_failure(exc)
        if failed is not None:
            print(mask_secrets(f"{PROG}: error: {failed}", args), file=sys.stderr)
            return 1
        saved = saved_on_request(exc)
        if saved is None:
            raise
        print(
            f"{PROG}: checkpoint {saved.tag} saved on request at global_step {saved.step}; stopped. Resume with "
            "the same command plus --ckpt.load_enable",
            file=sys.stderr,
        )
        return PREEMPTED_EXIT
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
