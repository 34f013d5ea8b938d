"""RolloutBatch fields a test of every method needs."""

from __future__ import annotations


def targets(method: str, m: int, seed: int = 0, g: int = 8) -> dict:
    """RolloutBatch's per-prompt L1 fields for a test that runs every method on M prompts × G rollouts: n_gold uniform
    in 100..4000 (arXiv 2503.04697's range) and every other prompt asking for a maximum, except under l1-exact,
    which refuses such prompts; Laser's and AdaptThink's format flags, every response well formatted; and
    AdaptThink's executor fields: the first G/2 rollouts of each group no-think, a reference accuracy in [0, 1] per
    prompt. The other methods ignore them."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    n_gold = torch.randint(100, 4001, (m,), generator=gen).to(torch.float32)
    l1_max = (torch.arange(m) % 2 == 1) & (method != "l1-exact")
    return {
        "n_gold": n_gold,
        "l1_max": l1_max,
        "answer_boxed": torch.ones(m, g, dtype=torch.bool),
        "think_once": torch.ones(m, g, dtype=torch.bool),
        "nothink": (torch.arange(g) < g // 2).expand(m, g).clone(),
        "ref_acc": torch.rand(m, generator=gen, dtype=torch.float64),
    }
    return {"n_gold": n_gold, "l1_max": l1_max, "answer_boxed": torch.ones(m, g, dtype=torch.bool)}


def ready(method):
    """`method` as training hands it its first batch: one whose registry entry needs monitor passes (Laser-D/-DE)
    has observed one, 3 monitor prompts × 8 samples (8/8, 4/8 and 1/8 correct: every band has a target)."""
    import torch

    from lead_recipes.methods.config import entry

    if entry(method.name).monitor:
        correct = torch.tensor([[j < k for j in range(8)] for k in (8, 4, 1)])
        method.observe_monitor(correct, torch.full((3, 8), 1000.0))
    return method
