"""The prompt templates, defined once: `lead-recipes data build` writes training prompts with them and
`lead-recipes eval` evaluates with them, under the same names. `{problem}` is the problem text; the result is the
user turn; `fill_template` inserts it the same way for both. It does not apply chat templates (the trainer's
`--data.apply_chat_template` or the eval backend does). The length instructions of L1 and ThinkPrune live here too.
See docs/launch.md#lead-recipes-data.
"""

from __future__ import annotations

PROMPT_TEMPLATES = {
    # lighteval's MATH_QUERY_TEMPLATE (Sober Reasoning, arXiv 2504.07086, as LEAD evaluates), its two spaces after
    # "clearly." included.
    "sober": (
        "Solve the following math problem efficiently and clearly.  The last line of your response should be "
        "of the following format: 'Therefore, the final answer is: $\\boxed{{ANSWER}}$. I hope it is "
        "correct' (without quotes) where ANSWER is just the final number or expression that solves the "
        "problem. Think step by step before answering.\n\n{problem}"
    ),
    # DeepScaleR's prompt: LEAD's released training data and GRPO-LEAD's code (github.com/aeroplanepaper/GRPO-LEAD)
    # train and evaluate with it.
    "deepscaler": "{problem} Let's think step by step and output the final answer within \\boxed{{}}.",
    # DeepSeek-R1's recommended math instruction (its model card's usage recommendations), also Qwen2.5-Math's CoT
    # prompt.
    "r1": "{problem}\nPlease reason step by step, and put your final answer within \\boxed{{}}.",
    # The problem as it is (a source that carries its own instruction).
    "raw": "{problem}",
}


# L1 (arXiv 2503.04697, Sec. 3): the target N appended to the user turn, after the instruction; the authors' data
# script (cmu-l3/l1 scripts/data/deepscaler_dataset.py) spells both modes so.
L1_SUFFIXES = {"exact": " Think for {n} tokens.", "max": " Think for maximum {n} tokens."}
L1_MODES = tuple(L1_SUFFIXES)
# ThinkPrune (arXiv 2504.01296): the system prompt of the authors' data script
# (examples/data_preprocess/preprocess_past_aime_amc.py), to which each round appends its token limit L.
SYSTEM_PROMPTS = {
    "thinkprune": (
        "A conversation between User and Assistant. The user asks a question, and the Assistant solves it. The "
        "assistant first thinks about the reasoning process in the mind and then provides the user with the "
        "answer. The reasoning process and answer are enclosed within <think></think> and <answer></answer> tags, "
        "respectively, i.e., <think> reasoning process here</think><answer> answer here</answer>."
    ),
}
THINKPRUNE_LIMIT = " The output of the assistant should be within {limit} tokens."


def l1_suffix(n: int, mode: str) -> str:
    """L1's length instruction for target `n` tokens: " Think for N tokens." (exact) or the `max` form."""
    if mode not in L1_SUFFIXES:
        raise ValueError(f"L1 mode must be one of {', '.join(L1_MODES)}, got {mode!r}")
    return L1_SUFFIXES[mode].format(n=int(n))


def system_prompt(name_or_text: str | None, limit: int | None = None) -> str | None:
    """The system message: a name of SYSTEM_PROMPTS or a literal, with ThinkPrune's limit sentence appended when
    `limit` is given (without a system message the sentence alone)."""
    text = SYSTEM_PROMPTS.get(name_or_text, name_or_text) if name_or_text else None
    if limit is None:
        return text
    sentence = THINKPRUNE_LIMIT.format(limit=int(limit))
    return text + sentence if text else sentence.lstrip()


def resolve_template(name_or_text: str) -> tuple[str, str]:
    """(name, template) for a template name or a literal template (named "custom"); ValueError when it is
    neither."""
    if name_or_text in PROMPT_TEMPLATES:
        return name_or_text, PROMPT_TEMPLATES[name_or_text]
    if "{problem}" in name_or_text:
        return "custom", name_or_text
    raise ValueError(
        f"--prompt.template must be one of {', '.join(PROMPT_TEMPLATES)} or a template containing "
        f"{{problem}}, got {name_or_text!r}"
    )


def fill_template(template: str, problem: str) -> str:
    """The user turn: `template` with the problem inserted. `{{`/`}}` are literal braces (the named templates are
    written for str.format), and any other brace is kept as it is, so a custom `... \\boxed{} ...` works; braces in
    the problem are never interpreted."""
    marked = template.replace("{{", "\x00").replace("}}", "\x01")
    return problem.join(part.replace("\x00", "{").replace("\x01", "}") for part in marked.split("{problem}"))
