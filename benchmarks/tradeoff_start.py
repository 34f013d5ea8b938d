"""The trade-off benchmark's SFT starts: built reproducibly (fixed thread count, deterministic kernels), with the
prompt template as an option, and recorded (library versions, a hash of the weights) in each start's info.json so
that a report never mixes starts that differ. Design: docs/benchmarks.md#starts-reproducible-across-days."""

from __future__ import annotations

import hashlib
import json
import platform
import random
import time
from pathlib import Path

from toy_run import CHAT_TEMPLATE, tiny_config, train_tokenizer

# R1-distill's no-think prompt: the assistant turn opens with an empty, closed think block, so that a boxed answer
# after it is well-formed for Laser's format rule (`answer_boxed`: <think>, </think>, a box after </think>).
NOTHINK = "<think>\n\n</think>\n\n"
_GENERATION_PROMPT = "<|im_start|>assistant\n{% endif %}"
assert _GENERATION_PROMPT in CHAT_TEMPLATE, "toy_run.CHAT_TEMPLATE changed: update the nothink template"
TEMPLATES = {  # --template: the chat template the start is trained, rolled out and evaluated with
    "plain": CHAT_TEMPLATE,
    "nothink": CHAT_TEMPLATE.replace(_GENERATION_PROMPT, "<|im_start|>assistant\n" + NOTHINK + "{% endif %}"),
}
# SFT runs on this many threads whatever --threads says: 1 and 2 gave bit-identical weights here (docs: the builds),
# but a kernel that splits its float sums by thread count would carry a last-bit change through 1,200 steps.
SFT_THREADS = 1
VERSIONED = ("torch", "transformers", "tokenizers", "numpy", "safetensors")
INFO = "info.json"


def library_versions() -> dict[str, str]:
    from importlib.metadata import version

    return {"python": platform.python_version(), **{name: version(name) for name in VERSIONED}}


def weights_hash(model_dir: Path) -> str:
    """sha256 over the saved tensors (names, dtypes, shapes and bytes, in name order) and the tokenizer file: equal
    iff the start is the same model, whatever the safetensors file's own layout."""
    import torch
    from safetensors.torch import load_file

    h = hashlib.sha256()
    for name, t in sorted(load_file(model_dir / "model.safetensors").items()):
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.contiguous().view(torch.uint8).numpy().tobytes())
    h.update((model_dir / "tokenizer.json").read_bytes())
    return h.hexdigest()


def start_info(start_dir: Path) -> dict | None:
    """The start's info.json (None when there is none), after checking that the files on disk are the model it
    records: a start whose weights were copied or edited under a kept info.json would train as another model."""
    path = start_dir / INFO
    if not path.exists():
        return None
    info = json.loads(path.read_text())
    if weights_hash(start_dir) != info["weights_sha256"]:
        raise SystemExit(
            f"{start_dir}: its model.safetensors / tokenizer.json are not the start {INFO} records (weights hash "
            f"{info['weights_sha256'][:12]}): rebuild it in a fresh --workdir"
        )
    return info


def build_start(out: Path, seed: int, steps: int, template: str = "plain") -> dict:
    """Tokenizer + random tiny Qwen2 (hidden 128, 2 layers, untied) + `steps` SFT steps on the mixture, saved in bf16
    with info.json (seed, template, threads, library versions, weights hash); returns the info."""
    import torch
    from toy_run import prompt_text
    from tradeoff import FILLER_MAX, STEPS_SHARE, draw, question, response
    from transformers import AutoTokenizer, GenerationConfig, Qwen2ForCausalLM

    if template not in TEMPLATES:
        raise ValueError(f"unknown start template {template!r}; give one of {', '.join(TEMPLATES)}")
    t0 = time.time()
    threads, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(SFT_THREADS)
    torch.use_deterministic_algorithms(True)
    rng = random.Random(seed)
    opening = NOTHINK if template == "nothink" else ""

    def sample_response(digits):
        behaviour = "steps" if rng.random() < STEPS_SHARE else "direct"
        return response(rng, digits, behaviour, rng.randint(0, FILLER_MAX))

    corpus = []
    for _ in range(3000):
        d = draw(rng)
        corpus.append(f"user\n{question(d)}\nassistant\n{opening}{sample_response(d)}")
    fast = train_tokenizer(out, corpus, TEMPLATES[template])
    cfg = tiny_config(fast)
    eos, pad = cfg.eos_token_id, cfg.pad_token_id
    # train with the tokenizer vLLM and the trainer will load (transformers reloads it as Qwen2's; toy_run.py)
    cfg.save_pretrained(out)
    tok = AutoTokenizer.from_pretrained(out)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20))
    model.train()
    try:
        for step in range(steps):
            ids, weights = [], []
            for _ in range(32):
                d = draw(rng)
                p = tok(prompt_text(tok, question(d)), add_special_tokens=False).input_ids
                r = tok(sample_response(d), add_special_tokens=False).input_ids + [eos]
                ids.append(p + r)
                weights.append([0.0] * len(p) + [1.0] * len(r))
            width = max(map(len, ids))
            x = torch.tensor([a + [pad] * (width - len(a)) for a in ids])
            w = torch.tensor([a + [0.0] * (width - len(a)) for a in weights])[:, 1:]
            mask = torch.tensor([[1] * len(a) + [0] * (width - len(a)) for a in ids])
            logits = model(input_ids=x, attention_mask=mask).logits[:, :-1].float()
            nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), x[:, 1:], reduction="none")
            loss = (nll * w).sum() / w.sum()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step(), sched.step(), opt.zero_grad()
            if step % 200 == 0:
                print(f"  sft seed {seed} step {step}: loss {loss.item():.3f}", flush=True)
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)
    model.generation_config = GenerationConfig(eos_token_id=eos, pad_token_id=pad)
    model.to(torch.bfloat16).save_pretrained(out)
    probe = prompt_text(tok, question([3, 4, 5, 6])) + response(rng, [3, 4, 5, 6], "steps", 3)
    assert AutoTokenizer.from_pretrained(out)(probe).input_ids == tok(probe).input_ids, "tokenizer changed on reload"
    info = {
        "seed": seed,
        "template": template,
        "sft_steps": steps,
        "sft_threads": SFT_THREADS,
        "sft_loss": loss.item(),
        "sft_s": round(time.time() - t0, 1),
        "versions": library_versions(),
        "weights_sha256": weights_hash(out),
    }
    (out / INFO).write_text(json.dumps(info, indent=1))
    return info
