"""The bare-box check (launchers/gpu_check.py) on this CPU machine: every registered method's step in bf16 against
float64 (CPU bf16 here, CUDA bf16 on a GPU), and the whole script on a simulated bare box, where OpenRLHF, vLLM, Ray,
DeepSpeed and flash-attn are absent: modules of those names that raise ModuleNotFoundError (and log who tried) are
put first on the PYTHONPATH of the script and of its subprocesses."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lead_recipes.methods.config import METHODS
from lead_recipes.training import doctor

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "launchers" / "gpu_check.py"
ABSENT = ("openrlhf", "vllm", "ray", "deepspeed", "flash_attn", "flash_attn_2_cuda", "transformers", "math_verify")


def _gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("method", METHODS)
def test_method_step_in_bf16_stays_within_the_derived_bound_of_float64(method):
    check = _gpu_check().check_method(method, "cpu")
    assert check.ok, check.detail


def test_method_check_fails_naming_the_outputs_outside_a_tighter_bound(monkeypatch):
    """The bound is what decides: at 1e-6 the bf16 run of LEAD (whose rewards round) must fail."""
    gpu_check = _gpu_check()
    monkeypatch.setattr(gpu_check, "METHOD_TOLERANCE", 1e-6)
    check = gpu_check.check_method("lead", "cpu")
    assert not check.ok and check.name == "method lead" and "outside the bound: rewards, advantages" in check.detail


def test_method_that_fails_on_the_device_is_named_not_raised(monkeypatch):
    from lead_recipes.methods.lead import LeadMethod

    def broken(self, batch):
        raise RuntimeError("Expected all tensors to be on the same device, but found cuda:0 and cpu")

    monkeypatch.setattr(LeadMethod, "_step", broken)
    check = _gpu_check().check_method("lead", "cpu")
    assert not check.ok and "cpu bf16 step failed: RuntimeError: Expected all tensors" in check.detail


def _bare_box(where: Path, log: Path) -> dict:
    where.mkdir()
    for name in ABSENT:
        (where / f"{name}.py").write_text(
            textwrap.dedent(f"""
            import os
            with open({str(log)!r}, "a") as f:
                f.write(f"{{os.getpid()}} {name}\\n")
            raise ModuleNotFoundError("No module named '{name}'", name="{name}")
            """)
        )
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(where), str(ROOT)]))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_bare_box_run_names_what_is_missing_and_imports_no_training_stack(tmp_path):
    log, output = tmp_path / "imports.log", tmp_path / "results.json"
    env = _bare_box(tmp_path / "absent", log)
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--output", str(output)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 1 and "Traceback" not in err, (out, err)
    lines = {m[1]: m[0] for m in re.finditer(r"^\[\s*(?:ok|FAIL)\] (method \S+|\S+) .*$", out, re.M)}
    assert "No module named 'deepspeed'" in lines["fused-adam"] and "fix: install deepspeed" in lines["fused-adam"]
    assert "No module named 'deepspeed'" in lines["zero3"]
    assert (
        "No module named 'flash_attn_2_cuda'" in lines["flash-attn"] and "fix: build flash-attn" in lines["flash-attn"]
    )
    assert "No module named 'vllm'" in lines["vllm"]
    assert lines["gpu"].startswith("[FAIL] gpu        no GPU")
    assert all(lines[f"method {m}"].startswith("[  ok]") for m in METHODS), out
    # the script's own process tried none of the absent modules (its subprocesses may: that is their check)
    tried = [line.split()[1] for line in log.read_text().splitlines() if int(line.split()[0]) == proc.pid]
    assert tried == [], tried
    results = json.loads(output.read_text())
    assert results["ok"] is False and "fused-adam" in results["failed"] and "method lead" not in results["failed"]
    assert [c["name"] for c in results["checks"]] == [line for line in lines]
    assert out.splitlines()[-1].startswith(f"gpu_check: {len(results['failed'])} of {len(lines)} failed")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_zero3_initialises_and_steps_a_tiny_model_in_one_process():
    """DeepSpeed's CPU accelerator over gloo here; on a GPU the same probe runs bf16 with FusedAdam."""
    check = doctor.check_zero3(timeout=580)
    assert check.ok and "ZeRO-3 on cpu" in check.detail, check.detail
