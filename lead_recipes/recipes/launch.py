"""`lead-recipes launch RECIPE`: validate a YAML recipe, render its training command and run it here, submit it to
a Ray cluster or to Slurm (`--launch.target local|ray|slurm`); `--run.dry_run_enable` prints everything and submits
nothing, `--launch.chain_enable` also the stages the recipe continues (lead_recipes.recipes.chain). It checks that the
prompt dataset exists but starts no Ray or reward server itself. See docs/launch.md#lead-recipes-launch-recipe.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import yaml

from lead_recipes.help_format import ArgumentParser
from lead_recipes.recipes import RecipeError
from lead_recipes.recipes.chain import DATA_JOB
from lead_recipes.recipes.commands import (
    data_command,
    lead_recipes_exe,
    missing_data,
    ray_command,
    resources,
    sbatch_command,
    train_command,
)
from lead_recipes.recipes.layout import checkpoint_warning, no_steps, unseeded_file
from lead_recipes.recipes.recipe import load_recipe, recipe_names

REPO = Path(__file__).resolve().parents[2]
SBATCH_SCRIPT = REPO / "slurm" / "train.sbatch"
TRAIN_MODES = ("run", "dry_run", "preflight")
TARGETS = ("local", "ray", "slurm")


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="lead-recipes launch",
        description="render a YAML recipe to a train command and run or submit it: --launch.target local|ray|slurm",
        epilog=f"recipes: {', '.join(recipe_names())}",
    )
    p.add_argument("recipe", help="recipe name (file stem in launchers/recipes/) or path to a YAML file")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a recipe value: openrlhf.<flag>=v, recipe.<flag>=v, resources.<key>=v, or a bare "
        "OpenRLHF flag name (repeatable)",
    )
    la = p.add_argument_group("launch")
    la.add_argument(
        "--launch.target",
        dest="target",
        choices=TARGETS,
        help="local: run here (OpenRLHF starts a local Ray); ray: `ray job submit` to --ray.address; "
        "slurm: render and submit slurm/train.sbatch with sbatch (default: print only)",
    )
    la.add_argument(
        "--launch.train_mode",
        dest="train_mode",
        choices=TRAIN_MODES,
        default="run",
        help="the training step: run, or `lead-recipes train --run.dry_run_enable` / "
        "`--preflight.only_enable` (default run)",
    )
    la.add_argument(
        "--launch.data_check_enable",
        dest="data_check",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="refuse to submit while the local prompt dataset is missing",
    )
    la.add_argument(
        "--launch.chain_enable",
        dest="chain",
        action="store_true",
        help="also the stages RECIPE continues (`after:`), in order: target local runs them one after "
        "the other, slurm submits dependent jobs (afterok); a stage without its prompt data gets a "
        "data step",
    )
    run = p.add_argument_group("run")
    run.add_argument(
        "--run.dry_run_enable", dest="dry_run", action="store_true", help="print everything, run and submit nothing"
    )
    run.add_argument(
        "--run.dir", dest="run_dir", help="run directory (default ${run}: $LEAD_RECIPES_RUN_DIR or ./runs/<recipe>)"
    )
    s = p.add_argument_group("slurm", "target slurm (default: the recipe's resources section)")

    def recipe_value(key: str, what: str = "") -> str:
        return f"{what} (default: the recipe's resources.{key})".strip()

    s.add_argument("--slurm.nodes", dest="nodes", type=int, help=recipe_value("nodes"))
    s.add_argument("--slurm.gpus_per_node", dest="gpus_per_node", type=int, help=recipe_value("gpus_per_node"))
    s.add_argument(
        "--slurm.cpus_per_node",
        dest="cpus_per_node",
        type=int,
        help=recipe_value("cpus_per_node", "unset there: the smallest node of the partition, all its CPUs"),
    )
    s.add_argument("--slurm.partition", dest="partition", help=recipe_value("partition", "unset: the cluster's"))
    s.add_argument("--slurm.account", dest="account", help=recipe_value("account", "unset: your Slurm account"))
    s.add_argument("--slurm.time", dest="time", help=recipe_value("time", "wall time, e.g. 48:00:00"))
    s.add_argument("--slurm.qos", dest="qos", help=recipe_value("qos", "unset: the cluster's"))
    s.add_argument(
        "--slurm.reward_placement",
        dest="reward_placement",
        choices=("every_node", "head", "none"),
        help=recipe_value("reward_placement", "where `lead-recipes serve` runs"),
    )
    s.add_argument(
        "--slurm.reward_port",
        dest="reward_port",
        type=int,
        help=recipe_value("reward_port", "unset: 29000 + job id mod 3000, chosen by slurm/train.sbatch"),
    )
    s.add_argument(
        "--slurm.reward_workers",
        dest="reward_workers",
        type=int,
        help=recipe_value("reward_workers", "grading processes per reward server; unset: serve's --grade.workers"),
    )
    s.add_argument(
        "--slurm.signal_seconds",
        dest="signal_seconds",
        type=int,
        help=recipe_value("signal_seconds", "USR1 this many seconds before the time limit (checkpoint)"),
    )
    s.add_argument(
        "--slurm.save_timeout",
        dest="save_timeout",
        type=int,
        help="seconds the job waits for the requested checkpoint on USR1 (default: sized from the model "
        "by slurm/train.sbatch)",
    )
    for key, meaning in (
        ("partition", "partition"),
        ("time", "wall time"),
        ("cpus_per_node", "CPUs"),
        ("mem", "--mem"),
    ):
        default = DATA_JOB[key] or "the partition Slurm picks when none is named"
        s.add_argument(
            f"--slurm.data_{key}",
            dest=f"data_{key}",
            type=int if key == "cpus_per_node" else str,
            help=f"{meaning} of a chain's data steps (CPU jobs; default: {default})",
        )
    s.add_argument(
        "--slurm.resume_enable",
        dest="resume",
        action="store_true",
        help="a fresh submission resumes the run's checkpoint and W&B run (a requeued job always does)",
    )
    s.add_argument(
        "--slurm.sbatch_script",
        dest="sbatch_script",
        default=str(SBATCH_SCRIPT),
        help="the sbatch script (default: slurm/train.sbatch of this checkout)",
    )
    s.add_argument(
        "--slurm.sbatch_arg",
        dest="sbatch_arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra sbatch argument (repeatable; `--slurm.sbatch_arg=--mem=0` for one starting with -)",
    )
    r = p.add_argument_group("ray", "target ray (ray job submit)")
    r.add_argument(
        "--ray.address",
        dest="ray_address",
        metavar="ADDR",
        help="the cluster: ray job submit --address ADDR; no default: --launch.target ray needs it",
    )
    r.add_argument(
        "--ray.wait_enable",
        dest="wait",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="wait for the job to finish (off: ray job submit --no-wait)",
    )
    return p


def _parse(argv: list[str] | None):
    """Parsed arguments; an unknown flag or a target without what it needs is a usage error (exit 2)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if (args.target == "ray") != bool(args.ray_address):
        parser.error("--launch.target ray and --ray.address ADDR go together")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if args.chain:
        from lead_recipes.recipes import chain

        return chain.main(args)
    saved = os.environ.get("LEAD_RECIPES_RUN_DIR")
    if args.run_dir:
        os.environ["LEAD_RECIPES_RUN_DIR"] = os.path.abspath(args.run_dir)
    try:
        recipe = load_recipe(args.recipe, args.overrides)
        run_dir = Path(recipe.run_dir)
    except RecipeError as exc:
        print(f"lead-recipes launch: {exc}", file=sys.stderr)
        return 2
    finally:
        if args.run_dir:
            os.environ.pop("LEAD_RECIPES_RUN_DIR") if saved is None else os.environ.update(LEAD_RECIPES_RUN_DIR=saved)
    exe = lead_recipes_exe() if args.target in ("slurm", "local") else "lead-recipes"
    # Under Slurm the batch script appends the mode flag itself (after its own additions such as resume flags).
    cmd = train_command(recipe, "run" if args.target == "slurm" else args.train_mode, exe)
    if args.target == "slurm":
        try:
            submit = sbatch_command(recipe, args, run_dir, cmd)
        except RecipeError as exc:
            print(f"lead-recipes launch: {exc}", file=sys.stderr)
            return 2
    elif args.target == "ray":
        submit = ray_command(recipe, args, cmd)
    else:
        submit = cmd

    missing = missing_data(recipe)
    print(f"# recipe {recipe.name} ({recipe.path}): {recipe.description}")
    print(
        yaml.safe_dump(
            {"resources": resources(recipe, args), "openrlhf": recipe.openrlhf, "recipe": recipe.recipe},
            sort_keys=False,
            default_flow_style=False,
        ).rstrip()
    )
    print("# command:\n" + shlex.join(cmd))
    if submit is not cmd:
        print("# submit:\n" + shlex.join(submit))
    warning = checkpoint_warning(recipe)
    if warning:
        print(warning, file=sys.stderr)
    for item in missing:  # "key = path"; the hint is the data command whose --output is that path
        prep = data_command(recipe, item.split(" = ", 1)[1])
        hint = f"; build it with: lead-recipes data {shlex.join(prep)}" if prep else ""
        print(f"# missing dataset: {item}{hint}", file=sys.stderr)
    if args.dry_run or not args.target:
        if not args.dry_run:
            print("# (printed only: choose --launch.target local, ray (with --ray.address ADDR) or slurm to run)")
        return 0
    refused = unseeded_file(recipe) or no_steps(recipe)
    if refused and args.data_check:
        print(f"lead-recipes launch: {refused} (--no-launch.data_check_enable to go ahead anyway)", file=sys.stderr)
        return 2
    if missing and args.data_check and args.train_mode == "run":
        print(
            "lead-recipes launch: the prompt dataset is missing (see above); --no-launch.data_check_enable to "
            "submit anyway",
            file=sys.stderr,
        )
        return 2

    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "slurm").mkdir(exist_ok=True)
    record = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "recipe": recipe.to_dict(),
        "command": cmd,
        "submit": submit,
    }
    (run_dir / "launch.json").write_text(json.dumps(record, indent=1))
    if args.target == "local":
        return subprocess.call(cmd)
    proc = subprocess.run(submit, capture_output=args.target == "slurm", text=True)
    if args.target == "slurm":
        if proc.returncode != 0:
            print(f"lead-recipes launch: sbatch failed ({proc.returncode}): {proc.stderr.strip()}", file=sys.stderr)
            return proc.returncode
        job = re.split(r"[;\s]", proc.stdout.strip())[0]
        print(f"submitted Slurm job {job}; logs in {run_dir / 'slurm'}; run dir {run_dir}")
        (run_dir / "slurm" / "last_job_id").write_text(job + "\n")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
