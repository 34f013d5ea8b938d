"""lead_recipes.training.actor_env: the driver's LEAD_RECIPES_* / WANDB_* variables reach Ray actors of a cluster
started without them (as a Slurm job starts Ray before it exports WANDB_RUN_ID), the W&B key never travels, the
caller's own runtime_env values win, and a Ray initialised beforehand without them is refused."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from support.ports import free_port

from lead_recipes.training import actor_env

ROOT = Path(__file__).resolve().parents[2]


def test_forwarded_vars_are_ours_and_wandb_but_never_the_api_key():
    env = {
        "LEAD_RECIPES_GRADE_TIMEOUT_S": "7",
        "WANDB_RUN_ID": "abc",
        "WANDB_API_KEY": "secret",
        "PATH": "/bin",
        "XLEAD_RECIPES_X": "1",
    }
    assert actor_env.forwarded_vars(env) == {"LEAD_RECIPES_GRADE_TIMEOUT_S": "7", "WANDB_RUN_ID": "abc"}


def test_ray_init_inside_gets_the_variables_and_the_callers_values_win(monkeypatch):
    import ray

    calls = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda *a, **k: calls.append(k))
    original = ray.init
    with actor_env.forward_env_to_actors({"LEAD_RECIPES_A": "1", "WANDB_RUN_ID": "mine"}):
        ray.init(runtime_env={"env_vars": {"WANDB_RUN_ID": "explicit", "NCCL_DEBUG": "WARN"}, "pip": []})
    assert ray.init is original  # restored
    assert calls == [
        {
            "runtime_env": {
                "env_vars": {"LEAD_RECIPES_A": "1", "WANDB_RUN_ID": "explicit", "NCCL_DEBUG": "WARN"},
                "pip": [],
            }
        }
    ]


def test_the_ray_init_wrapper_pickles():
    import ray

    wrapper = actor_env.RayInitWithEnv(ray.init, {"LEAD_RECIPES_A": "1"})
    assert pickle.loads(pickle.dumps(wrapper)).env == {"LEAD_RECIPES_A": "1"}


def test_a_ray_initialised_before_without_the_variables_is_refused_naming_them(monkeypatch):
    import ray

    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    context = SimpleNamespace(runtime_env={"env_vars": {"LEAD_RECIPES_A": "1"}})
    monkeypatch.setattr(ray, "get_runtime_context", lambda: context)
    with actor_env.forward_env_to_actors({"LEAD_RECIPES_A": "1"}):
        pass  # carries them: accepted
    with pytest.raises(actor_env.ActorEnvError, match="WANDB_RUN_ID") as info:
        with actor_env.forward_env_to_actors({"LEAD_RECIPES_A": "1", "WANDB_RUN_ID": "x"}):
            pass
    assert "LEAD_RECIPES_A" not in str(info.value).split("them:")[1]


# ------------------------------------------------------------------ inside a real Ray actor


def _clean_env() -> dict:
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LEAD_RECIPES_", "WANDB_", "RAY_ADDRESS")) and k != "PYTHONPATH"
    }


class _Cluster:
    """A one-node Ray head started with none of our variables; stop() ends exactly its own processes (found by a
    tag in their environment), never `ray stop`."""

    def __init__(self):
        self.tag = uuid.uuid4().hex[:12]
        self.temp = tempfile.mkdtemp(prefix="rae-", dir="/tmp")  # short: Ray's unix socket paths are limited
        self.port = free_port()
        lo = 30000 + (os.getpid() % 200) * 100
        env = {**_clean_env(), "ACTOR_ENV_TEST": self.tag, "RAY_USAGE_STATS_ENABLED": "0"}
        cmd = [
            sys.executable,
            "-m",
            "ray.scripts.scripts",
            "start",
            "--head",
            "--block",
            "--num-cpus",
            "2",
            "--num-gpus",
            "0",
            "--temp-dir",
            self.temp,
            "--port",
            str(self.port),
            "--include-dashboard=false",
            "--node-ip-address",
            "127.0.0.1",
            "--ray-client-server-port",
            str(free_port()),
            "--dashboard-agent-listen-port",
            str(free_port()),
            "--min-worker-port",
            str(lo),
            "--max-worker-port",
            str(lo + 99),
            "--disable-usage-stats",
        ]
        self.proc = subprocess.Popen(
            cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        self.address = f"127.0.0.1:{self.port}"

    def pids(self) -> set[int]:
        import psutil

        found = set()
        try:
            found |= {self.proc.pid} | {c.pid for c in psutil.Process(self.proc.pid).children(recursive=True)}
        except psutil.NoSuchProcess:
            pass
        marker = f"ACTOR_ENV_TEST={self.tag}".encode()
        for pid in psutil.pids():
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if marker in f.read().split(b"\0"):
                        found.add(pid)
            except OSError:
                continue
        found.discard(os.getpid())
        return found

    def stop(self) -> None:
        import psutil

        for sig in (signal.SIGTERM, signal.SIGKILL):
            pids = self.pids()
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            psutil.wait_procs([psutil.Process(p) for p in pids if psutil.pid_exists(p)], timeout=10)
        self.proc.wait(timeout=30)
        shutil.rmtree(self.temp, ignore_errors=True)


_DRIVER = """
import contextlib, json, os, sys, ray
from lead_recipes.training.actor_env import forward_env_to_actors
KEYS = ("LEAD_RECIPES_GRADE_TIMEOUT_S", "LEAD_RECIPES_REWARD_URLS", "WANDB_RUN_ID", "WANDB_API_KEY")

@ray.remote(num_cpus=0)
class Probe:
    def env(self):
        return {k: os.environ.get(k) for k in KEYS}

with (forward_env_to_actors() if sys.argv[1] == "forward" else contextlib.nullcontext()):
    # the call OpenRLHF's train() makes
    ray.init(runtime_env={"env_vars": {"TOKENIZERS_PARALLELISM": "true"}}, log_to_driver=False)
print("ENV " + json.dumps(ray.get(Probe.remote().env.remote())))
"""


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_variables_exported_after_ray_start_reach_a_real_actor_and_the_key_does_not():
    cluster = _Cluster()
    env = {
        **_clean_env(),
        "RAY_ADDRESS": cluster.address,
        "PYTHONPATH": str(ROOT),
        "LEAD_RECIPES_GRADE_TIMEOUT_S": "7.5",
        "LEAD_RECIPES_REWARD_URLS": "http://h:1/get_reward",
        "WANDB_RUN_ID": "run-abc",
        "WANDB_API_KEY": "secret-key-123",
    }
    seen = {}
    try:
        deadline = time.monotonic() + 240
        for mode in ("plain", "forward"):
            while True:  # the head may still be starting
                out = subprocess.run(
                    [sys.executable, "-c", _DRIVER, mode],
                    env=env,
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                    timeout=240,
                )
                if out.returncode == 0 or time.monotonic() > deadline:
                    break
                time.sleep(2)
            assert out.returncode == 0, out.stderr[-3000:]
            seen[mode] = json.loads(out.stdout.split("ENV ", 1)[1].splitlines()[0])
    finally:
        cluster.stop()
    assert set(seen["plain"].values()) == {None}  # without forwarding nothing reaches the actor
    assert seen["forward"] == {
        "LEAD_RECIPES_GRADE_TIMEOUT_S": "7.5",
        "LEAD_RECIPES_REWARD_URLS": "http://h:1/get_reward",
        "WANDB_RUN_ID": "run-abc",
        "WANDB_API_KEY": None,
    }
