"""The trade-off benchmark's configurations: each one a method and its flags, every token knob at its reference
recipe's fraction of the cap (docs/benchmarks.md#design), and issue 33's rows (LEAD's code mode, DLER, Laser-DE)."""

from __future__ import annotations

CAP = 100  # rollout max_new_tokens; the longest SFT response is about 70 tokens
LOW_TARGET = 15  # Leash's target below the steps behaviour's length (about 27 tokens)
TIGHT_TARGET = 8  # Leash's target below a third of it: an extra configuration, not in the default sweep
BMAX_LOW = 32  # LEAD's B_max just above the steps behaviour's length: an extra configuration
EXTRA = ("leash-tight", "lead-bmax", "composed-budget")
RECIPE_STEPS = 280  # leash-1.5b's steps (its YAML: 2 episodes x ~139): λ's Adam lr is scaled by RECIPE_STEPS / steps
# ThinkPrune's last round (authors' code, arXiv 2504.01296): L = 2000 where round 1 had a 4000-token cap. One run here
# is one round, so the limit keeps that last round's fraction of the cap: the pruning the schedule ends at.
THINKPRUNE_LAST_ROUND = 2000 / 4000
# DLER's truncation acts at the rollout cap. Its 4,000-token cap sits below the base model's natural length and above
# its accurate length (arXiv 2510.15110); here: between the steps answer (~28 tokens with EOS) and the start's steps
# answers with their filler (~46 on average), and, for `dler-short`, below the steps answer but above direct (~8).
DLER_CAP = 40
DLER_SHORT_CAP = 16
DLER_FLAGS = ("reward.stop_properly_penalty_coef", "actor.eps_clip_low_high", "actor.dual_clip")  # from dler-1.5b


def recipe_knob(name: str, key: str) -> tuple[float, float]:
    """(--recipe.<key>, --rollout.max_new_tokens) of the reference recipe `name`."""
    from lead_recipes.recipes.recipe import load_recipe

    r = load_recipe(name)
    return float(r.recipe[key]), float(r.openrlhf["rollout.max_new_tokens"])


# Laser-DE (arXiv 2505.15612; the authors' laser-de-1.5b-l4096.sh): target grid [4096, 5120, …, 16384] at a 16,384-token
# cap, α 0.5, a monitor of 500 prompts × 8 samples at temperature 0.6 before step 1 and every 20 steps of
# 128 prompts. The grid keeps its fraction of the cap; the monitor keeps its size relative to a step's prompts. Its
# run length is unverified (5 epochs); any length over 1,200 steps scales 20 of them to under one of these 30, so the
# monitor runs every step, OpenRLHF's most often.
LASER_DE = {"cap": 16384, "lower": 4096, "step": 1024, "alpha": 0.5, "monitor_prompts": 500, "per_step": 128}
MONITOR = {"n": 8, "temperature": 0.6, "every": 1}
MONITOR_SEED = 777  # the held-back monitor prompts: a sample of the task apart from each run's training prompts
MONITOR_SET = "{monitor_set}"  # in a configuration's flags: the run's monitor set, which tradeoff.run_one writes


def laser_de_settings(prompts_per_step: int) -> dict:
    """Laser-DE's token knobs at CAP and its monitor set's size at this benchmark's prompts per step."""
    s = LASER_DE
    return {
        "grid_lower": round(s["lower"] / s["cap"] * CAP),
        "grid_step": round(s["step"] / s["cap"] * CAP),
        "grid_upper": CAP,
        "alpha": s["alpha"],
        "monitor_prompts": round(s["monitor_prompts"] / s["per_step"] * prompts_per_step),
        **{f"monitor_{k}": v for k, v in MONITOR.items()},
    }


def recipe_flags(name: str, keys) -> list[str]:
    """The reference recipe `name`'s OpenRLHF settings `keys` as flags (a list value gives one argument each)."""
    from lead_recipes.recipes.recipe import load_recipe

    values = load_recipe(name).openrlhf
    return [a for k in keys for a in (f"--{k}", *map(str, values[k] if isinstance(values[k], list) else [values[k]]))]


def laser_de_flags(prompts_per_step: int) -> list[str]:
    """`laser-de`'s flags from laser_de_settings: the scaled grid and α, and the monitor as OpenRLHF's eval dataset
    (MONITOR_SET, a file of held-back task prompts), its samples, temperature and period."""
    s = laser_de_settings(prompts_per_step)
    grid = [
        a for k in ("grid_lower", "grid_step", "grid_upper", "alpha") for a in (f"--recipe.laser_de.{k}", str(s[k]))
    ]
    monitor = ["--eval.n_samples_per_prompt", str(s["monitor_n"]), "--eval.temperature", str(s["monitor_temperature"])]
    return [*grid, "--eval.dataset", MONITOR_SET, *monitor, "--eval.steps", str(s["monitor_every"])]


def configs(steps: int, prompts_per_step: int = 8) -> dict[str, tuple[str, list[str]]]:
    """Benchmark configuration name -> (--recipe.method, its flags). Each token-valued knob keeps the fraction of
    the rollout cap that its reference recipe gives it (ShorterBetter's per-token β keeps β·cap), applied to CAP;
    every length knob the sweep's methods read is explicit, because the harness's CPU smoke command sets some for
    its own 32-token cap. `prompts_per_step` sizes Laser-DE's monitor set."""

    def tokens(name, key):
        value, cap = recipe_knob(name, key)
        return str(round(value / cap * CAP))

    leash = ["--recipe.leash.lr", f"{recipe_knob('leash-1.5b', 'leash.lr')[0] * RECIPE_STEPS / steps:.4g}"]
    beta, beta_cap = recipe_knob("shorter-better-1.5b", "shorter_better.beta")
    lead = ["--recipe.lead.b_max", str(CAP), "--recipe.lead.l_min", tokens("lead-1.5b", "lead.l_min")]
    from lead_recipes.methods.config import LeadConfig

    floor = LeadConfig().ref_code_asym_floor_tokens / recipe_knob("lead-1.5b", "lead.l_min")[1] * CAP
    asym = [
        "--recipe.lead.length_mode",
        "ref_code_max_asym",
        "--recipe.lead.ref_code_asym_floor_tokens",
        str(round(floor)),
    ]
    dler = recipe_flags("dler-1.5b", DLER_FLAGS)
    return {
        "grpo": ("grpo", []),
        "lead": ("lead", lead),
        "lead-flat": ("lead", [*lead, "--recipe.lead.unsolved_length", "flat"]),
        "grpo-lead": ("grpo-lead", []),
        "leash": ("leash", ["--recipe.leash.target_length", tokens("leash-1.5b", "leash.target_length"), *leash]),
        "leash-low": ("leash", ["--recipe.leash.target_length", str(LOW_TARGET), *leash]),
        "leash-tight": ("leash", ["--recipe.leash.target_length", str(TIGHT_TARGET), *leash]),
        "lead-bmax": ("lead", ["--recipe.lead.b_max", str(BMAX_LOW), *lead[2:]]),
        "composed": (
            "composed",
            [*lead, "--recipe.composed.budget_tokens", tokens("composed-1.5b", "composed.budget_tokens"), *leash],
        ),
        "composed-budget": (
            "composed",
            [
                *lead,
                "--recipe.composed.budget_tokens",  # its budget at Leash's target
                tokens("leash-1.5b", "leash.target_length"),
                *leash,
            ],
        ),
        "gdpo": ("gdpo", ["--recipe.gdpo.length_threshold", tokens("gdpo-1.5b", "gdpo.length_threshold")]),
        "shorter-better": ("shorter-better", ["--recipe.shorter_better.beta", f"{beta * beta_cap / CAP:.4g}"]),
        # the length baselines: Arora-Zanette's and Kimi's length terms are relative to the group, no knob in tokens
        "arora-zanette": ("arora-zanette", []),
        "kimi": ("kimi", []),
        "thinkprune": ("thinkprune", ["--recipe.thinkprune.limit", str(round(THINKPRUNE_LAST_ROUND * CAP))]),
        # issue 33's block: the authors' code's L* mode beside the paper's, and DLER's truncation at two caps
        "lead-max-asym": ("lead", [*lead, *asym]),
        "dler": ("dler", ["--rollout.max_new_tokens", str(DLER_CAP), *dler]),
        "dler-short": ("dler", ["--rollout.max_new_tokens", str(DLER_SHORT_CAP), *dler]),
        "laser-de": ("laser-de", laser_de_flags(prompts_per_step)),
    }
