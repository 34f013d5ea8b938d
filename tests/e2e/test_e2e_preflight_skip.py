"""`--preflight.skip CHECK[,CHECK]`: named checks are reported as skipped and never run; bad names are a usage
error naming the valid checks. (The CPU end-to-end runs use `--preflight.skip gpu` through the real CLI.)"""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from lead_recipes.training import cli as train
from lead_recipes.training import preflight


def test_skipped_checks_are_reported_as_skipped_and_never_run(tmp_path, monkeypatch):
    def boom(*_a, **_k):
        raise AssertionError("a skipped check ran")

    for name in (
        "_check_openrlhf",
        "_check_gpus",
        "_check_flash_attn",
        "check_data",
        "_check_model",
        "_check_reward",
        "_check_ray",
    ):
        monkeypatch.setattr(preflight, name, boom)
    skip = tuple(n for n in preflight.CHECK_NAMES if n != "ckpt")
    checks = preflight.run_preflight(NS(ckpt=NS(path=str(tmp_path / "ckpt"))), skip=skip)
    assert [c.name for c in checks] == list(preflight.CHECK_NAMES)
    by_name = {c.name: c for c in checks}
    assert by_name["ckpt"].ok and by_name["ckpt"].detail == str(tmp_path / "ckpt")  # it ran
    assert all(by_name[n].ok and "skipped (--preflight.skip)" in by_name[n].detail for n in skip)


def test_unskipped_gpu_check_still_runs_and_fails_on_this_cpu_machine(tmp_path, monkeypatch):
    args = NS(
        actor=NS(num_nodes=1, num_gpus_per_node=1),
        ref=NS(num_nodes=1, num_gpus_per_node=1),
        train=NS(colocate_all=False, colocate_actor_ref=False),
        algo=NS(kl=NS(init_coef=0.0)),
        vllm=NS(num_engines=1, tensor_parallel_size=1),
        ckpt=NS(path=str(tmp_path)),
    )
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    skip = tuple(n for n in preflight.CHECK_NAMES if n not in ("gpu", "ckpt"))
    gpu = {c.name: c for c in preflight.run_preflight(args, skip=skip)}["gpu"]
    assert not gpu.ok and "no CUDA GPU" in gpu.detail


@pytest.mark.parametrize("value", ["gpus", "gpu,nope", ","])
def test_unknown_check_name_is_a_usage_error_listing_the_checks(value, capsys):
    rc = train.main(["--preflight.skip", value, "--preflight.only_enable"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "--preflight.skip" in err and all(name in err for name in preflight.CHECK_NAMES)
