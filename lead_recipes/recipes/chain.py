"""`lead-recipes launch RECIPE --launch.chain_enable`: run or submit RECIPE together with the stages it continues
(`after:` in the recipe files), in order, each in its own ``${run:NAME}``. A stage whose prompt dataset does not exist
yet gets its `lead-recipes data` step first. Locally the steps run one after the other, stopping at the first
failure; under Slurm each is a job that depends on the previous one (afterok). It starts no Ray or reward server.
Docs: docs/launch.md (chains), docs/recipes.md#chains-grpo-lead-14b.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

from lead_recipes.recipes import RecipeError
from lead_recipes.recipes.recipe import load_recipe, run_dir_of


def chain_of(name: str) -> list:
    """The recipes of the chain ending at `name`, first stage first (RecipeError on an `after` cycle)."""
    stages, seen = [], set()
    while name is not None:
        if name in seen:
            raise RecipeError(f"'after' cycle: {' <- '.join([r.name for r in stages] + [name])}")
        seen.add(name)
        recipe = load_recipe(name)
        stages.append(recipe)
        name = recipe.after
    return stages[::-1]


def _dataset(recipe) -> str | None:
    return recipe.openrlhf.get("data.prompt_dataset" if recipe.entrypoint == "train" else "data.dataset")


def _needs_data(recipe) -> bool:
    path = _dataset(recipe)
    return bool(recipe.data.get("prepare")) and path is not None and not Path(path).exists()


def _missing_sources(stages) -> list[str]:
    """`--input` files of data steps that no stage writes (sources are never produced by a stage)."""
    out = []
    for recipe in stages:
        prepare = [str(a) for a in recipe.data.get("prepare") or []]
        if _needs_data(recipe) and "--input" in prepare[:-1]:
            source = prepare[prepare.index("--input") + 1]
            if not Path(source).exists():
                out.append(f"{recipe.name}: {source}")
    return out


def _data_sbatch(recipe, args, run_dir: Path, command: list[str]) -> list[str]:
    """A CPU-only job of slurm/train.sbatch (no Ray, no reward server) that runs `lead-recipes data ...`."""
    res = recipe.resources
    sb = [
        "sbatch",
        "--parsable",
        f"--job-name={recipe.name}-data",
        "--nodes=1",
        "--ntasks-per-node=1",
        f"--time={args.time or res['time']}",
        f"--output={run_dir / 'slurm'}/%x-%j.out",
    ]
    for key in ("partition", "account", "qos"):
        value = getattr(args, key, None) or res.get(key)
        if value:
            sb.append(f"--{key}={value}")
    return sb + [
        args.sbatch_script,
        "--run.dir",
        str(run_dir),
        "--slurm.gpus_per_node",
        "0",
        "--slurm.reward_placement",
        "none",
        "--no-sbatch.ray_enable",
        "--",
        *command,
    ]


def _with_dependency(sbatch: list[str], job: str | None) -> list[str]:
    # --kill-on-invalid-dep: when a stage fails its afterok can never be met, and without it Slurm leaves every later
    # stage pending (reason DependencyNeverSatisfied) until someone cancels it by hand.
    return (
        sbatch if job is None else [sbatch[0], f"--dependency=afterok:{job}", "--kill-on-invalid-dep=yes", *sbatch[1:]]
    )


def steps(stages, args) -> list[tuple[str, object, Path, list[str], list[str] | None]]:
    """(kind "data"/"train", recipe, run dir, command, sbatch argv or None) for every step of the chain."""
    from lead_recipes.recipes.commands import lead_recipes_exe, sbatch_command, train_command

    exe = lead_recipes_exe() if args.target in ("slurm", "local") else "lead-recipes"
    slurm = args.target == "slurm"
    out = []
    for recipe in stages:
        run_dir = Path(run_dir_of(recipe.name))
        if _needs_data(recipe):
            cmd = [exe, "data", *[str(a) for a in recipe.data["prepare"]]]
            out.append(("data", recipe, run_dir, cmd, _data_sbatch(recipe, args, run_dir, cmd) if slurm else None))
        cmd = train_command(recipe, "run" if slurm else args.train_mode, exe)
        out.append(("train", recipe, run_dir, cmd, sbatch_command(recipe, args, run_dir, cmd) if slurm else None))
    return out


def main(args) -> int:
    """`launch --launch.chain_enable` (args: lead_recipes.recipes.launch's parsed arguments)."""
    if args.overrides or args.run_dir or args.target == "ray":
        print(
            "lead-recipes launch: --launch.chain_enable takes no --set/--run.dir/--launch.target ray (each stage is\n"
            "its own recipe, run in ${run:NAME}; set $LEAD_RECIPES_RUNS to move all of them)",
            file=sys.stderr,
        )
        return 2
    try:
        stages = chain_of(args.recipe)
    except RecipeError as exc:
        print(f"lead-recipes launch: {exc}", file=sys.stderr)
        return 2
    plan = steps(stages, args)
    print(f"# chain: {' -> '.join(r.name for r in stages)}")
    for i, (kind, recipe, run_dir, cmd, sb) in enumerate(plan):
        print(f"# step {i + 1}: {kind} {recipe.name} (run dir {run_dir})\n{shlex.join(cmd)}")
        if sb is not None:
            print("# submit" + (" (after the previous step's job)" if i else "") + ":\n" + shlex.join(sb))
    missing = _missing_sources(stages)
    for item in missing:
        print(f"# missing source: {item}", file=sys.stderr)
    if args.dry_run or args.target not in ("local", "slurm"):
        return 0
    if missing and args.data_check:
        print(
            "lead-recipes launch: a data source is missing (see above); --no-launch.data_check_enable to go "
            "ahead anyway",
            file=sys.stderr,
        )
        return 2
    job = None
    for kind, recipe, run_dir, cmd, sb in plan:
        (run_dir / "slurm").mkdir(parents=True, exist_ok=True)
        if kind == "train":
            record = {
                "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "recipe": recipe.to_dict(),
                "command": cmd,
                "submit": sb,
                "chain": [r.name for r in stages],
            }
            (run_dir / "launch.json").write_text(json.dumps(record, indent=1))
        if args.target == "local":
            rc = subprocess.call(cmd)
            if rc != 0:
                print(
                    f"lead-recipes launch: {kind} step of {recipe.name} failed ({rc}); the chain stops here",
                    file=sys.stderr,
                )
                return rc
            continue
        proc = subprocess.run(_with_dependency(sb, job), capture_output=True, text=True)
        if proc.returncode != 0:
            print(
                f"lead-recipes launch: sbatch failed for the {kind} step of {recipe.name} ({proc.returncode}): "
                f"{proc.stderr.strip()}",
                file=sys.stderr,
            )
            return proc.returncode
        job = re.split(r"[;\s]", proc.stdout.strip())[0]
        print(f"submitted Slurm job {job}: {kind} {recipe.name}")
        if kind == "train":
            (run_dir / "slurm" / "last_job_id").write_text(job + "\n")
    return 0
