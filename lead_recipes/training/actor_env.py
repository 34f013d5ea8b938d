"""The driver's LEAD_RECIPES_* and WANDB_* environment, forwarded into every Ray actor of the training job.

Why: Ray workers inherit the environment of the raylet that started them, not the driver's, and OpenRLHF's
`train()` calls `ray.init` with only three variables in its runtime environment. So the grader settings read in the
rollout actors (LEAD_RECIPES_GRADE_TIMEOUT_S, LEAD_RECIPES_GRADE_WORKERS), the reward-server URLs of
lead_recipes/grading/remote_reward.py (LEAD_RECIPES_REWARD_URLS) and a W&B run id exported after `ray start`
(WANDB_RUN_ID, as a Slurm script does) never reached the processes that use them.

What it does: `forward_env_to_actors()` is a context manager around the training run. Inside it, `ray.init` adds
`forwarded_vars()` to the call's `runtime_env["env_vars"]` (values the caller set explicitly win), which Ray applies
to every worker of the job, on every node. If Ray is already initialised when it is entered, that job's runtime
environment must already carry the same values, else it raises ActorEnvError naming the missing variables.

What it does not do: forward WANDB_API_KEY. Ray records a job's runtime environment where anyone with dashboard or
state-API access can read it, and the trainer does not need it there: OpenRLHF logs in with `--logger.wandb.key`,
which reaches the actors in the arguments. It does not start Ray, and never changes the environment of the driver.
"""
from __future__ import annotations

import contextlib
import os

FORWARD_PREFIXES = ("LEAD_RECIPES_", "WANDB_")
NEVER_FORWARD = frozenset({"WANDB_API_KEY"})


class ActorEnvError(RuntimeError):
    """Ray was initialised before the run without the environment the actors need."""


def forwarded_vars(environ=None) -> dict[str, str]:
    """The variables the actors get: every LEAD_RECIPES_* and WANDB_* of `environ` (default: this process) except
    NEVER_FORWARD."""
    environ = os.environ if environ is None else environ
    return {k: v for k, v in sorted(environ.items()) if k.startswith(FORWARD_PREFIXES) and k not in NEVER_FORWARD}


def with_forwarded(runtime_env: dict | None, env: dict[str, str]) -> dict:
    """`runtime_env` with `env` added under env_vars; variables already there keep their value."""
    merged = dict(runtime_env or {})
    merged["env_vars"] = {**env, **dict(merged.get("env_vars") or {})}
    return merged


class RayInitWithEnv:
    """Stands in for `ray.init` while a run is on: the same call with the forwarded variables added. A top-level
    class (not a closure), so it pickles by reference should Ray ever ship it."""

    def __init__(self, original, env: dict[str, str]):
        self.original, self.env = original, env

    def __call__(self, *args, **kwargs):
        kwargs["runtime_env"] = with_forwarded(kwargs.get("runtime_env"), self.env)
        return self.original(*args, **kwargs)


def _missing_in_running_job(ray, env: dict[str, str]) -> list[str]:
    have = dict((ray.get_runtime_context().runtime_env or {}).get("env_vars") or {})
    return [k for k, v in env.items() if have.get(k) != v]


@contextlib.contextmanager
def forward_env_to_actors(environ=None):
    """While inside, `ray.init` forwards `forwarded_vars(environ)` into the job's actors (module docstring)."""
    import ray
    env = forwarded_vars(environ)
    if ray.is_initialized():
        missing = _missing_in_running_job(ray, env)
        if missing:
            raise ActorEnvError(
                "Ray was initialised before the training run without these variables in its runtime_env env_vars, "
                f"so the actors would not see them: {', '.join(missing)}. Let `lead-recipes train` call ray.init "
                "(set RAY_ADDRESS to join a running cluster), or pass them in ray.init(runtime_env=...)")
        yield env
        return
    original = ray.init
    ray.init = RayInitWithEnv(original, env)
    try:
        yield env
    finally:
        ray.init = original
