"""The prompt templates, defined once: `lead-recipes data build` writes training prompts with them and
`lead-recipes eval` evaluates with them, under the same names. `{problem}` is the problem text; the result is the
user turn; `fill_template` inserts it the same way for both. It does not apply chat templates (the trainer's
`--data.apply_chat_template` or the eval backend does). See docs/launch.md#lead-recipes-data.
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
