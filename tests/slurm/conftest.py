"""The one real Slurm of the session (two slurmd nodes on this machine, 2 CPUs and 2 fake GPUs each), shared by every
Slurm test module; its tests skip, naming what is missing, where the Slurm binaries are absent. See docs/slurm.md."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from support.slurm_cluster import SlurmCluster, missing
from support.slurm_helpers import VENV_BIN


@pytest.fixture(scope="session")
def slurm():
    reason = missing()
    if reason:
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(prefix="lrs", dir="/tmp"))  # short: Ray's socket paths live under it
    cluster = SlurmCluster(root / "slurm", nodes=2, cpus=2, gpus=2).start()
    cluster.env.update(TMPDIR=str(root), PATH=f"{VENV_BIN}:{os.environ['PATH']}")
    cluster.root_tmp = root
    yield cluster
    cluster.stop()
    shutil.rmtree(root, ignore_errors=True)
