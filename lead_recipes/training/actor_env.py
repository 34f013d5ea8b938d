"""The driver's LEAD_RECIPES_* and WANDB_* environment forwarded into every Ray actor of the training job (Ray
workers inherit the raylet's environment, and OpenRLHF's `ray.init` forwards three variables): `forward_env_to_actors()`
adds them to `ray.init`'s runtime_env, or checks an initialised Ray already carries them (ActorEnvError).
It never forwards WANDB_API_KEY (Ray shows a job's runtime_env), starts Ray or changes the driver's environment.
See docs/training.md#environment-in-the-ray-actors.
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
    """While inside, `ray.init` adds `forwarded_vars(environ)` to its runtime_env["env_vars"] (values the caller set
    win); if Ray is already initialised, its job must carry the same values, else ActorEnvError names the missing."""
    import ray

    env = forwarded_vars(environ)
    if ray.is_initialized():
        missing = _missing_in_running_job(ray, env)
        if missing:
            raise ActorEnvError(
                f"Ray was initialised without these variables in its runtime_env, so the actors lack them: "
                f"{', '.join(missing)}.\nLet `lead-recipes train` call ray.init (RAY_ADDRESS joins a cluster), or "
                "pass them in ray.init(runtime_env=...)"
            )
        yield env
        return
    original = ray.init
    ray.init = RayInitWithEnv(original, env)
    try:
        yield env
    finally:
        ray.init = original
