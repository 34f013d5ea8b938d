"""A real `lead-recipes serve` in its own process: started on a free port until healthy (`start_serve`), or with a
log line per graded sample (`start_counting_server`, for the fail-over tests of the reward and e2e areas)."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from support.ports import free_port

TOKEN = "s3cret-token"
ROOT = Path(__file__).resolve().parents[2]


# The wrapper binds its arguments by the real `_grade`'s own signature, so a parameter added there cannot shift
# which argument it logs as the labels.
_COUNTING_SERVER = """
import inspect, json, sys
import lead_recipes.reward.server as s
log_path = sys.argv[1]
original = s.RewardServer._grade
async def counted(self, *args, **kwargs):
    out = await original(self, *args, **kwargs)
    labels = inspect.signature(original).bind(self, *args, **kwargs).arguments["labels"]
    with open(log_path, "a") as f:  # one line per sample the server graded
        for gold in labels:
            f.write(json.dumps(gold) + "\\n")
    return out
s.RewardServer._grade = counted
sys.exit(s.main(sys.argv[2:]))
"""


def start_counting_server(port, log_path):
    """A real `lead-recipes serve` on `port` that appends one line per graded sample to `log_path`, once healthy."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _COUNTING_SERVER, str(log_path), "--serve.port", str(port), "--grade.workers", "1"],
        cwd=ROOT,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_healthy(proc, f"http://127.0.0.1:{port}", 120)
    return proc


def serve(port: int, *extra: str, env=None) -> subprocess.Popen:
    """`lead-recipes serve` on `port` (2 s grading timeout, 2 workers), not yet ready."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lead_recipes.cli",
            "serve",
            "--serve.port",
            str(port),
            "--grade.timeout_s",
            "2",
            "--grade.workers",
            "2",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def ready_line(proc: subprocess.Popen) -> str:
    line = proc.stdout.readline()  # the first stdout line; logs go to stderr
    if not line.startswith("lead-recipes serve: ready"):
        proc.kill()
        raise AssertionError(f"expected the ready line first, got {line!r}; stderr: {proc.communicate()[1]}")
    return line


def start_serve(*extra: str) -> tuple[subprocess.Popen, str, str]:
    """`lead-recipes serve` on a free port, once healthy: (process, base URL, its ready line)."""
    port = free_port()
    proc = serve(port, *extra)
    ready = ready_line(proc)
    base = f"http://127.0.0.1:{port}"
    wait_healthy(proc, base, 90)
    return proc, base, ready


def wait_healthy(proc: subprocess.Popen, base: str, timeout_s: float) -> None:
    """Until `base`/health answers 200; AssertionError (with the server's stderr when piped) if the process exits
    first or `timeout_s` runs out, the process killed."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError(
        f"lead-recipes serve at {base} did not become healthy; stderr: {proc.stderr and proc.stderr.read()}"
    )
