"""`lead-recipes launch RECIPE`: render a YAML recipe to the full training command and run it locally, submit it to
an existing Ray cluster (`ray job submit`) or to Slurm (`sbatch slurm/train.sbatch`).

It validates the recipe first (lead_recipes.recipes.recipe: unknown keys, impossible layouts) and checks that a local prompt
dataset exists (printing the `lead-recipes data` command that builds it). `--dry-run` prints the resolved command,
the configuration and the submission command, and submits nothing. It does not start Ray or reward servers itself:
that is OpenRLHF's job (--local), the cluster's (--ray-address) or slurm/train.sbatch's (--slurm). `--chain` runs or
submits the stages a recipe continues (lead_recipes.recipes.chain).
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

from lead_recipes.recipes.commands import lead_recipes_exe, missing_data, ray_command, sbatch_command, train_command
from lead_recipes.recipes import RecipeError
from lead_recipes.recipes.layout import unseeded_file
from lead_recipes.recipes.recipe import load_recipe, placeholders, recipe_names
from lead_recipes.help_format import HelpFormatter

REPO = Path(__file__).resolve().parents[2]
SBATCH_SCRIPT = REPO / "slurm" / "train.sbatch"
TRAIN_MODES = ("run", "dry-run", "preflight")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lead-recipes launch", formatter_class=HelpFormatter, allow_abbrev=False, description=__doc__.split("\n\n")[0],
                                epilog=f"recipes: {', '.join(recipe_names())}")
    p.add_argument("recipe", help="recipe name (file stem in launchers/recipes/) or path to a YAML file")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a recipe value: openrlhf.<flag>=v, recipe.<flag>=v, resources.<key>=v, or a bare "
                        "OpenRLHF flag name (repeatable)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--local", action="store_true", help="run here; OpenRLHF starts a local Ray")
    where.add_argument("--ray-address", metavar="ADDR", help="submit with `ray job submit --address ADDR`")
    where.add_argument("--slurm", action="store_true", help="render and submit slurm/train.sbatch with sbatch")
    p.add_argument("--dry-run", action="store_true", help="print everything, run and submit nothing")
    p.add_argument("--train-mode", choices=TRAIN_MODES, default="run",
                   help="the training step: run, or `lead-recipes train --dry-run/--preflight` (default run)")
    p.add_argument("--run-dir", help="run directory (default ${run}: $LEAD_RECIPES_RUN_DIR or ./runs/<recipe>)")
    p.add_argument("--no-data-check", action="store_true", help="submit even if the local prompt dataset is missing")
    p.add_argument("--chain", action="store_true",
                   help="also the stages RECIPE continues (`after:`), in order: --local runs them one after the other, "
                        "--slurm submits dependent jobs (afterok); a stage without its prompt data gets a data step")
    s = p.add_argument_group("slurm (default: the recipe's resources section)")
    s.add_argument("--nodes", type=int)
    s.add_argument("--gpus-per-node", type=int)
    s.add_argument("--cpus-per-node", type=int)
    s.add_argument("--partition")
    s.add_argument("--account")
    s.add_argument("--time", help="wall time, e.g. 48:00:00")
    s.add_argument("--qos")
    s.add_argument("--reward-placement", choices=("every_node", "head", "none"))
    s.add_argument("--reward-port", type=int)
    s.add_argument("--signal-seconds", type=int, help="USR1 this many seconds before the time limit (checkpoint)")
    s.add_argument("--save-timeout", type=int, help="seconds the job waits for the requested checkpoint on USR1 "
                                                     "(default: sized from the model by slurm/train.sbatch)")
    s.add_argument("--resume", action="store_true", help="a fresh submission resumes the run's checkpoint and W&B run "
                                                         "(a requeued job always does)")
    s.add_argument("--sbatch-script", default=str(SBATCH_SCRIPT), help=f"default {SBATCH_SCRIPT}")
    s.add_argument("--sbatch-arg", action="append", default=[], metavar="ARG", help="extra sbatch argument")
    r = p.add_argument_group("ray job submit")
    r.add_argument("--no-wait", action="store_true", help="return after submitting (ray job submit --no-wait)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.chain:
        from lead_recipes.recipes import chain
        return chain.main(args)
    saved = os.environ.get("LEAD_RECIPES_RUN_DIR")
    if args.run_dir:
        os.environ["LEAD_RECIPES_RUN_DIR"] = os.path.abspath(args.run_dir)
    try:
        recipe = load_recipe(args.recipe, args.overrides)
        run_dir = Path(placeholders(recipe.name)["run"])
    except RecipeError as exc:
        print(f"lead-recipes launch: {exc}", file=sys.stderr)
        return 2
    finally:
        if args.run_dir:
            os.environ.pop("LEAD_RECIPES_RUN_DIR") if saved is None else os.environ.update(LEAD_RECIPES_RUN_DIR=saved)
    exe = lead_recipes_exe() if (args.slurm or args.local) else "lead-recipes"
    # Under Slurm the batch script appends the mode flag itself (after its own additions such as resume flags).
    cmd = train_command(recipe, "run" if args.slurm else args.train_mode, exe)
    if args.slurm:
        try:
            submit = sbatch_command(recipe, args, run_dir, cmd)
        except RecipeError as exc:
            print(f"lead-recipes launch: {exc}", file=sys.stderr)
            return 2
    elif args.ray_address:
        submit = ray_command(recipe, args, cmd)
    else:
        submit = cmd

    missing = missing_data(recipe)
    print(f"# recipe {recipe.name} ({recipe.path}): {recipe.description}")
    print(yaml.safe_dump({"resources": recipe.resources, "openrlhf": recipe.openrlhf, "recipe": recipe.recipe},
                         sort_keys=False, default_flow_style=False).rstrip())
    print("# command:\n" + shlex.join(cmd))
    if submit is not cmd:
        print("# submit:\n" + shlex.join(submit))
    for item in missing:
        prep = recipe.data.get("prepare")
        hint = f"; build it with: lead-recipes data {shlex.join(prep)}" if prep else ""
        print(f"# missing dataset: {item}{hint}", file=sys.stderr)
    if args.dry_run or not (args.local or args.slurm or args.ray_address):
        if not args.dry_run:
            print("# (printed only: choose --local, --ray-address ADDR or --slurm to run)")
        return 0
    unseeded = unseeded_file(recipe)
    if unseeded and not args.no_data_check:
        print(f"lead-recipes launch: {unseeded} (--no-data-check to go ahead anyway)", file=sys.stderr)
        return 2
    if missing and not args.no_data_check and args.train_mode == "run":
        print("lead-recipes launch: the prompt dataset is missing (see above); --no-data-check to submit anyway",
              file=sys.stderr)
        return 2

    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "slurm").mkdir(exist_ok=True)
    record = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "recipe": recipe.to_dict(), "command": cmd,
              "submit": submit}
    (run_dir / "launch.json").write_text(json.dumps(record, indent=1))
    if args.local:
        return subprocess.call(cmd)
    proc = subprocess.run(submit, capture_output=bool(args.slurm), text=True)
    if args.slurm:
        if proc.returncode != 0:
            print(f"lead-recipes launch: sbatch failed ({proc.returncode}): {proc.stderr.strip()}", file=sys.stderr)
            return proc.returncode
        job = re.split(r"[;\s]", proc.stdout.strip())[0]
        print(f"submitted Slurm job {job}; logs in {run_dir / 'slurm'}; run dir {run_dir}")
        (run_dir / "slurm" / "last_job_id").write_text(job + "\n")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
