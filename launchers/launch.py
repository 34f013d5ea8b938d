"""`lead-recipes launch RECIPE`: render a YAML recipe to the full training command and run it locally, submit it to
an existing Ray cluster (`ray job submit`) or to Slurm (`sbatch slurm/train.sbatch`).

It validates the recipe first (launchers.recipe: unknown keys, impossible layouts) and checks that a local prompt
dataset exists (printing the `lead-recipes data` command that builds it). `--dry-run` prints the resolved command,
the configuration and the submission command, and submits nothing. It does not start Ray or reward servers itself:
that is OpenRLHF's job (--local), the cluster's (--ray-address) or slurm/train.sbatch's (--slurm). `--chain` runs or
submits the stages a recipe continues (launchers.chain).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from launchers.recipe import RecipeError, load_recipe, placeholders, recipe_names, unseeded_file

REPO = Path(__file__).resolve().parents[1]
SBATCH_SCRIPT = REPO / "slurm" / "train.sbatch"
TRAIN_MODES = ("run", "dry-run", "preflight")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lead-recipes launch", allow_abbrev=False, description=__doc__.split("\n\n")[0],
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


def lead_recipes_exe() -> str:
    """Absolute path of the `lead-recipes` console script of this interpreter (so batch jobs use the same venv)."""
    beside = Path(sys.executable).parent / "lead-recipes"
    return str(beside) if beside.exists() else (shutil.which("lead-recipes") or "lead-recipes")


def train_command(recipe, mode: str = "run", exe: str = "lead-recipes") -> list[str]:
    cmd = recipe.command()
    if recipe.entrypoint == "train":
        return [exe, *cmd[1:]] + {"run": [], "dry-run": ["--dry-run"], "preflight": ["--preflight"]}[mode]
    if exe != "lead-recipes" and (Path(exe).parent / cmd[0]).exists():   # e.g. the venv's deepspeed launcher
        cmd[0] = str(Path(exe).parent / cmd[0])
    return cmd


def missing_data(recipe) -> list[str]:
    """Local dataset paths named by the recipe that do not exist (HF hub ids are not checked here)."""
    out = []
    for key in ("data.prompt_dataset", "data.dataset", "eval.dataset"):
        value = recipe.openrlhf.get(key)
        for item in str(value).split(",") if value else []:
            if (item.startswith(("/", ".")) or item.endswith((".jsonl", ".json", ".parquet"))) \
                    and not Path(item).exists():
                out.append(f"{key} = {item}")
    return out


def slurm_seconds(limit: str) -> int | None:
    """Slurm's --time forms (M, M:S, H:M:S, D-H, D-H:M, D-H:M:S) in seconds; None if unparsable."""
    m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", limit.strip())
    if not m:
        return None
    d, a, b, c = (int(x) if x else None for x in m.groups())
    if d is not None:  # D-H[:M[:S]]
        return ((d * 24 + a) * 60 + (b or 0)) * 60 + (c or 0)
    return a * 3600 + b * 60 + c if c is not None else (a * 60 + b if b is not None else a * 60)


def node_cpus(partition: str | None) -> int | None:
    """CPUs of the smallest node of the partition (all nodes without one), from sinfo; None without Slurm."""
    try:
        out = subprocess.run(["sinfo", "-h", "-N", "-o", "%c", *(["-p", partition] if partition else [])],
                             capture_output=True, text=True, timeout=30).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        return None
    counts = [int(c) for c in out if c.isdigit()]
    return min(counts) if counts else None


def sbatch_command(recipe, args, run_dir: Path, cmd: list[str]) -> list[str]:
    res = dict(recipe.resources)
    for key in ("nodes", "gpus_per_node", "cpus_per_node", "partition", "account", "time", "qos", "reward_placement",
                "reward_port", "signal_seconds", "save_timeout"):
        if getattr(args, key, None) is not None:
            res[key] = getattr(args, key)
    limit = slurm_seconds(str(res["time"]))
    if limit is not None and limit <= res["signal_seconds"]:
        raise RecipeError(f"resources.time {res['time']} is not longer than the USR1 lead time of "
                          f"{res['signal_seconds']} s (resources.signal_seconds): the job would be signalled at start")
    # No CPU request gives one CPU on many clusters, and OpenRLHF then waits forever for a CPU per GPU: ask for the
    # whole node's CPUs (the smallest node of the partition) unless the recipe says how many.
    if not res.get("cpus_per_node"):
        res["cpus_per_node"] = node_cpus(res.get("partition"))
    logs = run_dir / "slurm"
    sb = ["sbatch", "--parsable", f"--job-name={recipe.name}", f"--nodes={res['nodes']}", "--ntasks-per-node=1",
          f"--time={res['time']}", f"--output={logs}/%x-%j.out"]
    # The script's header asks for --requeue: `requeue: false` must say --no-requeue (and --max-restarts 0 below).
    # USR1 still comes before the time limit, so the run ends on a checkpoint either way.
    sb += ["--requeue" if res["requeue"] else "--no-requeue", f"--signal=B:USR1@{res['signal_seconds']}"]
    if res["gpus_per_node"]:
        sb.append(f"--gpus-per-node={res['gpus_per_node']}")
    for key in ("partition", "account", "qos", "mem", "constraint"):
        if res.get(key):
            sb.append(f"--{key}={res[key]}")
    if res.get("cpus_per_node"):
        sb.append(f"--cpus-per-task={res['cpus_per_node']}")
    sb += list(args.sbatch_arg)
    sb += [args.sbatch_script, "--run-dir", str(run_dir), "--gpus-per-node", str(res["gpus_per_node"]),
           "--reward-placement", res["reward_placement"], "--train-mode", args.train_mode,
           "--signal-seconds", str(res["signal_seconds"])]
    if res.get("reward_port"):
        sb += ["--reward-port", str(res["reward_port"])]
    if res.get("save_timeout") is not None:
        sb += ["--save-timeout", str(res["save_timeout"])]
    if args.resume:
        sb += ["--resume"]
    if not res["requeue"]:
        sb += ["--max-restarts", "0"]
    if res.get("cpus_per_node"):
        sb += ["--cpus-per-node", str(res["cpus_per_node"])]
    if res.get("reward_workers"):
        sb += ["--reward-workers", str(res["reward_workers"])]
    if recipe.entrypoint != "train":
        sb += ["--no-ray"]
    return sb + ["--", *cmd]


def ray_command(recipe, args, cmd: list[str]) -> list[str]:
    sub = ["ray", "job", "submit", "--address", args.ray_address,
           "--submission-id", f"{recipe.name}-{time.strftime('%Y%m%d-%H%M%S')}"]
    if args.no_wait:
        sub.append("--no-wait")
    return sub + ["--", *cmd]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.chain:
        from launchers import chain
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
