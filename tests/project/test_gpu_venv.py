"""launchers/bootstrap.sh never replaces a venv that others may be running from: one built for the other stack (a
GPU-less login node sharing the checkout with GPU jobs) is refused with the remedy, and a GPU venv is refused on GPUs
its flash-attn has no kernels for. On a node made of fakes (tests/support/fake_gpu_node.py)."""

from __future__ import annotations

import pytest
from support.fake_gpu_node import NEWER_DRIVER, Node

# every subcommand that builds the venv when its stamp differs; `test` and `train` refuse before linting or training
SUBCOMMANDS = [["setup"], ["run", "touch", "ran"], ["train"], ["test"]]


@pytest.fixture
def node(tmp_path) -> Node:
    return Node(tmp_path)


def _refused(node: Node, run, *says: str) -> str:
    """The one refusal line, after checking it names each of `says` and that nothing ran or was installed."""
    lines = run.out.strip().splitlines()
    assert run.rc == 1 and len(lines) == 1 and lines[0].startswith("[bootstrap] refused: "), run.out
    assert all(s in lines[0] for s in says), lines[0]
    assert not (node.tmp / "ran").exists()
    return lines[0]


@pytest.mark.parametrize("args", SUBCOMMANDS, ids=lambda a: a[0])
def test_a_login_node_without_gpus_keeps_the_gpu_venv_and_says_how_to_go_on(node, args, tmp_path, monkeypatch):
    assert node.bootstrap().rc == 0
    stamp = (node.venv / ".bootstrap-stamp").read_text()
    installs = len(node.bootstrap().pips)
    node.no_driver()
    monkeypatch.chdir(tmp_path)  # `run touch ran` would write here
    run = node.bootstrap(*args, LEAD_RECIPES_STACK="")  # the stack detected, as on a login node
    _refused(node, run, "is the gpu stack's", "this node's is cpu", f"LEAD_RECIPES_VENV={node.venv}-cpu")
    assert "LEAD_RECIPES_STACK=gpu" in run.out
    assert (node.venv / ".bootstrap-stamp").read_text() == stamp and len(run.pips) == installs, run.out


def test_a_gpu_node_keeps_a_cpu_venv_and_names_the_stack_to_use_it(node):
    assert node.bootstrap(LEAD_RECIPES_STACK="cpu").rc == 0
    run = node.bootstrap(LEAD_RECIPES_STACK="")  # nvidia-smi -L lists a GPU: the gpu stack
    _refused(node, run, "is the cpu stack's", "this node's is gpu", "LEAD_RECIPES_STACK=cpu")
    assert (node.venv / "site-packages" / "flash_attn_2_cuda.py").exists()


def test_the_named_stack_uses_the_other_stack_s_venv_as_it_is(node):
    assert node.bootstrap().rc == 0
    installs = len(node.bootstrap().pips)
    node.no_driver()
    run = node.bootstrap("run", "true", LEAD_RECIPES_STACK="gpu")  # the remedy the refusal names
    assert run.rc == 0 and len(run.pips) == installs, run.out


def test_the_venv_records_the_flash_attn_archs_it_was_built_for(node):
    node.gpus(driver=NEWER_DRIVER, caps=["9.0", "8.6"])
    assert node.bootstrap().rc == 0
    assert (node.venv / ".flash-attn-archs").read_text().strip() == "80;90"


def test_a_gpu_venv_is_refused_on_gpus_its_flash_attn_was_not_built_for(node, tmp_path, monkeypatch):
    assert node.bootstrap().rc == 0  # on H100s (9.0)
    installs = len(node.bootstrap().pips)
    node.gpus(driver=NEWER_DRIVER, caps=["8.0", "8.0"])  # the checkout seen from an A100 node
    monkeypatch.chdir(tmp_path)
    run = node.bootstrap("run", "touch", "ran")
    line = _refused(node, run, "kernels for sm_90", "compute capability 8.0: sm_80")
    assert f"LEAD_RECIPES_VENV={node.venv}-sm80" in line.split("8.0: sm_80", 1)[1], line
    assert len(run.pips) == installs and (node.venv / ".bootstrap-stamp").exists(), run.out


def test_a_gpu_venv_runs_on_other_gpus_of_an_arch_it_was_built_for(node, tmp_path, monkeypatch):
    node.gpus(driver=NEWER_DRIVER, caps=["8.0"])
    assert node.bootstrap().rc == 0
    node.gpus(driver=NEWER_DRIVER, caps=["8.6", "8.9"])  # sm_80 cubins run on every 8.x GPU
    monkeypatch.chdir(tmp_path)
    run = node.bootstrap("run", "touch", "ran")
    assert run.rc == 0 and (tmp_path / "ran").exists(), run.out


def test_a_changed_pin_on_gpus_the_venv_was_not_built_for_refuses_instead_of_rebuilding(node):
    assert node.bootstrap().rc == 0  # on H100s (9.0)
    installs = len(node.bootstrap().pips)
    node.pin("einops", "0.0.1")  # the stamp now differs: a rebuild would replace the H100 jobs' venv
    node.gpus(driver=NEWER_DRIVER, caps=["8.0"])
    run = node.bootstrap()
    _refused(node, run, "not for this node's GPUs")
    assert len(run.pips) == installs and (node.venv / ".flash-attn-archs").read_text().strip() == "90", run.out
