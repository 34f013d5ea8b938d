"""Pure-torch stand-ins for flash-attn 2.8.3's `flash_attn_varlen_func` and `flash_attn_func` (test-only, CPU): each
packed sequence (cu_seqlens) is attended by itself with PyTorch SDPA, causal, grouped-query heads as flash-attn does.
The CPU shim installs them on the `flash_attn` module (patch P8); transformers' flash-attention integration and
OpenRLHF's packing then run unchanged. Features the runs never use, and inputs the real kernels refuse, are refused.
See docs/e2e.md."""

from __future__ import annotations

import torch
import torch.nn.functional as F

# varlen calls in this process and the most sequences one call packed (the shim's training record reads it)
CALLS = {"varlen": 0, "most_sequences": 0}
# flash-attn 2.8.3's kernels take only fp16/bf16 and head dims up to 256 (flash_api.cpp; its Python wrapper pads a
# head dim to a multiple of 8 first, so any dim up to 256 passes). A test that compares float32 math, not the
# kernel's inputs (cpu_e2e/packing.py), sets ALLOW_FLOAT32; nothing else may, or CPU runs pass what a GPU refuses.
ALLOW_FLOAT32 = False
KERNEL_DTYPES = (torch.float16, torch.bfloat16)
MAX_HEAD_DIM = 256


def _refuse_inputs(q, k, v) -> None:
    """The real kernel's input checks, with its messages (RuntimeError, as TORCH_CHECK raises)."""
    allowed = KERNEL_DTYPES + ((torch.float32,) if ALLOW_FLOAT32 else ())
    if not q.dtype == k.dtype == v.dtype or q.dtype not in allowed:
        raise RuntimeError(
            f"FlashAttention only support fp16 and bf16 data type (tests/cpu_e2e stand-in: got q/k/v "
            f"{q.dtype}/{k.dtype}/{v.dtype}; a float32 math comparison sets flash_attn_cpu.ALLOW_FLOAT32)"
        )
    if q.shape[-1] > MAX_HEAD_DIM:
        raise RuntimeError(f"FlashAttention forward only supports head dimension at most 256 (got {q.shape[-1]})")
    if q.shape[-2] % k.shape[-2]:
        raise RuntimeError("Number of heads in key/value must divide number of heads in query")


def _refuse(dropout_p, window_size, softcap, alibi_slopes, return_attn_probs, block_table=None) -> None:
    unsupported = {
        "dropout_p": dropout_p not in (0, 0.0),
        "window_size": tuple(window_size) != (-1, -1),
        "softcap": softcap not in (0, 0.0, None),
        "alibi_slopes": alibi_slopes is not None,
        "return_attn_probs": bool(return_attn_probs),
        "block_table": block_table is not None,
    }
    named = [k for k, bad in unsupported.items() if bad]
    if named:
        raise NotImplementedError(
            f"tests/cpu_e2e flash-attn stand-in: {', '.join(named)} not supported; run this path on a GPU"
        )


def _attend(q, k, v, softmax_scale, causal):
    """One sequence: q (s_q, h, d), k/v (s_k, h_kv, d) -> (s_q, h, d)."""
    if causal and q.shape[0] != k.shape[0]:
        # flash-attn aligns the causal mask bottom-right, SDPA top-left: equal only for s_q == s_k
        raise NotImplementedError("tests/cpu_e2e flash-attn stand-in: causal attention needs seqlen_q == seqlen_k")
    out = F.scaled_dot_product_attention(
        q.transpose(0, 1),
        k.transpose(0, 1),
        v.transpose(0, 1),
        is_causal=causal,
        scale=softmax_scale,
        enable_gqa=q.shape[1] != k.shape[1],
    )
    return out.transpose(0, 1)


def flash_attn_varlen_func(
    q,
    k,
    v,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
    block_table=None,
):
    """q (total_q, h, d), k/v (total_k, h_kv, d), sequence i = rows cu_seqlens[i]:cu_seqlens[i+1]."""
    _refuse(dropout_p, window_size, softcap, alibi_slopes, return_attn_probs, block_table)
    _refuse_inputs(q, k, v)
    bq, bk = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    if len(bq) != len(bk) or bq[-1] != q.shape[0] or bk[-1] != k.shape[0]:
        raise ValueError(f"cu_seqlens {bq} / {bk} do not cover q {tuple(q.shape)} / k {tuple(k.shape)}")
    CALLS["varlen"] += 1
    CALLS["most_sequences"] = max(CALLS["most_sequences"], len(bq) - 1)
    parts = [
        _attend(q[bq[i] : bq[i + 1]], k[bk[i] : bk[i + 1]], v[bk[i] : bk[i + 1]], softmax_scale, causal)
        for i in range(len(bq) - 1)
    ]
    return torch.cat(parts, dim=0)


def flash_attn_func(
    q,
    k,
    v,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
):
    """q (b, s_q, h, d), k/v (b, s_k, h_kv, d): every row of the batch is one sequence."""
    _refuse(dropout_p, window_size, softcap, alibi_slopes, return_attn_probs)
    _refuse_inputs(q, k, v)
    return torch.stack([_attend(q[b], k[b], v[b], softmax_scale, causal) for b in range(q.shape[0])])
