"""A reward-server outage in the middle of a real CPU training run (`pytest -m e2e_full`): `lead-recipes train`
with an http reward URL (routed through lead_recipes/reward/remote_reward.py), a real `lead-recipes serve` that counts
every sample it grades, stopped after the first step's rewards and restarted after an outage of several seconds
(OpenRLHF's own client gives up after 5 tries 1 s apart and the run then crashes). The run must finish, every
sample graded exactly as often as the run drew it (none lost, none graded twice), and no step may log a grading
failure.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from cpu_e2e import harness
from support.ports import free_port
from support.reward_server import start_counting_server

pytestmark = [
    pytest.mark.e2e_full,
    pytest.mark.slow,
    pytest.mark.timeout(1500),
    pytest.mark.skipif(harness.available() is not None, reason=str(harness.available())),
]
P = harness.gpu_smoke.PROFILES["cpu"]
PER_STEP = P["rollout_batch"] * P["n"]
OUTAGE_S = 8.0


def test_reward_server_restarted_mid_run_loses_and_duplicates_no_sample(tmp_path):
    model = harness.fixture_model()
    cluster = harness.RayCluster()
    port, graded_log = free_port(), tmp_path / "graded.jsonl"
    server = start_counting_server(port, graded_log)
    try:
        run = harness.Run(
            cluster,
            model,
            tmp_path / "lead",
            "lead",
            episodes=2,
            extra=[
                "--reward.remote_url",
                f"http://127.0.0.1:{port}/get_reward",
                # no preflight probe: the server counts every sample it grades, the probe too
                "--preflight.skip",
                "gpu,reward",
            ],
        )
        deadline = time.time() + 900
        while not (graded_log.exists() and len(graded_log.read_text().splitlines()) >= PER_STEP):
            assert run.proc.poll() is None and time.time() < deadline, run.tail()
            time.sleep(0.2)
        os.killpg(server.pid, signal.SIGTERM)  # graceful: in-flight requests finish, new ones are refused
        server.wait(timeout=60)
        before_outage = len(graded_log.read_text().splitlines())
        assert run.proc.poll() is None, "the run ended before the outage: " + run.tail()
        time.sleep(OUTAGE_S)
        server = start_counting_server(port, graded_log)
        rc = run.wait(timeout=900)
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        cluster.stop()
    assert rc == 0, run.tail()
    graded = graded_log.read_text().splitlines()
    assert before_outage < len(graded)  # grading went on after the restart
    assert len(graded) == len(run.trained_rows()) == 4 * PER_STEP  # 4 steps: none lost, none graded twice
    shares = run.scalars()["train/recipe/grading/failure_share"]
    assert sorted(shares) == [1, 2, 3, 4] and set(shares.values()) == {0.0}, shares
