"""The `lead-recipes` entry point. It only dispatches: each subcommand lives with its feature as `main(argv) -> int`
and is imported lazily, so `lead-recipes grade` never imports torch and `lead-recipes eval` never imports the
training stack. See README.md."""

from __future__ import annotations

import importlib
import sys

# subcommand -> (module exposing main(argv), one-line description)
COMMANDS = {
    "train": (
        "lead_recipes.training.cli",
        "train on OpenRLHF (train_ppo_ray flags + --recipe.*); a dry run, a preflight",
    ),
    "launch": (
        "lead_recipes.recipes.launch",
        "render a YAML recipe to a train command: --launch.target local|ray|slurm",
    ),
    "data": ("lead_recipes.data", "build OpenRLHF prompt datasets and GRPO-LEAD stage-2 curricula"),
    "grade": ("lead_recipes.grading.cli", "grade a JSONL of responses or extracted answers"),
    "serve": ("lead_recipes.reward.server", "run the remote reward server (OpenRLHF remote-RM protocol)"),
    "replay": ("lead_recipes.replay", "replay logged rollout statistics through a method and its controller"),
    "eval": ("evaluation.cli", "evaluate a model or saved generations on the five benchmarks"),
    "doctor": ("lead_recipes.training.doctor_cli", "check a GPU node for training: one line per check, its remedy"),
}


def _usage() -> str:
    lines = ["usage: lead-recipes COMMAND [flags]", "", "commands:"]
    lines += [f"  {name:<8} {desc}" for name, (_, desc) in COMMANDS.items()]
    lines += ["", "`lead-recipes COMMAND --help` shows a command's flags; `lead-recipes --version` the version."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    if argv[0] in ("-V", "--version"):
        from lead_recipes import __version__

        print(f"lead-recipes {__version__}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"lead-recipes: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
