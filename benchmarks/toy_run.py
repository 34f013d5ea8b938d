"""Toy run: do the length-aware methods shorten answers in the real OpenRLHF loop, on a CPU, at the same accuracy?
A tiny Qwen2 is fine-tuned on "What is a + b?" with random filler words, then each method runs the same RL steps
through the real `lead-recipes train` under the CPU harness of tests/cpu_e2e; per method it prints accuracy and
length at the start and the end, and plots them over steps. Not a CI test. Setup, needs and results:
docs/benchmarks.md#setup (the toy run's section).

    .venv/bin/python benchmarks/toy_run.py [--methods grpo,lead,leash,grpo-lead,composed] [--steps 40] \
        [--workdir DIR] [--plot docs/img/toy_run.png] [--report-only]"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILLER = ["hmm", "let", "me", "think", "okay", "so", "well", "wait", "right", "now"]
FILLER_MAX = 28  # filler words before the answer: uniform in 0..FILLER_MAX
ANSWER_WEIGHT = 4.0  # weight of the answer's digit tokens in the SFT loss (the rest weigh 1)
BUDGET = 10  # Leash's target / composed's budget in tokens: about half the start mean length
SFT_WRONG = 0.10  # share of SFT answers that are deliberately wrong (mixed groups for RL)
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


# ----------------------------------------------------------------------------------------------------- task + model
def questions() -> list[tuple[str, str]]:
    return [(f"What is {a} + {b}?", str(a + b)) for a in range(10) for b in range(10)]


def response(rng: random.Random, answer: str) -> str:
    words = [rng.choice(FILLER) for _ in range(rng.randint(0, FILLER_MAX))]
    return " ".join(words + [f"\\boxed{{{answer}}}"])


def build_tokenizer(out: Path):
    rng = random.Random(0)
    corpus = [f"user\n{q}\nassistant\n{response(rng, s)}" for _ in range(20) for q, s in questions()]
    return train_tokenizer(out, corpus)


def train_tokenizer(out: Path, corpus: list[str], chat_template: str = CHAT_TEMPLATE):
    """A byte-level BPE of 384 tokens trained on `corpus`, with `chat_template`, saved to `out`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        corpus,
        trainers.BpeTrainer(
            vocab_size=384,
            special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = chat_template
    fast.save_pretrained(out)
    return fast


def tiny_config(tok):
    """The tiny Qwen2 both benchmarks train (hidden 128, 2 layers, untied), its vocabulary and ids from `tok`."""
    from transformers import Qwen2Config

    eos, pad = tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")
    return Qwen2Config(
        vocab_size=len(tok),
        hidden_size=128,
        intermediate_size=384,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=False,
        bos_token_id=eos,
        eos_token_id=eos,
        pad_token_id=pad,
    )


def prompt_text(tok, q: str) -> str:
    return tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)


def build_start_model(out: Path, max_steps: int, seed: int, stop_acc: float = 0.9) -> dict:
    """Tokenizer + random tiny Qwen2 + SFT until the teacher-forced answer accuracy (vs the true sum, over the
    last 20 batches) reaches `stop_acc` or `max_steps`; saved in bf16 (what the trainer's bf16 actor starts from).
    The answer's digit tokens weigh ANSWER_WEIGHT in the loss: the filler is 20x more tokens of pure noise."""
    import torch
    from transformers import AutoTokenizer, GenerationConfig, Qwen2ForCausalLM

    t0 = time.time()
    torch.set_num_threads(1)
    tok = build_tokenizer(out)
    torch.manual_seed(seed)
    cfg = tiny_config(tok)
    eos, pad = cfg.eos_token_id, cfg.pad_token_id
    # Train with the tokenizer vLLM and the trainer will load: once config.json says qwen2, transformers 5 loads
    # it as Qwen2's tokenizer (its own pre-tokenizer: digits one by one), not as the object built above.
    cfg.save_pretrained(out)
    tok = AutoTokenizer.from_pretrained(out)
    brace = tok.convert_tokens_to_ids("{")
    model = Qwen2ForCausalLM(cfg)
    rng = random.Random(seed)
    qs = questions()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    warm = 20
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm))
    model.train()
    recent: list[float] = []
    for step in range(max_steps):
        ids, weights, truth = [], [], []
        for q, s in rng.sample(qs, 32):
            ans = s if rng.random() >= SFT_WRONG else str(rng.choice([x for x in range(19) if str(x) != s]))
            p = tok(prompt_text(tok, q), add_special_tokens=False).input_ids
            r = tok(response(rng, ans), add_special_tokens=False).input_ids + [eos]
            at = len(p) + r.index(brace) + 1  # first answer token
            w = [0.0] * len(p) + [1.0] * len(r)
            gold = tok(s, add_special_tokens=False).input_ids
            w[at : at + len(gold)] = [ANSWER_WEIGHT] * len(gold)
            ids.append(p + r)
            weights.append(w)
            truth.append((at, gold))
        width = max(map(len, ids))
        x = torch.tensor([a + [pad] * (width - len(a)) for a in ids])
        w = torch.tensor([a + [0.0] * (width - len(a)) for a in weights])
        mask = torch.tensor([[1] * len(a) + [0] * (width - len(a)) for a in ids])
        logits = model(input_ids=x, attention_mask=mask).logits[:, :-1].float()
        nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), x[:, 1:], reduction="none")
        loss = (nll * w[:, 1:]).sum() / w[:, 1:].sum()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step(), sched.step(), opt.zero_grad()
        pred = logits.argmax(-1)
        hits = [pred[i, at - 1 : at - 1 + len(g)].tolist() == g for i, (at, g) in enumerate(truth)]
        recent = (recent + [sum(hits) / len(hits)])[-20:]
        if step % 50 == 0:
            print(
                f"  sft step {step}: loss {float(loss):.3f}, answer accuracy {sum(recent) / len(recent):.3f}",
                flush=True,
            )
        if len(recent) == 20 and sum(recent) / 20 >= stop_acc:
            break
    model.generation_config = GenerationConfig(eos_token_id=eos, pad_token_id=pad)
    model.to(torch.bfloat16).save_pretrained(out)
    probe = prompt_text(tok, "What is 12 + 3?") + response(rng, "15")
    assert AutoTokenizer.from_pretrained(out)(probe).input_ids == tok(probe).input_ids, "tokenizer changed on reload"
    return {
        "sft_steps": step + 1,
        "sft_loss": float(loss),
        "answer_accuracy": sum(recent) / len(recent),
        "sft_s": round(time.time() - t0, 1),
        "vocab": len(tok),
    }


def write_prompts(path: Path, rows: int, seed: int) -> None:
    """`rows` prompts cycling through a shuffled copy of the 100 questions (chat template applied by OpenRLHF)."""
    qs = questions()
    random.Random(seed).shuffle(qs)
    with open(path, "w") as f:
        for i in range(rows):
            q, s = qs[i % len(qs)]
            f.write(json.dumps({"prompt": q, "label": s}) + "\n")


# ------------------------------------------------------------------------------------------------------ evaluation
def generate(
    model_dir: Path, questions: list[str], samples: int, max_new_tokens: int, seed: int
) -> tuple[list[str], list[int], list[bool]]:
    """Every question × `samples` responses at temperature 1: (texts, lengths in tokens with EOS, truncated), in
    question-major order.

    Gumbel-max sampling: argmax(log_softmax(logits) + G) with G drawn from a generator seeded per (question, sample),
    one row per generated position, so two models see the same noise for the same (question, sample, position)."""
    import torch
    from transformers import AutoTokenizer, GenerationConfig, LogitsProcessor, LogitsProcessorList, Qwen2ForCausalLM

    tok = AutoTokenizer.from_pretrained(model_dir)
    tok.padding_side = "left"
    model = Qwen2ForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    rows = [(qi, k) for qi in range(len(questions)) for k in range(samples)]
    vocab = model.config.vocab_size
    noise = torch.empty(len(rows), max_new_tokens, vocab)
    for r, (qi, k) in enumerate(rows):
        g = torch.Generator().manual_seed(seed * 1_000_003 + qi * 1_009 + k)
        u = torch.rand(max_new_tokens, vocab, generator=g).clamp_(1e-10, 1 - 1e-7)
        noise[r] = -torch.log(-torch.log(u))
    enc = tok(
        [prompt_text(tok, questions[qi]) for qi, _ in rows], return_tensors="pt", padding=True, add_special_tokens=False
    )
    width = enc.input_ids.shape[1]

    class Gumbel(LogitsProcessor):
        def __call__(self, input_ids, scores):
            t = input_ids.shape[1] - width
            return torch.log_softmax(scores.float(), -1) + noise[:, t, : scores.shape[1]]

    eos, pad = tok.eos_token_id, tok.pad_token_id
    gen = GenerationConfig(do_sample=False, max_new_tokens=max_new_tokens, eos_token_id=eos, pad_token_id=pad)
    with torch.no_grad():
        out = model.generate(**enc, generation_config=gen, logits_processor=LogitsProcessorList([Gumbel()]))
    texts, lengths, truncated = [], [], []
    for ids in out[:, width:].tolist():
        n = ids.index(eos) + 1 if eos in ids else len(ids)
        lengths.append(n)
        truncated.append(eos not in ids)
        texts.append(tok.decode(ids[:n], skip_special_tokens=True))
    return texts, lengths, truncated


def evaluate(model_dir: Path, samples: int, max_new_tokens: int, seed: int) -> dict:
    """Accuracy and mean length (tokens, EOS included) over every question × `samples` (`generate`)."""
    from lead_recipes.reward.reward_func import grade_samples

    qs = questions()
    texts, lengths, truncated = generate(model_dir, [q for q, _ in qs], samples, max_new_tokens, seed)
    rewards, _ = grade_samples(texts, [""] * len(texts), [qs[i // samples][1] for i in range(len(texts))])
    by_filler: dict[str, list[float]] = {}  # accuracy by number of filler words: does length cost correctness?
    for text, r in zip(texts, rewards):
        n = len(text.split()) - 1
        by_filler.setdefault("0-9" if n < 10 else "10-19" if n < 20 else "20+", []).append(r)
    return {
        "accuracy": sum(rewards) / len(rewards),
        "length": sum(lengths) / len(lengths),
        "n": len(texts),
        "truncated": sum(truncated) / len(texts),
        "example": texts[0],
        "by_filler": {k: (round(sum(v) / len(v), 3), len(v)) for k, v in sorted(by_filler.items())},
    }


# ------------------------------------------------------------------------------------------------------- training
def method_flags(method: str, max_new_tokens: int) -> list[str]:
    """The toy's per-method settings (docs/benchmarks.md says why each differs from the paper default)."""
    return {
        "grpo": [],
        "lead": ["--recipe.lead.b_max", str(max_new_tokens), "--recipe.lead.l_min", "4"],
        "leash": ["--recipe.leash.target_length", str(BUDGET), "--recipe.leash.lr", "0.05"],
        "grpo-lead": [],
        "composed": [
            "--recipe.lead.b_max",
            str(max_new_tokens),
            "--recipe.lead.l_min",
            "4",
            "--recipe.leash.lr",
            "0.05",
            "--recipe.composed.budget_tokens",
            str(BUDGET),
        ],
    }[method]


def train_flags(args, data: Path) -> list[str]:
    """Overrides on top of the harness's CPU smoke command: this toy's data, sizes and optimiser."""
    return [
        "--data.prompt_dataset",
        str(data),
        "--data.max_samples",
        str(args.steps * args.prompts_per_step),
        "--rollout.max_new_tokens",
        str(args.max_new_tokens),
        "--rollout.batch_size",
        str(args.prompts_per_step),
        "--rollout.n_samples_per_prompt",
        str(args.n),
        "--rollout.micro_batch_size",
        "16",
        "--train.batch_size",
        str(args.prompts_per_step * args.n),
        "--train.micro_batch_size",
        "16",
        "--actor.adam.lr",
        str(args.lr),
        "--ckpt.save_steps",
        "-1",
    ]


def curves(scalars: dict) -> tuple[list[int], list[float], list[float]]:
    acc, length = scalars.get("train/recipe/correct_rate", {}), scalars.get("train/recipe/length_mean", {})
    steps = sorted(set(acc) & set(length))
    return steps, [acc[s] for s in steps], [length[s] for s in steps]


def steps_to_half(steps: list[int], lengths: list[float], start_len: float) -> int | None:
    return next((s for s, v in zip(steps, lengths) if v <= start_len / 2), None)


def _corr(xs: list[float], ys: list[float]) -> float | None:
    sxy, sxx, syy = (sum(a * b for a, b in zip(u, v)) for u, v in ((xs, ys), (xs, xs), (ys, ys)))
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else None


def length_advantage_corr(run_dir: Path, batch: int) -> dict:
    """Pearson correlation of response length and the advantage the actor trained on, both centred within each
    prompt's group, over every trained sample (the harness's training-side record, one block of `batch` rows per
    step). Negative: the method pays shorter answers to the same prompt more; 0: no length signal. Also split:
    the correct answers of groups with any correct answer (centred over those), and groups with none."""
    import glob

    rows = [
        json.loads(line)
        for f in sorted(glob.glob(str(run_dir / "ckpt" / "e2e_record" / "*.jsonl")))
        for line in open(f, encoding="utf-8")
    ]
    pairs: dict[str, tuple[list, list]] = {"all": ([], []), "correct": ([], []), "unsolved": ([], [])}
    unsolved = 0
    for at in range(0, len(rows), batch):
        groups: dict[str, list] = {}
        for r in rows[at : at + batch]:
            groups.setdefault(r["prompt"], []).append(
                (len(r["adv"]), r["info"]["recipe_advantage"], r["info"]["correct"] > 0)
            )
        for g in groups.values():
            right = [x for x in g if x[2]]
            unsolved += not right
            for key, members in (("all", g), ("correct" if right else "unsolved", right or g)):
                ml, ma = (sum(x[i] for x in members) / len(members) for i in (0, 1))
                pairs[key][0].extend(x[0] - ml for x in members)
                pairs[key][1].extend(round(x[1] - ma, 6) for x in members)  # equal advantages: exactly 0
    return {**{k: _corr(*v) for k, v in pairs.items()}, "unsolved_groups": unsolved}


def report(work: Path, args, t_all: float) -> None:
    data = json.loads((work / "results.json").read_text())
    start, results = data["start"], data["results"]
    if "by_filler" not in start:  # a results file without the breakdown: same seed, same numbers
        start = evaluate(work / "start", args.eval_samples, args.max_new_tokens, args.seed)
    plot(results, start, args.plot)
    print(
        f"\nstart (every method): accuracy {start['accuracy']:.3f}, mean length {start['length']:.1f} "
        f"({start['n']} samples); accuracy (samples) by filler words: {start['by_filler']}"
    )
    print(
        "| method | accuracy start → end | mean length start → end | length change | steps to half the start "
        "length | within-group corr(length, advantage): all / correct answers / groups with none correct (n) "
        "| wall s |"
    )
    print("|---|---|---|---|---|---|---|")
    fmt = lambda c: "n/a" if c is None else f"{c:+.3f}"  # noqa: E731
    for m, r in results.items():
        e, c = r["end"], length_advantage_corr(work / m, args.prompts_per_step * args.n)
        half = r["half"] if r["half"] is not None else f"not within {len(r['steps'])}"
        print(
            f"| {m} | {start['accuracy']:.3f} → {e['accuracy']:.3f} | {start['length']:.1f} → {e['length']:.1f} "
            f"| {100 * (e['length'] / start['length'] - 1):+.0f}% | {half} | {fmt(c['all'])} / {fmt(c['correct'])}"
            f" / {fmt(c['unsolved'])} ({c['unsolved_groups']}) | {r['wall_s']:.0f} |"
        )
    print(f"total wall {time.time() - t_all:.0f} s; load average {os.getloadavg()}; plot {args.plot}")


def plot(results: dict, start: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_a, ax_l) = plt.subplots(1, 2, figsize=(11, 4))
    for m, r in results.items():
        ax_a.plot(r["steps"], r["acc"], marker="o", ms=3, label=m)
        ax_l.plot(r["steps"], r["len"], marker="o", ms=3, label=m)
    ax_l.axhline(start["length"] / 2, color="grey", ls=":", lw=1, label="half the start length")
    ax_a.set(xlabel="RL step", ylabel="accuracy of the step's rollouts", ylim=(0, 1.02))
    ax_l.set(xlabel="RL step", ylabel="mean response length (tokens)", ylim=(0, None))
    for ax in (ax_a, ax_l):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Toy run: tiny Qwen2 on 'a + b' after a random filler preamble (CPU, real OpenRLHF loop)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    ap.add_argument("--methods", default="grpo,lead,leash,grpo-lead,composed")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--prompts-per-step", type=int, default=8)
    ap.add_argument("--n", type=int, default=8, help="samples per prompt")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--sft-steps", type=int, default=2000, help="at most; stops at 0.9 answer accuracy")
    ap.add_argument("--eval-samples", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", type=Path, default=None, help="default: a new temp dir")
    ap.add_argument("--plot", type=Path, default=Path("docs/img/toy_run.png"))
    ap.add_argument("--report-only", action="store_true", help="table and plot from an earlier --workdir's results")
    args = ap.parse_args(argv)
    if args.report_only and args.workdir is None:
        ap.error("--report-only needs the --workdir of an earlier run")
    import tempfile

    sys.path.insert(0, str(ROOT / "tests"))
    from cpu_e2e import harness

    t_all = time.time()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="toy-run-"))
    if args.report_only:
        report(work, args, t_all)
        return 0
    work.mkdir(parents=True, exist_ok=True)
    print(f"workdir {work}; load average {os.getloadavg()}", flush=True)
    start_dir = work / "start"
    if not (start_dir / "config.json").exists():
        print("sft:", build_start_model(start_dir, args.sft_steps, args.seed), flush=True)
    start = evaluate(start_dir, args.eval_samples, args.max_new_tokens, args.seed)
    print(f"start: {start}", flush=True)
    write_prompts(work / "prompts.jsonl", args.steps * args.prompts_per_step, args.seed)
    results = {}
    cluster = harness.RayCluster()
    try:
        for m in args.methods.split(","):
            run = harness.Run(
                cluster,
                start_dir,
                work / m,
                m,
                extra=[*train_flags(args, work / "prompts.jsonl"), *method_flags(m, args.max_new_tokens)],
            )
            rc = run.wait(timeout=1800)
            if rc != 0:
                print(f"{m}: lead-recipes train exited {rc}; tail:\n{run.tail()}", flush=True)
                continue
            scalars = run.scalars()
            steps, acc, length = curves(scalars)
            end = evaluate(run.dir / "hf", args.eval_samples, args.max_new_tokens, args.seed)
            results[m] = {
                "steps": steps,
                "acc": acc,
                "len": length,
                "end": end,
                "wall_s": run.wall_s,
                "half": steps_to_half(steps, length, start["length"]),
                "recipe": {k: v for k, v in scalars.items() if k.startswith("train/recipe/")},
            }
            print(f"{m}: {run.wall_s:.0f} s, end {end}, curve len {[round(x, 1) for x in length]}", flush=True)
    finally:
        cluster.stop()
    (work / "results.json").write_text(
        json.dumps({"start": start, "results": results, "args": vars(args)}, default=str, indent=1)
    )
    report(work, args, t_all)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
