"""A real `lead-recipes serve` in its own process that logs each sample it grades, for the fail-over tests of the
reward and e2e areas; a free local port."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_COUNTING_SERVER = """
import json, sys
import lead_recipes.reward.server as s
log_path = sys.argv[1]
original = s.RewardServer._grade
async def counted(self, queries, prompts, golds, skip):
    out = await original(self, queries, prompts, golds, skip)
    with open(log_path, "a") as f:  # one line per sample the server graded
        for gold in golds:
            f.write(json.dumps(gold) + "\\n")
    return out
s.RewardServer._grade = counted
sys.exit(s.main(sys.argv[2:]))
"""


def start_server(port, log_path):
    """A real `lead-recipes serve` on `port` that appends one line per graded sample to `log_path`, once healthy."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _COUNTING_SERVER, str(log_path), "--serve.port", str(port), "--grade.workers", "1"],
        cwd=ROOT,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("reward server did not become healthy")
