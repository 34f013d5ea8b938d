"""Every method's hyperparameters, written once (one frozen dataclass per `--recipe.<section>.*` flag section: default,
range, help), the method registry `REGISTRY` every list of methods derives from, and `RecipeConfig`, the whole
configuration `build_method` takes. Torch-free (the launcher validates recipes without the training stack); no
method math. See docs/methods.md#flags-recipe and CONTRIBUTING.md#adding-a-method.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import types
from dataclasses import dataclass, field
from typing import Any, Mapping

from lead_recipes.methods.baseline_config import (
    AdaptThinkConfig,
    AroraZanetteConfig,
    DlerConfig,
    KimiConfig,
    L1ExactConfig,
    L1MaxConfig,
    LaserConfig,
    LaserDConfig,
    LaserDeConfig,
    ThinkPruneConfig,
)
from lead_recipes.methods.fields import option, range_problem

DEFAULT_METHOD = "lead"


@dataclass(frozen=True)
class GrpoConfig:
    """GRPO on correctness only: no hyperparameters beyond the shared ε = 1e-6."""


LENGTH_REWARDS = ("conditioned", "classic", "lead")


@dataclass(frozen=True)
class ScalarizedConfig:
    """LEAD's scalarised GRPO baseline (arXiv 2605.09806, Table 2): R = w_c·1[correct] + w_l·r_len, then group
    normalisation."""

    correct_weight: float = option(0.5, "weight w_c on 1[correct] (LEAD sweep: λ1 = 1/(1+ratio); paper best 1:1)", ge=0)
    length_weight: float = option(0.5, "weight w_l on the length reward (paper best 1:1 ⇒ 0.5)", ge=0)
    length_reward: str = option(
        "conditioned",
        "conditioned = 1[correct ∧ l ≤ T] (LEAD Table-1 script); classic = "
        "1[l ≤ T]; lead = LEAD's r_l (Eq. 9, uses --recipe.lead.aggregator/l_min)",
        LENGTH_REWARDS,
    )
    length_threshold: float = option(
        2000.0,
        "T in tokens for conditioned/classic (reference code: 2000, counted as "
        "chars/4 there; here real response tokens)",
        gt=0,
    )


@dataclass(frozen=True)
class GdpoConfig:
    """GDPO (arXiv 2601.05242): per-channel group normalisation, static weights, batch whitening."""

    correct_weight: float = option(
        1.0, "weight on the correctness channel's advantage (verl snippet: unweighted sum)", ge=0
    )
    length_weight: float = option(1.0, "weight on the length channel's advantage", ge=0)
    length_reward: str = option(
        "conditioned", "length channel: conditioned / classic / lead (see grpo_scalarized)", LENGTH_REWARDS
    )
    length_threshold: float = option(2000.0, "T in tokens for conditioned/classic length rewards", gt=0)
    whiten: str = option(
        "token",
        "normalisation: token = group ε 1e-6, then verl masked_whiten over tokens (LEAD's re-implementation); trl "
        "= TRL's GDPO: group and batch std (unbiased) each + 1e-4, batch statistics per sequence",
        ("token", "trl"),
    )


AGGREGATORS = ("mean_correct", "min_correct", "median_correct", "mean_all")
UNSOLVED_LENGTH = ("sentinel", "flat")
LENGTH_MODES = ("max_sym", "ref_code_max_asym", "ref_code_upper_only")


@dataclass(frozen=True)
class LeadConfig:
    """LEAD (arXiv 2605.09806): decoupled normalisation, PSI controller, symmetric target-length reward."""

    aggregator: str = option(
        "mean_correct",
        "L*_q aggregator (paper/code: mean_correct; Table-3 ablations: min_correct, median_correct, mean_all)",
        AGGREGATORS,
    )
    l_min: float = option(1000.0, "L_min clamp on L*_q in tokens (paper and code: 1000, hard-coded there)", gt=0)
    b_max: int | None = option(
        None, "B_max in tokens; default: the rollout max_new_tokens (paper: 4000; code main script: 8000)", gt=0
    )
    alpha: float = option(1.0, "potential exponent α (code: 1.0)", gt=0)
    beta_ema: float = option(0.95, "EMA factor β_ema (code: 0.95; paper: 0.9–0.95)", ge=0, lt=1)
    lambda_min: float = option(0.3, "floor on λ_c (code: 0.3)", ge=0, le=1)
    static_lambda_c: float | None = option(
        None,
        "constant λ_c (λ_l = 1-λ_c), no controller: the 'LEAD static' ablation (code: lead_static_lambda_corr); "
        "default: none, the PSI controller",
        ge=0,
        le=1,
    )
    length_mode: str = option(
        "max_sym",
        "r_l: max_sym = Eq. 9 (paper; every released script, the Table-1 one included); the authors' code's other "
        "modes: ref_code_max_asym (its yaml default: correct max(0, 1 − l/L*), 0 below "
        "ref_code_asym_floor_tokens; incorrect clamp(1 − l/L*, −1, 0)), ref_code_upper_only (max(−1, min(0, "
        "1 − l/L*)))",
        LENGTH_MODES,
    )
    ref_code_asym_floor_tokens: float = option(
        500.0, "ref_code_max_asym: a correct rollout shorter than this gets r_l = 0 (code: 500, hard-coded)", ge=0
    )
    whiten: str = option(
        "token", "BatchWhiten statistics: token (reference code, verl masked_whiten) or sequence", ("token", "sequence")
    )
    unsolved_length: str = option(
        "sentinel",
        "length reward in groups with no correct rollout: sentinel = L* = B_max "
        "(paper Eq. 8: pays longer answers there); flat = ours, not in the paper: r_l = 1 for "
        "every rollout, so no length advantage there",
        UNSOLVED_LENGTH,
    )
    zero_psi_skip_enable: bool = option(
        False,
        "ours, not in the paper or its code: when Ψ_c = Ψ_l = 0, skip that step's EMA update (default, as Eq. 7 "
        "and the authors' code: the EMA moves toward the target (0, 0))",
    )


@dataclass(frozen=True)
class GrpoLeadConfig:
    """GRPO-LEAD (arXiv 2504.09696): length-dependent accuracy reward, −1 for wrong, difficulty-aware reweighting."""

    alpha: float = option(0.05, "α in exp(−α z) (paper and code: 0.05); 0 turns the length reward off (stage 2)", ge=0)
    weight_min: float = option(0.4, "A, the lower asymptote of w(ρ) (paper: 0.4)", gt=0)
    weight_max: float = option(1.5, "B, the upper asymptote of w(ρ) (paper: 1.5)", gt=0)
    rho0: float = option(0.75, "ρ_0, the midpoint of w(ρ) (paper: 0.75)", ge=0, le=1)
    steepness: float = option(10.0, "k, the steepness of w(ρ) (paper: 10)")
    repetition_penalty_enable: bool = option(
        False,
        "stage 2: incorrect repetitive responses (authors' code detector) get --recipe.grpo_lead.repetition_reward",
    )
    repetition_reward: float = option(-1.5, "reward of a repetitive incorrect response (paper: −1.5; code: −2)")
    ref_code_length_gate_enable: bool = option(
        False,
        "reference-code behaviour: shape correct rewards only when the "
        "mean of the 3 shortest lengths in the group exceeds the gate",
    )
    ref_code_length_gate_tokens: float = option(4000.0, "the gate for ref_code_length_gate_enable (code: 4000)", gt=0)
    ref_code_format_failure_enable: bool = option(
        False,
        "reference-code behaviour: a format failure (no </think>, or no parsable \\boxed{…} last before it, in "
        "prompt + response) gets 0, or the repetition reward when repetitive (the only rollouts the code penalises "
        "for repetition); a completed wrong answer −1; correct = graded correct and no format failure (paper: "
        "truncated ⇒ −1)",
    )
    ref_code_sigma_one_enable: bool = option(
        False, "reference-code behaviour: σ := 1 when fewer than 2 correct (paper: σ := 0; both give z = 0)"
    )
    ref_code_rejection_enable: bool = option(
        False,
        "reference-code behaviour: reject groups with no positive reward "
        "or all rewards exactly 1 (their advantages are set to 0)",
    )


@dataclass(frozen=True)
class LeashConfig:
    """Leash (arXiv 2512.21540): clipped one-sided length penalty with an Adam-updated Lagrange multiplier (the
    optimiser settings are our choice, see docs/methods.md)."""

    target_length: float = option(4096.0, "L_t in tokens (paper, 1.5B: 4096)", gt=0)
    lr: float = option(1e-2, "Adam learning rate η_λ for λ (reconstructed; paper value unknown)", gt=0)
    lambda_init: float = option(0.0, "λ_0 (reconstructed)")
    lambda_min: float = option(0.0, "projection lower bound λ_min (reconstructed)", ge=0)
    lambda_max: float = option(1.0, "projection upper bound λ_max (reconstructed)")
    adam_beta1: float = option(0.9, "Adam β1", ge=0, lt=1)
    adam_beta2: float = option(0.999, "Adam β2", ge=0, lt=1)
    adam_eps: float = option(1e-8, "Adam ε", gt=0)
    constant_lambda_enable: bool = option(False, "Leash-C ablation: keep λ = lambda_init, no dual update")


@dataclass(frozen=True)
class ShorterBetterConfig:
    """ShorterBetter (arXiv 2504.21370): r = α·1[correct] − β·|l − SOL|."""

    alpha: float = option(2.0, "α, the correctness reward (paper and code: 2.0; paper also reports 1.0)", gt=0)
    beta: float = option(0.001, "β, the per-token distance penalty (code: 0.001)", ge=0)


COMPOSED_CORRECT = ("binary", "signed", "grpo_lead")


@dataclass(frozen=True)
class ComposedConfig:
    """The composed method: which parts of LEAD, GRPO-LEAD and Leash are on. Each part's own hyperparameters are
    read from its method's section (--recipe.lead.*, --recipe.grpo_lead.*, --recipe.leash.*), never duplicated."""

    correct_reward: str = option(
        "binary",
        "correctness channel: binary = 1[correct] (LEAD), signed = ±1 (Leash/DAPO), "
        "grpo_lead = exp(−α z) if correct else −1 (GRPO-LEAD, --recipe.grpo_lead.*)",
        COMPOSED_CORRECT,
    )
    length_reward: str = option(
        "lead",
        "length channel: lead = LEAD's r_l with PSI (or static) weights and BatchWhiten "
        "(--recipe.lead.*); none = the correctness channel alone, plain group normalisation",
        ("lead", "none"),
    )
    difficulty: str = option(
        "grpo_lead",
        "grpo_lead = GRPO-LEAD's logistic reweighting w(ρ) / w(1 − ρ) of the combined "
        "advantage (--recipe.grpo_lead.weight_min/weight_max/rho0/steepness); none = off",
        ("grpo_lead", "none"),
    )
    budget: str = option(
        "leash",
        "leash = a Lagrange multiplier λ (Adam, --recipe.leash.lr/lambda_*/adam_*) that adds "
        "−λ·max(0, l/L_t − 1) to the length channel (to the correctness channel when there is none); "
        "none = off",
        ("leash", "none"),
    )
    budget_tokens: float | None = option(
        None,
        "L_t of the budget in tokens; default B_max / 2 (B_max = --recipe.lead.b_max or the rollout max_new_tokens)",
        gt=0,
    )


@dataclass(frozen=True)
class GuardConfig:
    """Stop when the grader fails (lead_recipes.training.guard); applies to every method."""

    grade_failure_max: float = option(
        0.5, "stop when the share of samples graded error or timeout stays above this (1 = never stop)", ge=0, le=1
    )
    grade_failure_steps: int = option(3, "... for this many consecutive steps", ge=1)


@dataclass(frozen=True)
class ResumeConfig:
    """What a resume from a checkpoint accepts (lead_recipes.training.resume); applies to every method."""

    settings_change_enable: bool = option(
        False,
        "resume even when the method's settings differ from those saved with "
        "the checkpoint (each change is logged once); default: refuse, naming them",
    )


@dataclass(frozen=True)
class MethodEntry:
    """One method: its `--recipe.method` name, its Method class as "module:Class" (imported only by `load`, so this
    module stays torch-free), its config dataclass (flags `--recipe.<section>.*`, section = name with '-' → '_')
    and its reference recipe (launchers/recipes/<recipe>.yaml); `shares`: the other methods' sections its
    `from_config` reads too (e.g. gdpo reads lead's); `label_keys`: what every training label must carry for it
    (L1's target, checked by the preflight); `reward_is_score`: its reward is the reward function's 0/1 score, so
    OpenRLHF's `--reward.stop_properly_penalty_coef` may rescale it (training.args refuses it for the others);
    `monitor`: it needs monitor passes over the eval dataset (Laser-D/-DE; the plug-in installs
    training.monitor for it); the stats keys are the class's STATS_KEYS."""

    name: str
    method: str
    config: type
    recipe: str
    shares: tuple[str, ...] = ()
    label_keys: tuple[str, ...] = ()
    reward_is_score: bool = False
    monitor: bool = False

    @property
    def section(self) -> str:
        return self.name.replace("-", "_")

    @property
    def sections(self) -> tuple[str, ...]:
        """Every `--recipe.<section>.*` section this method reads, `guard` and `resume` included (torch-free;
        methods.sections_read gives the built instance's values)."""
        return (self.section, *self.shares, *COMMON_SECTIONS)

    def load(self) -> type:
        module, cls = self.method.split(":")
        return getattr(importlib.import_module(module), cls)


COMMON_SECTIONS = ("guard", "resume")  # read whatever the method
# no method's section: --recipe.method and the train command's --recipe.name are flags of their own
RESERVED_SECTIONS = (*COMMON_SECTIONS, "method", "name")

# the method registry: every list of methods (flags, validation, build_method, base recipes, docs) derives from it
REGISTRY = (
    MethodEntry(
        "grpo", "lead_recipes.methods.grpo:GrpoMethod", GrpoConfig, "grpo-correctness-1.5b", reward_is_score=True
    ),
    MethodEntry(
        "grpo-scalarized", "lead_recipes.methods.grpo:ScalarizedMethod", ScalarizedConfig, "grpo-1.5b", ("lead",)
    ),
    MethodEntry("gdpo", "lead_recipes.methods.gdpo:GdpoMethod", GdpoConfig, "gdpo-1.5b", ("lead",)),
    MethodEntry("lead", "lead_recipes.methods.lead:LeadMethod", LeadConfig, "lead-1.5b"),
    MethodEntry("grpo-lead", "lead_recipes.methods.grpo_lead:GrpoLeadMethod", GrpoLeadConfig, "grpo-lead-7b"),
    MethodEntry("leash", "lead_recipes.methods.leash:LeashMethod", LeashConfig, "leash-1.5b"),
    MethodEntry(
        "shorter-better",
        "lead_recipes.methods.shorter_better:ShorterBetterMethod",
        ShorterBetterConfig,
        "shorter-better-1.5b",
    ),
    MethodEntry(
        "arora-zanette",
        "lead_recipes.methods.arora_zanette:AroraZanetteMethod",
        AroraZanetteConfig,
        "arora-zanette-1.5b",
    ),
    MethodEntry(
        "l1-exact", "lead_recipes.methods.l1:L1ExactMethod", L1ExactConfig, "l1-exact-1.5b", label_keys=("n_gold",)
    ),
    MethodEntry(
        "l1-max", "lead_recipes.methods.l1:L1MaxMethod", L1MaxConfig, "l1-max-1.5b", ("l1_exact",), ("n_gold",)
    ),
    MethodEntry("kimi", "lead_recipes.methods.kimi:KimiMethod", KimiConfig, "kimi-1.5b"),
    MethodEntry("thinkprune", "lead_recipes.methods.thinkprune:ThinkPruneMethod", ThinkPruneConfig, "thinkprune-1.5b"),
    MethodEntry("dler", "lead_recipes.methods.dler:DlerMethod", DlerConfig, "dler-1.5b", reward_is_score=True),
    MethodEntry("laser", "lead_recipes.methods.laser:LaserMethod", LaserConfig, "laser-1.5b-l4096"),
    MethodEntry("laser-d", "lead_recipes.methods.laser:LaserDMethod", LaserDConfig, "laser-d-1.5b-l4096", monitor=True),
    MethodEntry(
        "laser-de", "lead_recipes.methods.laser:LaserDeMethod", LaserDeConfig, "laser-de-1.5b-l4096", monitor=True
    ),
    MethodEntry(
        "adaptthink",
        "lead_recipes.methods.adaptthink:AdaptThinkMethod",
        AdaptThinkConfig,
        "adaptthink-1.5b",
        label_keys=("ref_acc",),
    ),
    MethodEntry(
        "composed",
        "lead_recipes.methods.composed:ComposedMethod",
        ComposedConfig,
        "composed-1.5b",
        ("lead", "grpo_lead", "leash"),
    ),
)
REGISTRY += importlib.import_module("lead_recipes.method_plugins").installed_methods(tuple(e.name for e in REGISTRY))
METHODS = tuple(e.name for e in REGISTRY)


def method_name(cls: type) -> str:
    """The `--recipe.method` name of Method class `cls`: the registry entry naming it or, for a subclass, the
    nearest registered class in its MRO."""
    by_path = {e.method: e.name for e in REGISTRY}
    for klass in cls.__mro__:
        name = by_path.get(f"{klass.__module__}:{klass.__qualname__}")
        if name is not None:
            return name
    raise KeyError(f"{cls.__module__}:{cls.__qualname__} is not a Method class of REGISTRY nor a subclass of one")


def entry(method: str) -> MethodEntry:
    """The registry entry of `--recipe.method` `method`."""
    for e in REGISTRY:
        if e.name == method:
            return e
    raise KeyError(f"--recipe.method must be one of {', '.join(METHODS)}, got {method!r}")


# flag section (the word after --recipe.) -> config class: one per method, plus `guard` and `resume` for every method
SECTIONS = {**{e.section: e.config for e in REGISTRY}, "guard": GuardConfig, "resume": ResumeConfig}
_taken = [e.section for e in REGISTRY] + ["guard", "resume"]
if len(SECTIONS) != len(_taken):  # a section named twice would silently replace a method's config
    _twice = next(s for s in _taken if _taken.count(s) > 1)
    raise ValueError(f"REGISTRY: two uses of the flag section --recipe.{_twice}.* (section = name with '-' → '_')")


def _of(cls, recipe: Any = None) -> "RecipeConfig":
    """Defaults overlaid with `recipe` (a RecipeConfig, or a nested mapping or namespace such as a YAML recipe's
    `recipe:` section or OpenRLHF's hierarchized `args.recipe`), validated. ValueError names the flag."""
    if recipe is None or isinstance(recipe, cls):
        cfg = recipe or cls()
    else:
        sections = {}
        method = DEFAULT_METHOD
        for key, value in _as_mapping(recipe).items():
            if key == "method":
                method = value
            elif key in SECTIONS:
                sections[key] = _section(key, value)
            else:
                raise ValueError(f"--recipe.{key} is not a recipe flag or section")
        cfg = cls(method=method, **sections)
    validate(cfg)
    return cfg


RecipeConfig = dataclasses.make_dataclass(
    "RecipeConfig",
    [("method", str, field(default=DEFAULT_METHOD))]
    + [(name, cls, field(default_factory=cls)) for name, cls in SECTIONS.items()],
    namespace={
        "of": classmethod(_of),
        "__doc__": """The whole `--recipe.*` configuration: the method and one field
    per section (unused sections keep their defaults), e.g. RecipeConfig(method="lead", lead=LeadConfig(l_min=500.0)).
    Build one with `RecipeConfig.of` (from YAML or flags, validated); `build_method` takes it.""",
    },
    frozen=True,
)
RecipeConfig.__module__ = __name__  # where pickle finds it


def flag(section: str, name: str) -> str:
    return f"--recipe.{section}.{name}"


def base_type(f: dataclasses.Field) -> type:
    """bool, int, float or str: the type a field's flag parses (annotations are strings here, e.g. "int | None")."""
    ann = (f.type.__name__ if isinstance(f.type, type) else str(f.type)).replace(" ", "")  # a plugin's may be types
    for name, typ in (("bool", bool), ("int", int), ("float", float), ("str", str)):
        if ann.split("|")[0] == name:
            return typ
    raise TypeError(f"unsupported recipe field type {f.type!r}")  # pragma: no cover - config authoring error


def _as_mapping(x: Any) -> Mapping:
    if isinstance(x, Mapping):
        return x
    if isinstance(x, (types.SimpleNamespace, argparse.Namespace)) or dataclasses.is_dataclass(x):
        return vars(x)
    raise ValueError(f"recipe must be a namespace or a mapping, got {type(x).__name__}")


def _section(section: str, value: Any):
    """One section's config from a mapping, unknown keys refused; YAML's `4096` for a float field becomes 4096.0
    (controller state stays plain floats)."""
    fields = {f.name: f for f in dataclasses.fields(SECTIONS[section])}
    values = {}
    for name, v in _as_mapping(value).items():
        if name not in fields:
            raise ValueError(f"{flag(section, name)} is not a recipe flag")
        if base_type(fields[name]) is float and isinstance(v, int) and not isinstance(v, bool):
            v = float(v)
        values[name] = v
    return SECTIONS[section](**values)


def validate_section(section: str, sec: Any) -> None:
    """ValueError naming the --recipe.<section>.* flag whose value has the wrong type or is out of range."""
    for f in dataclasses.fields(SECTIONS[section]):
        name, v, typ = flag(section, f.name), getattr(sec, f.name), base_type(f)
        if v is None:
            if f.default is None:
                continue
            raise ValueError(f"{name} must be set (default {f.default})")
        if typ is bool:
            if not isinstance(v, bool):
                raise ValueError(f"{name} must be true or false, got {v!r}")
            continue
        if typ is str:
            if v not in f.metadata.get("choices", (v,)):
                raise ValueError(f"{name} must be one of {', '.join(f.metadata['choices'])}, got {v!r}")
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (typ is int and v != int(v)):
            raise ValueError(f"{name} must be a{'n integer' if typ is int else ' number'}, got {v!r}")
        problem = range_problem(v, f.metadata)
        if problem:
            raise ValueError(f"{name} must be {problem}, got {v!r}")


def validate(cfg: RecipeConfig) -> None:
    """Raise ValueError naming the offending --recipe.* flag when a value has the wrong type or range."""
    if getattr(cfg, "method", None) not in METHODS:
        raise ValueError(
            f"--recipe.method must be one of {', '.join(METHODS)}, got {getattr(cfg, 'method', None)!r}"
            + (
                " (DRPO is a loss, not an advantage method: not supported)"
                if str(getattr(cfg, "method", "")).lower() == "drpo"
                else ""
            )
        )
    for section in SECTIONS:
        validate_section(section, getattr(cfg, section))
    for section in ("grpo_scalarized", "gdpo"):
        sec = getattr(cfg, section)
        if sec.correct_weight == 0 and sec.length_weight == 0:
            raise ValueError(f"--recipe.{section}.correct_weight and --recipe.{section}.length_weight are both 0")
    if cfg.method == "composed" and cfg.grpo_lead.ref_code_rejection_enable:
        raise ValueError(
            "--recipe.grpo_lead.ref_code_rejection_enable is not supported by --recipe.method "
            "composed (group rejection is a GRPO-LEAD training-loop option, not a reweighting)"
        )
    for section in ("laser_d", "laser_de"):
        g = getattr(cfg, section)
        if g.grid_lower > g.grid_upper:
            raise ValueError(
                f"--recipe.{section}.grid_upper must be ≥ --recipe.{section}.grid_lower ({g.grid_lower}), got "
                f"{g.grid_upper} (an empty target grid gives no bucket a target)"
            )
    le = cfg.leash
    if not le.lambda_min <= le.lambda_max:
        raise ValueError(
            f"--recipe.leash.lambda_max must be ≥ --recipe.leash.lambda_min ({le.lambda_min}), got {le.lambda_max}"
        )
    if not le.lambda_min <= le.lambda_init <= le.lambda_max:
        raise ValueError(
            f"--recipe.leash.lambda_init must be in [lambda_min, lambda_max] = "
            f"[{le.lambda_min}, {le.lambda_max}], got {le.lambda_init}"
        )
