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

ROOT = Path(__file__).resolve().parents[1]
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
