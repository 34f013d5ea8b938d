"""Fixtures of the training tests: a local Ray for the module and a small prompt file from the shared data."""

from __future__ import annotations

import json

import pytest
import ray


@pytest.fixture(scope="module")
def ray_local():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def prompt_file(tmp_path_factory, shared_data):
    path = tmp_path_factory.mktemp("data") / "prompts.jsonl"
    rows = [json.loads(x) for x in (shared_data / "train" / "math_level3to5.jsonl").open().readlines()[:16]]
    path.write_text("".join(json.dumps({"prompt": r["problem"], "label": r["answer"]}) + "\n" for r in rows))
    return path
