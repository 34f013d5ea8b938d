"""Packed against unpacked log-probs through OpenRLHF's own `Actor.forward` (tests only): one padded batch shaped as
the experience maker builds it (left-padded prompts, right-padded responses), forwarded by an Actor loaded with
`packing_samples=True` and flash_attention_2 (the shim's stand-in, P7/P8) and by one without packing under sdpa.
Run in a process with the shim on: `python -m cpu_e2e.packing MODEL` prints the gaps as JSON. See docs/e2e.md."""

from __future__ import annotations

import json
import math
import sys

import torch


def batch(vocab: int, seed: int = 0):
    """sequences, attention_mask, action_mask of 4 samples with prompt/response lengths that differ per row."""
    g = torch.Generator().manual_seed(seed)
    shapes = [(5, 9), (8, 3), (3, 12), (7, 6)]  # (prompt, response) tokens
    p_max, r_max = max(p for p, _ in shapes), max(r for _, r in shapes)
    seqs = torch.zeros(len(shapes), p_max + r_max, dtype=torch.long)
    attn = torch.zeros_like(seqs)
    action = torch.zeros(len(shapes), r_max, dtype=torch.bool)
    for i, (p, r) in enumerate(shapes):
        seqs[i, p_max - p : p_max + r] = torch.randint(1, vocab, (p + r,), generator=g)
        attn[i, p_max - p : p_max + r] = 1
        action[i, :r] = True
    return seqs, attn, action


def gaps(model: str) -> dict:
    """Max |packed - unpacked| action log-prob in float32 and bf16 (with one bf16 step at the largest logit), the
    varlen calls' sequence counts, and the gap when the stand-in is made to ignore the sequence boundaries (the
    leak a broken packing would have)."""
    import functools

    import flash_attn
    import flash_attn_cpu
    from openrlhf.models import Actor

    standin = flash_attn.flash_attn_varlen_func
    assert standin is flash_attn_cpu.flash_attn_varlen_func, "the shim's P8 is not active in this process"
    counts, mode = [], {"leak": False}

    # transformers looks the varlen function up once (at model init) and keeps it, and reads its signature to choose
    # the kwargs it passes: install one switchable wrapper with the stand-in's signature before any model exists
    @functools.wraps(standin)
    def varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *a, **kw):
        counts.append(len(cu_seqlens_q) - 1)
        if mode["leak"]:  # the whole pack as one causal sequence: what ignoring the boundaries computes
            cu_seqlens_q = cu_seqlens_k = torch.tensor([0, q.shape[0]], dtype=cu_seqlens_q.dtype)
        return standin(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *a, **kw)

    flash_attn.flash_attn_varlen_func = varlen
    packed = Actor(model, attn_implementation="flash_attention_2", param_dtype="bf16", packing_samples=True)
    plain = Actor(model, attn_implementation="sdpa", param_dtype="bf16", packing_samples=False)
    seqs, attn, action = batch(packed.model.config.vocab_size)

    def gap(dtype, leak=False) -> tuple[float, float]:
        packed.model.to(dtype), plain.model.to(dtype)
        # float32 compares the math; the real kernel (and the stand-in otherwise) takes only fp16/bf16
        flash_attn_cpu.ALLOW_FLOAT32 = dtype == torch.float32
        mode["leak"] = leak
        with torch.no_grad():
            a = packed(seqs, action_mask=action, attention_mask=attn)
            b, output = plain(seqs, action_mask=action, attention_mask=attn, return_output=True)
        return (a - b)[action].abs().max().item(), output["logits"][attn.bool()].abs().max().item()

    out = {"float32": gap(torch.float32)[0]}
    out["bfloat16"], top = gap(torch.bfloat16)
    # one bfloat16 step (8 significant bits) at the largest logit: the rounding of one logit in bf16
    out["bfloat16_logit_step"] = torch.finfo(torch.bfloat16).eps * 2.0 ** math.floor(math.log2(top))
    out["leak_float32"] = gap(torch.float32, leak=True)[0]
    out["varlen_sequences"] = sorted(set(counts))
    return out


if __name__ == "__main__":
    print(json.dumps(gaps(sys.argv[1])))
