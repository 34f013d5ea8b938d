"""Processes an evaluation run starts die with it. vLLM's engine processes do not watch their parent: after a
SIGKILL of the run (`kill -9`, the OOM killer) they would hold their GPUs against the rerun. `guard()` marks what
this process starts from then on (an inherited environment variable for what is exec'd, an inherited pipe for what
is forked) and starts a watchdog that SIGKILLs every marked process once this one is gone. Linux only (it reads
/proc); elsewhere a no-op. Stdlib only: the watchdog runs this file. See docs/evaluation.md#generation-and-durability.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

MARK = "LEAD_EVAL_OWNER"
_token: list = []  # this process's mark and the pipe end that forked children inherit, once guard() ran


def guard() -> str | None:
    """Mark this process's future children and start their watchdog (once per process). Returns the mark, or None
    where there is no /proc. A child that calls it marks its own children anew, and its watchdog reaps them."""
    if _token and os.environ.get(MARK) == _token[0]:
        return _token[0]
    if not Path("/proc/self/environ").is_file():
        return None
    token = f"{os.getpid()}-{secrets.token_hex(6)}"
    # /proc/PID/environ is the environment a process was exec'd with: a child forked without exec (vLLM's engine
    # core on a GPU, by default) shows its parent's, without the mark. It does inherit every open descriptor, so
    # it also holds this pipe's write end (kept open, never written); an exec'd child does not (close-on-exec).
    _, pipe_w = os.pipe()
    pipe = f"pipe:[{os.fstat(pipe_w).st_ino}]"
    env = {k: v for k, v in os.environ.items() if k != MARK}  # the watchdog is not one of the reaped
    subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), str(os.getpid()), token, pipe],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        start_new_session=True,  # a Ctrl-C or a signal to the run's process group does not stop it before its work
    )
    os.environ[MARK] = token
    _token[:] = [token, pipe_w]
    return token


def _holds(proc: Path, pipe: str) -> bool:
    for fd in (proc / "fd").iterdir():
        try:
            if os.readlink(fd) == pipe:
                return True
        except OSError:  # closed meanwhile
            continue
    return False


def kill_marked(token: str, pipe: str) -> int:
    """SIGKILL every process whose environment at start carried this mark, or that holds the `pipe` (its
    /proc/PID/fd link text); returns how many were signalled."""
    needle, killed = f"{MARK}={token}".encode(), 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if needle not in (proc / "environ").read_bytes().split(b"\0") and not _holds(proc, pipe):
                continue
            os.kill(int(proc.name), signal.SIGKILL)
            killed += 1
        except OSError:  # gone meanwhile, or not ours
            continue
    return killed


def watch(owner: int, token: str, pipe: str, poll_s: float = 0.5) -> None:
    """Wait until `owner` is gone (this process is then re-parented), then reap its marked processes; again while
    any is found, since one may have been starting another."""
    while os.getppid() == owner:
        time.sleep(poll_s)
    for _ in range(5):
        if not kill_marked(token, pipe):
            break
        time.sleep(0.5)


if __name__ == "__main__":
    watch(int(sys.argv[1]), sys.argv[2], sys.argv[3])
