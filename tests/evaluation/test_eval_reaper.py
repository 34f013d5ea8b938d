"""evaluation/reaper.py on real processes: what a run starts after guard() dies when the run is SIGKILLed, and
nothing else does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = """
import subprocess, sys, time
from evaluation import reaper
before = subprocess.Popen(["sleep", "300"])  # started before guard(): not the run's to reap
reaper.guard()
child = subprocess.Popen(["sleep", "300"])
grandchild = subprocess.Popen(["sh", "-c", "sleep 300 & echo $!; wait"], stdout=subprocess.PIPE, text=True)
print(before.pid, child.pid, grandchild.pid, grandchild.stdout.readline().strip(), flush=True)
time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/environ").is_file(), reason="the reaper needs /proc (Linux)")
@pytest.mark.timeout(60)
def test_processes_started_after_guard_die_when_the_run_is_sigkilled_and_no_others():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run = subprocess.Popen([sys.executable, "-c", RUN], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    before, *marked = (int(x) for x in run.stdout.readline().split())
    try:
        assert all(_alive(p) for p in (before, *marked))
        os.kill(run.pid, signal.SIGKILL)
        run.wait(10)
        deadline = time.monotonic() + 15
        while any(_alive(p) for p in marked) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in marked if _alive(p)], "a process the run started outlived it"
        assert _alive(before), "a process started before guard() was killed"
    finally:
        for pid in (before, *marked):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


FORKED = """
import multiprocessing as mp, os, time
from evaluation import reaper

def child(ready):
    grandchild = os.fork()  # forked again, as vLLM's engine core may start its workers
    if grandchild == 0:
        time.sleep(300)
        os._exit(0)
    ready.send((os.getpid(), grandchild))
    time.sleep(300)

if __name__ == "__main__":
    reaper.guard()
    ctx = mp.get_context("fork")  # vLLM's default start method on a GPU (spawn is forced only on CPU, or once
    reader, writer = ctx.Pipe(duplex=False)  # CUDA is initialized): no exec, so no environment read at start
    ctx.Process(target=child, args=(writer,), daemon=False).start()
    print(*reader.recv(), flush=True)
    time.sleep(300)
"""


@pytest.mark.skipif(not Path("/proc/self/environ").is_file(), reason="the reaper needs /proc (Linux)")
@pytest.mark.timeout(60)
def test_processes_forked_after_guard_without_exec_die_when_the_run_is_sigkilled(tmp_path):
    """A forked child carries no environment of its own in /proc (it keeps its parent's from the parent's exec), so
    a mark set in os.environ does not show in it. vLLM forks its engine core on a GPU by default; it must die too."""
    script = tmp_path / "forked_run.py"
    script.write_text(FORKED)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run = subprocess.Popen([sys.executable, str(script)], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    marked = [int(x) for x in run.stdout.readline().split()]
    try:
        assert len(marked) == 2 and all(_alive(p) for p in marked)
        os.kill(run.pid, signal.SIGKILL)
        run.wait(10)
        deadline = time.monotonic() + 15
        while any(_alive(p) for p in marked) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in marked if _alive(p)], "a process the run forked outlived it"
    finally:
        for pid in marked:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
