"""`lead-recipes launch RECIPE --launch.chain_enable`: run or submit RECIPE together with the stages it continues
(`after:` in the recipe files), in order, each in its own ``${run:NAME}``. A stage whose prompt dataset does not exist
yet gets its `lead-recipes data` step first. Locally the steps run one after the other, stopping at the first
failure; under Slurm each is a job that depends on the previous one (afterok). It starts no Ray or reward server.
Docs: docs/launch.md (chains), docs/recipes.md#chains-grpo-lead-14b-l1-max.
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
from lead_recipes.recipes.recipe import RESOURCE_DEFAULTS, load_recipe, run_dir_of


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


def _data_steps(recipe) -> list[list[str]]:
    """The `lead-recipes data` arguments still to run: data.prepare when the recipe's dataset is missing,
    data.prepare_eval when its eval dataset (Laser-D's monitor set) is."""
    out = []
    for key, path in (("prepare", _dataset(recipe)), ("prepare_eval", recipe.openrlhf.get("eval.dataset"))):
        if recipe.data.get(key) and path is not None and not Path(str(path)).exists():
            out.append([str(a) for a in recipe.data[key]])
    return out


# A data step's job: CPU only, small and short (a DeepScaleR build or a curriculum takes minutes), so not the training
# partition, time or qos; the training job's account. Each value has its --slurm.data_* flag.
DATA_JOB = {"partition": None, "time": "02:00:00", "cpus_per_node": 4, "mem": "16G"}


def _is_path(arg: str) -> bool:
    return arg.startswith(("/", ".")) or arg.endswith((".jsonl", ".json", ".parquet"))


def missing_inputs(plan) -> dict[int, list[str]]:
    """{step index: the files its data command reads that neither exist nor come from an earlier step}: an earlier
    data step's --output, or anything under an earlier stage's run directory (its records, its model)."""
    made, out = [], {}
    for i, (kind, _, run_dir, cmd, _) in enumerate(plan):
        if kind == "train":
            made.append(str(run_dir))
            continue
        writes = {cmd[j + 1] for j, a in enumerate(cmd[:-1]) if a in ("--output", "--data.report")}
        reads = [a for a in cmd[2:] if _is_path(a) and a not in writes]
        lacking = [a for a in reads if not any(a == m or a.startswith(m + "/") for m in made) and not Path(a).exists()]
        if lacking:
            out[i] = lacking
        made += sorted(writes)
    return out


def _data_sbatch(recipe, args, run_dir: Path, command: list[str]) -> list[str]:
    """A CPU-only job of slurm/train.sbatch (no Ray, no reward server) that runs `lead-recipes data ...`."""
    from lead_recipes.recipes.commands import slurm_seconds

    job = {k: getattr(args, f"data_{k}", None) or v for k, v in DATA_JOB.items()}
    lead = RESOURCE_DEFAULTS["signal_seconds"]  # the script header's --signal=B:USR1@600
    if (slurm_seconds(str(job["time"])) or lead + 1) <= lead:
        raise RecipeError(f"--slurm.data_time {job['time']} is not longer than the script's USR1 lead time ({lead} s)")
    account = args.account or recipe.resources.get("account")
    sb = [
        "sbatch",
        "--parsable",
        f"--job-name={recipe.name}-data",
        "--nodes=1",
        "--ntasks-per-node=1",
        f"--time={job['time']}",
        f"--cpus-per-task={job['cpus_per_node']}",
        f"--mem={job['mem']}",  # else the script header's --mem=0: a whole node's memory
        f"--output={run_dir / 'slurm'}/%x-%j.out",
    ]
    sb += [f"--partition={job['partition']}"] if job["partition"] else []
    sb += [f"--account={account}"] if account else []
    return sb + [
        args.sbatch_script,
        "--run.dir",
        str(run_dir),
        "--slurm.gpus_per_node",
        "0",
        "--slurm.cpus_per_node",
        str(job["cpus_per_node"]),
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
        for prepare in _data_steps(recipe):
            cmd = [exe, "data", *prepare]
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
        plan = steps(stages, args)
    except RecipeError as exc:
        print(f"lead-recipes launch: {exc}", file=sys.stderr)
        return 2
    missing = missing_inputs(plan)
    for i, files in missing.items():  # first, before the plan scrolls by
        kind, recipe = plan[i][:2]
        print(f"# missing input of step {i + 1} ({kind} {recipe.name}): {', '.join(files)}", file=sys.stderr)
    print(f"# chain: {' -> '.join(r.name for r in stages)}")
    for i, (kind, recipe, run_dir, cmd, sb) in enumerate(plan):
        lacking = "".join(f"\n# missing input: {f} (no earlier step writes it)" for f in missing.get(i, []))
        print(f"# step {i + 1}: {kind} {recipe.name} (run dir {run_dir}){lacking}\n{shlex.join(cmd)}")
        if sb is not None:  # the job id sbatch gives step i, which this one waits for
            after = f" (after step {i}'s job)" if i else ""
            print(f"# submit{after}:\n" + shlex.join(_with_dependency(sb, f"<job of step {i}>" if i else None)))
    if args.dry_run or args.target not in ("local", "slurm"):
        return 0
    if missing and args.data_check:
        print(
            "lead-recipes launch: an input of a data step is missing (see above); --no-launch.data_check_enable to "
            "go ahead anyway",
            file=sys.stderr,
        )
        return 2
    job = None
    for kind, recipe, run_dir, cmd, sb in plan:
        (run_dir / "slurm").mkdir(parents=True, exist_ok=True)
        submit = None if sb is None else _with_dependency(sb, job)
        if kind == "train":
            record = {
                "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "recipe": recipe.to_dict(),
                "command": cmd,
                "submit": submit,
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
        proc = subprocess.run(submit, capture_output=True, text=True)
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
