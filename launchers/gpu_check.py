"""The bare-box GPU check: what one GPU with only torch, DeepSpeed and this checkout can prove in about five minutes,
nothing downloaded. The doctor's checks (naming what is missing: vLLM, OpenRLHF and flash-attn are not expected),
each registered method's step on CUDA bf16 tensors against the CPU float64 result, DeepSpeed's FusedAdam, and ZeRO-3
initialisation plus one step of a tiny model. One line per check, a summary, a JSON of the results, exit 1 on any
failure. Without a GPU the method steps run on CPU bf16. Imports no OpenRLHF, vLLM or Ray. See docs/gpu.md.

    PYTHONPATH=$PWD python launchers/gpu_check.py --output gpu_check.json
"""

from __future__ import annotations

import json
import platform
import sys
import time
import warnings
from dataclasses import asdict, fields
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout, when PYTHONPATH does not name it

from lead_recipes.help_format import ArgumentParser
from lead_recipes.methods.config import METHODS, RecipeConfig, entry
from lead_recipes.training import doctor
from lead_recipes.training.data_check import Check
from lead_recipes.training.gpu_probes import BF16_U

# bf16 rounds each operation's result with relative error <= u = 2^-8; the inputs below are bf16 values, so only
# the arithmetic differs from the float64 reference. The longest dependent chain in a method is about 16 roundings
# (reward: target, difference, ratio, clamp; then group mean and std over G, subtraction, division; then BatchWhiten's
# weighted mean and variance), so |bf16 - float64| <= 16u·max(1, |float64|); measured on CPU bf16: at most 6.7u.
METHOD_TOLERANCE = 16 * BF16_U
PROMPTS, SAMPLES, CAP = 16, 8, 4096


def method_batch(method: str, seed: int = 0):
    """A random [PROMPTS, SAMPLES] RolloutBatch, validated (float64), whose float values are exact in bf16."""
    import torch

    from lead_recipes.methods.base import RolloutBatch, check_batch

    gen = torch.Generator().manual_seed(seed)

    def exact(x):  # bf16-representable values: the bf16 run then starts from the reference's inputs
        return x.to(torch.bfloat16).double()

    return check_batch(
        RolloutBatch(
            correct=torch.rand(PROMPTS, SAMPLES, generator=gen) < 0.6,
            lengths=exact(torch.randint(64, CAP + 1, (PROMPTS, SAMPLES), generator=gen).double()),
            max_new_tokens=CAP,
            repetitive=torch.rand(PROMPTS, SAMPLES, generator=gen) < 0.1,
            n_gold=exact(torch.randint(100, 4001, (PROMPTS,), generator=gen).double()),
            l1_max=(torch.arange(PROMPTS) % 2 == 1) & (method != "l1-exact"),  # l1-exact refuses max prompts
            length_penalty=exact(-0.5 * torch.rand(PROMPTS, SAMPLES, generator=gen, dtype=torch.float64)),
            think_boxed=torch.rand(PROMPTS, SAMPLES, generator=gen) < 0.9,  # the format flags GRPO-LEAD's and
            answer_boxed=torch.rand(PROMPTS, SAMPLES, generator=gen) < 0.9,  # Laser's format rules read
            think_once=torch.rand(PROMPTS, SAMPLES, generator=gen) < 0.9,  # AdaptThink's count rule,
            nothink=torch.rand(PROMPTS, SAMPLES, generator=gen) < 0.5,  # its forced mode and reference accuracy
            ref_acc=exact(torch.rand(PROMPTS, generator=gen, dtype=torch.float64)),
        )
    )


def check_method(method: str, device: str) -> Check:
    """The method's step (fresh default instance) on `device` bf16 tensors vs on CPU float64, outputs within
    METHOD_TOLERANCE·max(1, |reference|)."""
    import torch

    from lead_recipes.methods import build_method
    from lead_recipes.methods.base import RolloutBatch

    reference = method_batch(method)
    low = RolloutBatch(
        **{
            f.name: (
                v.to(device, torch.bfloat16 if v.is_floating_point() else v.dtype) if isinstance(v, torch.Tensor) else v
            )
            for f in fields(RolloutBatch)
            for v in [getattr(reference, f.name)]
        }
    )

    def fresh():
        m = build_method(RecipeConfig(method=method))
        if entry(method).monitor:  # Laser-D/-DE shape nothing before a monitor pass: the batch itself as one
            m.observe_monitor(reference.correct, reference.lengths)
        return m

    try:
        want = fresh()._step(reference)
        got = fresh()._step(low)  # _step: step() would cast lengths to float64
    except Exception as exc:  # noqa: BLE001 - a method that fails on this device is this check's finding
        return Check(f"method {method}", False, f"{device} bf16 step failed: {type(exc).__name__}: {exc}")
    worst, bad = {}, []
    for name in ("rewards", "advantages"):
        ref, out = getattr(want, name).double(), getattr(got, name).double().cpu()
        excess = (out - ref).abs() / ref.abs().clamp(min=1.0)
        worst[name] = float(excess.max())
        if not bool(torch.isfinite(out).all()) or worst[name] > METHOD_TOLERANCE:
            bad.append(name)
    detail = (
        f"{device} bf16 vs cpu float64 over [{PROMPTS}, {SAMPLES}]: max |diff|/max(1,|ref|) rewards "
        f"{worst['rewards']:.1e}, advantages {worst['advantages']:.1e} (bound {METHOD_TOLERANCE:.4f} = 16·2^-8)"
    )
    return Check(f"method {method}", not bad, detail + (f"; outside the bound: {', '.join(bad)}" if bad else ""))


def run(timeout: float) -> list[tuple[Check, float | None]]:
    """(check, seconds) for every check in order: the doctor's side by side (seconds None: they overlap), then each
    method and ZeRO-3 one after another."""
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    done: list[tuple[Check, float | None]] = []
    for check in doctor.run_doctor(timeout=timeout):
        done.append((check, None))
        print(doctor.report_line(check), flush=True)
    for step in [*[lambda m=m: check_method(m, device) for m in METHODS], lambda: doctor.check_zero3(timeout)]:
        start = time.monotonic()
        check = step()
        done.append((check, time.monotonic() - start))
        print(doctor.report_line(check), flush=True)
    return done


def main(argv: list[str]) -> int:
    parser = ArgumentParser(prog="launchers/gpu_check.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", required=True, metavar="JSON", help="where to write the results")
    parser.add_argument(
        "--check.timeout_s",
        dest="timeout",
        type=float,
        default=doctor.DEFAULT_TIMEOUT,
        metavar="S",
        help="seconds each subprocess check may take",
    )
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", message="The pynvml package is deprecated")  # torch's, nothing to act on
    import torch

    started = time.monotonic()
    results = run(args.timeout)
    failed = [c.name for c, _ in results if not c.ok]
    summary = {
        "ok": not failed,
        "failed": failed,
        "seconds": round(time.monotonic() - started, 1),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "python": platform.python_version(),
        "checks": [{**asdict(c), "seconds": None if s is None else round(s, 2)} for c, s in results],
    }
    Path(args.output).write_text(json.dumps(summary, indent=1) + "\n")
    verdict = f"{len(failed)} of {len(results)} failed: {', '.join(failed)}" if failed else f"all {len(results)} passed"
    print(f"gpu_check: {verdict} in {summary['seconds']} s; results in {args.output}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
