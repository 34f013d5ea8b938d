"""The command line of `lead-recipes train` as a user types it: the method's reference recipe (or
`--recipe.name NAME|FILE|none`) as the base, the user's flags replacing its values, the defaults the method implies
filled in and reported, HTTP reward URLs routed through reward/remote_reward.py, and every still-missing flag
named at once; `with_recipe` attaches the recipe to OpenRLHF's parsed args. It does not parse values (OpenRLHF's
parser and lead_recipes.flags do), print or start anything.
See docs/training.md#the-command-line-a-base-recipe-your-flags-on-top.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from lead_recipes.methods import sections_read
from lead_recipes.methods.config import REGISTRY, entry
from lead_recipes.recipes.openrlhf_parser import openrlhf_default
from lead_recipes.training.first_token import EXECUTOR_FILE
from lead_recipes.training.preemption import save_request_path

NONE = "none"
DEFAULT_CAP = 4000  # LEAD's B_max, the cap of the reference recipe lead-1.5b
PROMPT_BUDGET = 1024  # tokens of prompt room added to the cap when --data.max_len is filled in
DEFAULT_SAMPLES = 8  # G: every recipe's group size
REWARD_URLS_ENV = "LEAD_RECIPES_REWARD_URLS"
REQUIRED = {
    "--actor.model_name_or_path": "the policy model (a local directory or a cached Hugging Face id)",
    "--data.prompt_dataset": "the prompt data (JSONL with prompt/label columns: `lead-recipes data build`)",
}


@dataclass
class Resolved:
    argv: list[str]  # base recipe flags overlaid by the user's, then the filled-in defaults
    base: str | None  # the base recipe's name or file, None for `--recipe.name none`
    filled: list[str] = field(default_factory=list)  # "--flag value (why)" for each filled-in default
    missing: list[str] = field(default_factory=list)  # the flags still required (REQUIRED says what each is)
    env: dict[str, str] = field(default_factory=dict)  # variables the caller exports (reward URLs)
    user_flags: set[str] = field(default_factory=set)  # the flags the user typed


def flag_names(argv: list[str]) -> set[str]:
    return {t.split("=", 1)[0] for t in argv if t.startswith("--")}


def drop_flags(argv: list[str], names: set[str]) -> list[str]:
    """argv without each flag in `names` and the values after it (up to the next `--` token)."""
    out, skipping = [], False
    for token in argv:
        if token.startswith("--"):
            skipping = token.split("=", 1)[0] in names
        if not skipping:
            out.append(token)
    return out


def flag_values(argv: list[str], name: str) -> list[str] | None:
    """The values of the last occurrence of `name` (None when absent)."""
    found = None
    for i, token in enumerate(argv):
        if token == name:
            j = i + 1
            while j < len(argv) and not argv[j].startswith("--"):
                j += 1
            found = argv[i + 1 : j]
        elif token.startswith(name + "="):
            found = [token.split("=", 1)[1]]
    return found


def length_penalty_errors(args, method: str) -> list[str]:
    """OpenRLHF's DAPO overlong / ProRL stop-properly settings (`args.reward`) that would not do what they say with
    `method` (docs/training.md#dapos-overlong-penalty), one line each: refused by `lead-recipes train` before anything
    starts and by the plug-in for any other caller."""
    # read as OpenRLHF's apply_length_penalties reads them (an args object may lack the ones left off)
    cap, errors = getattr(args.rollout, "max_new_tokens", None), []
    buffer, coef = (
        getattr(args.reward, "overlong_buffer_len", None),
        getattr(args.reward, "stop_properly_penalty_coef", None),
    )
    factor = getattr(args.reward, "overlong_penalty_factor", 1.0)
    if buffer is not None and cap is None:
        # OpenRLHF then measures the buffer from data.max_len (prompt + response), while vLLM stops each response at
        # max_len - its prompt: a response cut at its real cap gets part of the penalty (-0.5 instead of -1 for a
        # 512-token prompt, max_len 4608, buffer 1024)
        errors.append(
            "--reward.overlong_buffer_len without --rollout.max_new_tokens: OpenRLHF would measure the overlong "
            "buffer from --data.max_len (prompt + response), so a response cut at its real cap gets only part of "
            "the penalty; set --rollout.max_new_tokens"
        )
    elif buffer is not None and not 0 < buffer <= cap:
        errors.append(
            f"--reward.overlong_buffer_len {buffer} must be > 0 (0 never penalises) and ≤ --rollout.max_new_tokens "
            f"{cap} (the penalty starts at max_new_tokens - buffer)"
        )
    if buffer is not None and not factor >= 0:
        errors.append(f"--reward.overlong_penalty_factor {factor} must be ≥ 0 (a negative factor rewards length)")
    if coef is not None and not coef <= 1:
        errors.append(
            f"--reward.stop_properly_penalty_coef {coef}: must be in [0, 1] (scales a truncated sample's reward) or "
            "negative (replaces it)"
        )
    elif coef is not None and not entry(method).reward_is_score:
        # the plug-in hands the method the change of the reward function's 0/1 reward as a reward term; a method
        # that builds its own reward then gets it on top (thinkprune, coef 0: a cut response with the right answer
        # in its text R = -1, a cut wrong one 0)
        plain = " and ".join(e.name for e in REGISTRY if e.reward_is_score)
        errors.append(
            f"--reward.stop_properly_penalty_coef with --recipe.method {method}: it rescales (or replaces) the "
            f"reward function's 0/1 reward of a truncated sample, and only {plain}'s reward is that reward; "
            f"{method} builds its own (the length baselines and grpo-lead already score a truncated sample as "
            "wrong). --reward.overlong_buffer_len is the length penalty every method takes"
        )
    return errors


def monitor_errors(args, method: str) -> list[str]:
    """What a method needing monitor passes (Laser-D/-DE, `MethodEntry.monitor`) lacks in OpenRLHF's args: the eval
    dataset that is its monitor set, a finite --eval.steps, the sync trainer (lead_recipes.training.monitor)."""
    if not entry(method).monitor:
        return []
    errors, ev = [], args.eval
    if not getattr(ev, "dataset", None):
        errors.append(
            f"--recipe.method {method} needs a monitor set: give --eval.dataset (the authors: 500 prompts drawn from "
            f"the training set, 8 samples each at T 0.6 every 20 steps; recipe {entry(method).recipe} sets them)"
        )
    steps = getattr(ev, "steps", -1)
    if not (isinstance(steps, (int, float)) and 0 < steps < float("inf")):
        errors.append(f"--recipe.method {method} needs --eval.steps > 0, the monitor's period (the authors: 20)")
    if getattr(args.train, "async_enable", False):
        errors.append(
            f"--recipe.method {method} does not run with --train.async_enable: its monitor passes are made in the "
            "sync trainer's step (docs/training.md#the-monitor-seam-laser-d-laser-de); drop the flag"
        )
    return errors


def reward_func_path(name: str = "reward_func.py") -> str:
    """The path of a reward-function file of lead_recipes.reward, as OpenRLHF's --reward.remote_url takes it."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "reward", name)


def graded_by(args) -> list[str]:
    """The reward URLs or file the run grades with: `args.reward.remote_url`, or under an executor, where OpenRLHF
    has replaced it by "agent", the one given (`args.recipe_reward_url`, which AdaptThink's executor calls)."""
    urls = args.reward.remote_url or []
    given = getattr(args, "recipe_reward_url", None)
    return [u for u in given.split(",") if u] if urls == ["agent"] and given else urls


def with_recipe(args, recipe, argv: list[str]):
    """OpenRLHF's nested args (parsed from `argv`) plus what the plug-in reads from them: `args.recipe` (the
    RecipeConfig), `args.recipe_save_request` (the save-on-request file, resolved here: the trainer's Ray actors lack
    our env), `args.recipe_run_name_given` (a resume keeps the stopped run's name unless one was given) and
    `args.recipe_reward_url` (the reward file as given: OpenRLHF replaces it by "agent" when an executor is set, and
    AdaptThink's executor grades with it)."""
    args.recipe = recipe
    args.recipe_reward_url = (flag_values(argv, "--reward.remote_url") or [None])[0]
    args.recipe_save_request = save_request_path(args.ckpt.path)
    args.recipe_run_name_given = "--logger.wandb.run_name" in {t.split("=", 1)[0] for t in argv}
    return args


def resolve(argv: list[str], parser) -> Resolved:
    """Overlay `argv` on its base recipe and fill in the method's defaults. `parser` is the train command's own
    parser (its flags are told apart from OpenRLHF's with it). lead_recipes.recipes.recipe.RecipeError for a bad base
    recipe."""
    ours, _ = parser.parse_known_args(argv)
    user = flag_names(argv)
    method = getattr(ours, "recipe.method")
    name = ours.base_recipe or entry(method).recipe
    base: list[str] = []
    model, max_len = flag_values(argv, "--actor.model_name_or_path"), flag_values(argv, "--data.max_len")
    if name != NONE:
        from lead_recipes.recipes.recipe import load_recipe

        # another model is set as `launch --set` sets it: the run's name, directory and W&B name follow it
        sets = [f"{k}={v[0]}" for k, v in (("actor.model_name_or_path", model), ("data.max_len", max_len)) if v]
        base = load_recipe(name, sets if model else []).train_argv()
        if "--recipe.method" not in user and "--recipe.name" in user:  # the chosen recipe's method then
            method = getattr(parser.parse_known_args(base)[0], "recipe.method")
    dropped = user | ({"--data.max_len"} if "--rollout.max_new_tokens" in user else set())
    # a cap given without --data.max_len must not keep the base's max_len: OpenRLHF keeps only the last
    # max_len - max_new_tokens prompt tokens (SingleTurnAgentExecutor), so a larger cap would cut the prompt
    used = drop_flags(base, dropped) + list(argv)
    given = flag_names(parser.parse_known_args(used)[1])
    out = Resolved(argv=used, base=None if name == NONE else name, user_flags=user)

    def fill(flag: str, value, why: str) -> None:
        if flag not in given:
            out.argv += [flag, str(value)]
            out.filled.append(f"{flag} {value} ({why})")
            given.add(flag)

    fill("--algo.advantage.estimator", "group_norm", f"--recipe.method {method} replaces its group step")
    fill("--reward.remote_url", reward_func_path(), "the package reward function; no remote URL given")
    if method == "adaptthink":
        fill("--train.agent_func_path", EXECUTOR_FILE, "AdaptThink's rollout executor forces the first token")
    fill("--rollout.n_samples_per_prompt", DEFAULT_SAMPLES, "group methods need several samples per prompt")
    b_max = getattr(ours, "recipe.lead.b_max", None)
    if "--rollout.max_new_tokens" not in given:  # sections_read builds the method (imports torch): only when needed
        cap = b_max if b_max and "lead" in sections_read(method) else DEFAULT_CAP
        fill("--rollout.max_new_tokens", int(cap), "the rollout cap the methods' length terms use")
    cap = (flag_values(out.argv, "--rollout.max_new_tokens") or [""])[0]
    # OpenRLHF's own default stays while it leaves the prompt PROMPT_BUDGET tokens (a complete OpenRLHF command
    # line passes through as it is); a larger cap gets room for the prompt (train.recipe_conflicts checks the rest)
    if cap.isdigit() and int(cap) + PROMPT_BUDGET > openrlhf_default("data.max_len"):
        fill("--data.max_len", int(cap) + PROMPT_BUDGET, f"the rollout cap plus {PROMPT_BUDGET} prompt tokens")
    fill("--data.input_key", "prompt", "the column `lead-recipes data build` writes")
    fill("--data.label_key", "label", "the column `lead-recipes data build` writes; the grader needs the gold")
    out.missing = [flag for flag in REQUIRED if flag not in given]

    urls = flag_values(out.argv, "--reward.remote_url") or []
    http = [u for part in urls for u in part.split(",") if u]
    if http and all(u.startswith(("http://", "https://")) for u in http):
        out.argv = drop_flags(out.argv, {"--reward.remote_url"}) + [
            "--reward.remote_url",
            reward_func_path("remote_reward.py"),
        ]
        out.env[REWARD_URLS_ENV] = ",".join(http)
        out.filled.append(
            f"--reward.remote_url {reward_func_path('remote_reward.py')} (forwards to "
            f"{', '.join(http)} with retries and fail-over; ${REWARD_URLS_ENV})"
        )
    return out
