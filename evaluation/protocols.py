"""Evaluation protocols: the papers' presets (`sober`, `grpo-lead-7b`, `grpo-lead-14b`) and prompt templates,
resolved into one explicit `GenConfig`. Every field can be overridden; the resolved values are what the run records.
`PROVENANCE` says, per preset, which public harness it mirrors and where we differ (recorded in summary.json). It
does not generate or score. See docs/evaluation.md.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from lead_recipes.benchmarks import BENCHMARKS as ALL_BENCHMARKS
from lead_recipes.prompts import L1_MODES, PROMPT_TEMPLATES, fill_template, l1_suffix, resolve_template


@dataclass(frozen=True)
class GenConfig:
    """Everything that determines the generations (recorded verbatim in config.json / summary.json)."""

    preset: str
    temperature: float
    top_p: float
    min_p: float
    top_k: int  # -1 = off
    max_new_tokens: int | None  # None: unknown (a replay whose file and flags do not say)
    n_per_benchmark: dict = field(default_factory=dict)
    n_default: int = 1
    seed: int = 0  # sample s of every problem uses seed + s (Sober: one seed per run)
    prompt_template_name: str = "sober"
    prompt_template: str = PROMPT_TEMPLATES["sober"]
    chat_template_enable: bool = True
    system_prompt: str | None = None
    l1_budget: int | None = None  # L1 (arXiv 2503.04697): " Think for N tokens." after the user turn, as in training
    l1_mode: str | None = None  # "exact" or "max" (" Think for maximum N tokens."); set with l1_budget

    def n_for(self, benchmark: str) -> int:
        return int(self.n_per_benchmark.get(benchmark, self.n_default))

    def to_dict(self) -> dict:
        return asdict(self)


PRESETS = {
    "sober": GenConfig(
        preset="sober",
        temperature=0.8,
        top_p=0.9,
        min_p=0.0,
        top_k=-1,
        max_new_tokens=32768,
        n_per_benchmark={"aime2024": 10, "aime2025": 10, "amc2023": 10, "math500": 3, "olympiadbench": 3},
        n_default=3,
        prompt_template_name="sober",
        prompt_template=PROMPT_TEMPLATES["sober"],
    ),
    "grpo-lead-7b": GenConfig(
        preset="grpo-lead-7b",
        temperature=0.6,
        top_p=1.0,
        min_p=0.0,
        top_k=-1,
        max_new_tokens=8192,
        n_per_benchmark={},
        n_default=32,
        prompt_template_name="deepscaler",
        prompt_template=PROMPT_TEMPLATES["deepscaler"],
    ),
    "grpo-lead-14b": GenConfig(
        preset="grpo-lead-14b",
        temperature=0.6,
        top_p=1.0,
        min_p=0.0,
        top_k=-1,
        max_new_tokens=14336,
        n_per_benchmark={},
        n_default=32,
        prompt_template_name="deepscaler",
        prompt_template=PROMPT_TEMPLATES["deepscaler"],
    ),
}
# The benchmarks each paper reports; a run's default set, and the set its summary average is labelled against.
DEFAULT_BENCHMARKS = {
    "sober": ALL_BENCHMARKS,
    "grpo-lead-7b": ("aime2024", "aime2025"),
    "grpo-lead-14b": ("aime2024", "aime2025"),
}

_LIGHTEVAL = "https://github.com/huggingface/lighteval"
_SOBER = "https://github.com/zhikaili1150/sober-reasoning"  # a LEAD co-author's fork of the Sober harness
_GRPO_LEAD = "https://github.com/aeroplanepaper/GRPO-LEAD"
_GRPO_LEAD_DIFFS = [
    "Pass@1 is the mean over the 32 samples (avg@32); the paper does not say how it computed it",
    "Cons@32 clusters answers with math-verify equivalence, ties to the earliest sample; the paper releases no "
    "voting code",
    "min_p 0.01 (authors' README, not the paper) is off unless --sampling.min_p 0.01 is given",
    "top-p 1.0 and no system prompt: the paper states neither; chat template on (DeepSeek-R1-Distill models)",
    "grading with this package's grader, not the authors' deepscaler reward function; that function reads only "
    "the \\boxed{} answer, which --grade.extraction boxed mirrors (the default final_answer also reads an unboxed "
    "closing statement)",
]
PROVENANCE = {
    "sober": {
        "paper": "LEAD (arXiv 2605.09806, evaluation setup) following Sober Reasoning (Hochlehnert et al. 2025, "
        "arXiv 2504.07086)",
        "mirrors": f"the Sober Reasoning lighteval + vLLM setup ({_SOBER}, main.py / lighteval_tasks.py; "
        f"{_LIGHTEVAL} MATH_QUERY_TEMPLATE)",
        "paper_benchmarks": list(ALL_BENCHMARKS),
        "differences": [
            "one run with n samples per problem, sample s seeded seed + s, instead of n separate lighteval runs "
            "with seeds 0..n-1 (same sampling distribution; texts differ from lighteval's)",
            "max new tokens 32768 is lighteval's default; LEAD does not state its evaluation cap",
            "length = generated tokens as the engine counts them (no BOS); Sober re-encodes the text with BOS (+1)",
            "grading with this package's grader (math-verify based) rather than lighteval's extractive_match, "
            "which takes the boxed answer first and otherwise the last LaTeX/expression anywhere in the text; "
            "--grade.extraction final_answer (default) reads only the closing statement when there is no box",
        ],
    },
    "grpo-lead-7b": {
        "paper": "GRPO-LEAD (Zhang & Zuo 2025, arXiv 2504.09696), 7B models: Sec. 4.3 (8k test length), Sec. 4.4",
        "mirrors": f"the paper's evaluation protocol; the authors' scripts ({_GRPO_LEAD}) for the prompt",
        "paper_benchmarks": ["aime2024", "aime2025"],
        "differences": ["8k read as 8192 tokens"] + _GRPO_LEAD_DIFFS,
    },
    "grpo-lead-14b": {
        "paper": "GRPO-LEAD (Zhang & Zuo 2025, arXiv 2504.09696), 14B models: "
        "Sec. 4.3 (14k test length), Sec. 4.4, Sec. 5.3",
        "mirrors": f"the paper's evaluation protocol; the authors' scripts ({_GRPO_LEAD}) for the prompt",
        "paper_benchmarks": ["aime2024", "aime2025"],
        "differences": [
            "14k read as 14336 = 14 x 1024 tokens, the 14B recipes' training generation length "
            "(the authors' README says 14k)"
        ]
        + _GRPO_LEAD_DIFFS,
    },
}


def canonical(preset: str) -> str:
    """`preset` itself when it names a preset (ValueError for an unknown name)."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
    return preset


def benchmark_set(preset: str, names) -> dict:
    """What a summary's average covers: the benchmarks, and whether they are the preset's paper set."""
    names, paper = list(names), list(DEFAULT_BENCHMARKS[canonical(preset)])
    same = sorted(names) == sorted(paper)
    return {
        "benchmarks": names,
        "label": "+".join(names),
        "paper_set": same,
        "note": ("the paper's benchmark set" if same else f"differs from the paper's set ({'+'.join(paper)})"),
    }


def resolve(
    preset: str,
    *,
    temperature=None,
    top_p=None,
    min_p=None,
    top_k=None,
    max_new_tokens=None,
    n=None,
    seed=None,
    prompt_template=None,
    chat_template_enable=None,
    system_prompt=None,
    n_per_benchmark: dict | None = None,
    l1_budget=None,
    l1_mode=None,
) -> GenConfig:
    """Preset + overrides → GenConfig. `n` overrides every benchmark's sample count (`n_per_benchmark`, e.g. read
    from a replay file, sets them one by one; `n` wins); `prompt_template` is a template name from
    PROMPT_TEMPLATES or a literal containing "{problem}"; `l1_budget` appends L1's target (`l1_mode` exact by
    default). Invalid values raise ValueError."""
    cfg = PRESETS[canonical(preset)]
    changes = {
        k: v
        for k, v in dict(
            temperature=temperature,
            top_p=top_p,
            min_p=min_p,
            top_k=top_k,
            max_new_tokens=max_new_tokens,
            seed=seed,
            chat_template_enable=chat_template_enable,
            system_prompt=system_prompt,
            l1_budget=l1_budget,
        ).items()
        if v is not None
    }
    if l1_budget is not None or l1_mode is not None:
        if l1_budget is None or l1_mode not in (None, *L1_MODES) or not int(l1_budget) >= 1:
            raise ValueError(
                f"an L1 prompt needs a budget ≥ 1 (--prompt.l1_budget) and a mode of {', '.join(L1_MODES)} "
                f"(--prompt.l1_mode), got {l1_budget!r} and {l1_mode!r}"
            )
        changes.update(l1_budget=int(l1_budget), l1_mode=l1_mode or "exact")
    if n is not None:
        changes.update(n_per_benchmark={}, n_default=int(n))
    elif n_per_benchmark:
        changes.update(n_per_benchmark={k: int(v) for k, v in n_per_benchmark.items()})
    if prompt_template is not None:
        name, text = resolve_template(prompt_template)
        changes.update(prompt_template_name=name, prompt_template=text)
    cfg = replace(cfg, **changes)
    if not cfg.temperature >= 0:
        raise ValueError(f"temperature must be >= 0, got {cfg.temperature}")
    if not 0 < cfg.top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {cfg.top_p}")
    if not 0 <= cfg.min_p < 1:
        raise ValueError(f"min_p must be in [0, 1), got {cfg.min_p}")
    if cfg.max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {cfg.max_new_tokens}")
    if cfg.l1_budget is not None and cfg.l1_budget > cfg.max_new_tokens:
        raise ValueError(
            f"--prompt.l1_budget {cfg.l1_budget} asks for more tokens than max new tokens {cfg.max_new_tokens}"
        )
    if cfg.n_default < 1 or any(int(v) < 1 for v in cfg.n_per_benchmark.values()):
        raise ValueError("n (samples per problem) must be >= 1")
    return cfg


def build_user_text(cfg: GenConfig, problem: str) -> str:
    """The user-turn text: the template with the problem inserted, then L1's target when set (as `data build`
    writes them)."""
    text = fill_template(cfg.prompt_template, problem)
    return text + l1_suffix(cfg.l1_budget, cfg.l1_mode) if cfg.l1_budget is not None else text


def build_messages(cfg: GenConfig, problem: str) -> list[dict]:
    """Chat messages for a problem: optional system prompt (none in either paper), then the user turn."""
    msgs = [{"role": "system", "content": cfg.system_prompt}] if cfg.system_prompt else []
    return msgs + [{"role": "user", "content": build_user_text(cfg, problem)}]


def render_prompt(cfg: GenConfig, problem: str, tokenizer=None) -> str:
    """The exact prompt string sent to a completion engine: the chat template applied with
    add_generation_prompt=True when `chat_template_enable` (needs a tokenizer), else the raw user text."""
    if not cfg.chat_template_enable:
        return build_user_text(cfg, problem)
    if tokenizer is None:
        raise ValueError(
            "the chat template is on but no tokenizer was given (pass --eval.tokenizer or turn it off "
            "with --no-prompt.chat_template_enable)"
        )
    return tokenizer.apply_chat_template(build_messages(cfg, problem), tokenize=False, add_generation_prompt=True)
