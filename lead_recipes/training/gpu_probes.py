"""The doctor's probes: code that may crash, hang or build CUDA code, so each runs in its own process
(`python -m lead_recipes.training.gpu_probes NAME [ARG]`) and prints one JSON line `{"ok": ..., "detail": ...}` last.
Imports only the standard library at import time; each probe imports what it tests. The doctor
(lead_recipes.training.doctor) starts them, times them out and adds the remedy. See docs/gpu.md.
"""

from __future__ import annotations

import json
import math
import sys

# bf16 keeps 8 significant bits: unit roundoff u = 2^-8. FlashAttention-2 accumulates in fp32 but rounds the
# softmax probabilities P to bf16 before P·V and rounds the output: |error| <= 2u·max|V| from those two roundings
# (P sums to 1, so neither the head dim nor the sequence length enters); twice that is the bound, as flash-attn's
# own tests allow twice a bf16 reference's error.
BF16_U = 2.0**-8
VARLEN_TOLERANCE = 4 * BF16_U  # times max|V|
# The recipes' Qwen2 models' attention: head dim 128, grouped-query heads. flash-attn compiles one kernel per head
# dim and maps query head h to key/value head h // (HEADS / KV_HEADS): the probe runs that kernel and that mapping.
HEADS, KV_HEADS, HEAD_DIM = 8, 2, 128
NO_GPU = "no CUDA GPU visible"


def _result(ok: bool, detail: str) -> dict:
    return {"ok": bool(ok), "detail": detail}


def flash_attn(need_kernels: str = "1") -> dict:
    """flash_attn_2_cuda loads (and is not the CPU stub), flash_attn imports as OpenRLHF imports it, and on a GPU
    one flash_attn_varlen_func call over a random packed batch equals SDPA run per sequence."""
    import importlib

    import torch  # first, as flash_attn does: the extension links against libtorch and fails to load without it

    ext = importlib.import_module("flash_attn_2_cuda")
    origin = getattr(ext, "__file__", None) or "?"
    import flash_attn
    from flash_attn.bert_padding import pad_input, unpad_input  # noqa: F401 - what OpenRLHF imports always

    stub = origin.endswith(".py")
    if need_kernels != "1":
        what = "the CPU stub (imports; its kernels are unused here)" if stub else origin
        return _result(True, f"flash_attn {flash_attn.__version__} imports; flash_attn_2_cuda: {what}")
    if stub:
        return _result(False, f"flash_attn_2_cuda is the CPU stub {origin}, not the CUDA build")
    if not torch.cuda.is_available():
        return _result(False, f"{origin} loads; {NO_GPU} to run it on")
    return _varlen_equals_sdpa(torch, flash_attn.__version__)


def _varlen_equals_sdpa(torch, version: str, device: str = "cuda") -> dict:
    from flash_attn import flash_attn_varlen_func

    gen = torch.Generator().manual_seed(0)
    lengths = [int(n) for n in torch.randint(1, 200, (6,), generator=gen)]
    total = sum(lengths)
    q, k, v = (
        torch.randn(total, heads, HEAD_DIM, generator=gen).to(device, torch.bfloat16)
        for heads in (HEADS, KV_HEADS, KV_HEADS)
    )
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32, device=device)
    out = flash_attn_varlen_func(q, k, v, cu, cu, max(lengths), max(lengths), causal=True).float()
    worst = 0.0
    for start, end in zip(cu[:-1].tolist(), cu[1:].tolist()):
        # [L, H, D] -> [1, H, L, D], fp32 from the same bf16 values; enable_gqa maps heads as flash-attn does
        qs, ks, vs = (x[start:end].float().transpose(0, 1)[None] for x in (q, k, v))
        ref = torch.nn.functional.scaled_dot_product_attention(qs, ks, vs, is_causal=True, enable_gqa=True)
        ref = ref[0].transpose(0, 1)
        worst = max(worst, float((out[start:end] - ref).abs().max().cpu()))
    bound = VARLEN_TOLERANCE * float(v.float().abs().max())
    detail = (
        f"flash-attn {version}: varlen attention over {len(lengths)} packed sequences ({total} tokens, "
        f"{HEADS}/{KV_HEADS} heads of dim {HEAD_DIM}) vs SDPA per sequence: max |diff| {worst:.2e} "
        f"(bound {bound:.2e} = 4·2^-8·max|V|)"
    )
    return _result(worst <= bound, detail)


def fused_adam() -> dict:
    """DeepSpeed's FusedAdam builds (JIT, first use) and one step equals torch.optim.Adam's."""
    import deepspeed
    import torch

    if not torch.cuda.is_available():
        return _result(False, f"deepspeed {deepspeed.__version__} imports; {NO_GPU} to build FusedAdam for")
    from deepspeed.ops.adam import FusedAdam

    gen = torch.Generator().manual_seed(0)
    start, grad = torch.randn(4096, generator=gen), torch.randn(4096, generator=gen)
    params = [torch.nn.Parameter(start.clone().cuda()) for _ in range(2)]
    opts = [FusedAdam([params[0]], lr=1e-2), torch.optim.Adam([params[1]], lr=1e-2)]
    for p, opt in zip(params, opts):
        p.grad = grad.cuda()
        opt.step()
    diff = float((params[0] - params[1]).abs().max())
    moved = float((params[0].detach().cpu() - start).abs().max())
    # the same fp32 Adam formula in another operation order: a few fp32 roundings (2^-24) of |p| <= 6
    ok = moved > 0 and diff <= 1e-5
    return _result(ok, f"deepspeed {deepspeed.__version__} FusedAdam step vs torch Adam: max |diff| {diff:.1e}")


def _allreduce_worker(rank: int, world: int, port: int) -> None:
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    x = torch.full((1024,), float(rank + 1), device="cuda")
    dist.all_reduce(x)
    torch.cuda.synchronize()
    expected = world * (world + 1) / 2
    dist.destroy_process_group()
    if not bool((x == expected).all()):
        raise RuntimeError(f"rank {rank}: all_reduce gave {x[0].item()}, expected {expected}")


def nccl() -> dict:
    """An NCCL all-reduce across every visible GPU, one process each (torch.multiprocessing spawn)."""
    import socket

    import torch

    world = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if world == 0:
        return _result(False, f"{NO_GPU} for an NCCL all-reduce")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    torch.multiprocessing.spawn(_allreduce_worker, args=(world, port), nprocs=world, join=True)
    return _result(True, f"NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}: all-reduce across {world} GPU(s)")


def zero3() -> dict:
    """DeepSpeed ZeRO-3 initialises a tiny model in one process (world size 1) and one step moves its parameters;
    on CUDA in bf16 with DeepSpeed's own Adam (FusedAdam, the recipes' optimizer), on CPU with torch's over gloo."""
    import os
    import socket

    import deepspeed
    import torch

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", LOCAL_RANK="0", WORLD_SIZE="1")
    accelerator = deepspeed.get_accelerator()
    cuda = accelerator.device_name() == "cuda"
    deepspeed.init_distributed(dist_backend=accelerator.communication_backend_name())
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    config = {
        "train_micro_batch_size_per_gpu": 4,
        "gradient_accumulation_steps": 1,
        "zero_optimization": {"stage": 3},
        "bf16": {"enabled": cuda},
        "optimizer": {"type": "Adam", "params": {"lr": 1e-2, "torch_adam": not cuda}},
    }
    engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)

    def gathered() -> torch.Tensor:
        with deepspeed.zero.GatheredParameters(list(engine.module.parameters())):
            return torch.cat([p.detach().float().flatten().cpu() for p in engine.module.parameters()])

    before = gathered()
    x = torch.randn(4, 64).to(engine.device, next(engine.module.parameters()).dtype)
    loss = engine(x).float().pow(2).mean()
    engine.backward(loss)
    engine.step()
    moved = float((gathered() - before).abs().max())
    stage = engine.zero_optimization_stage()
    # Adam's first step moves every parameter with a nonzero gradient by about lr = 1e-2
    ok = stage == 3 and math.isfinite(float(loss)) and moved > 1e-3
    where = f"{accelerator.device_name()} {'bf16' if cuda else 'fp32'}"
    detail = f"deepspeed {deepspeed.__version__} ZeRO-{stage} on {where}: one step, max |param change| {moved:.1e}"
    return _result(ok, detail)


def version_of(module: str) -> dict:
    """`module` imports; detail is its __version__ (the doctor compares it with the pin)."""
    import importlib

    mod = importlib.import_module(module)
    return _result(True, str(getattr(mod, "__version__", "?")))


PROBES = {"flash-attn": flash_attn, "fused-adam": fused_adam, "nccl": nccl, "zero3": zero3, "version": version_of}


def main(argv: list[str]) -> int:
    name, rest = argv[0], argv[1:]
    try:
        out = PROBES[name](*rest)
    except Exception as exc:  # noqa: BLE001 - the doctor reports whatever failed, by type and message
        out = _result(False, f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:400])
    sys.stdout.flush()
    print("\n" + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
