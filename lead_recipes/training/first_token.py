"""AdaptThink's importance-sampled loss on OpenRLHF's GSPO (THU-KEG/AdaptThink `adapt_think_core_algos.py` L89-105,
`adjust_old_logprobs=True`): each sample's old log-prob of its first action token becomes log ρ (a no-think rollout)
or log(1 − ρ) (a thinking one), the probability with which the rollout chose that forced token. GSPO's sequence
ratio exp(mean_t log π_θ − mean_t old) then is the authors' ratio. `adaptthink_errors` names the OpenRLHF flags
under which it would not be (torch-free). See docs/methods.md#adaptthink-outside-the-advantage-step.
"""

from __future__ import annotations

import math
import os

EXECUTOR_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "adaptthink_executor.py")
CLIP = (0.2, 0.2)  # the authors' clip range (`src/config/ppo_trainer.yaml` L39-41)


def importance_sample_first_token(experiences, rho: float) -> None:
    """Overwrite, in place, `action_log_probs` at the first action token of every sample by log ρ where
    `info["nothink"]` is set, else log(1 − ρ). A sample without action tokens is left alone."""
    import torch

    for e in experiences:
        if "nothink" not in e.info:
            raise ValueError(
                'experience.info has no "nothink": --recipe.method adaptthink needs its rollout executor '
                f"(--train.agent_func_path {EXECUTOR_FILE})"
            )
        mask = e.action_mask.bool()
        rows = mask.any(-1).nonzero().reshape(-1)
        first = mask.int().argmax(-1)[rows]
        nothink = e.info["nothink"].reshape(-1)[rows] > 0.5
        value = torch.where(nothink, math.log(rho), math.log(1 - rho)).to(e.action_log_probs.dtype)
        e.action_log_probs[rows, first] = value


def adaptthink_errors(args) -> list[str]:
    """The OpenRLHF settings under which OpenRLHF's loss is not AdaptThink's (one line each, with the fix)."""
    errors = []
    if os.path.realpath(args.train.agent_func_path or "") != os.path.realpath(EXECUTOR_FILE):
        errors.append(
            f"--train.agent_func_path must be AdaptThink's executor {EXECUTOR_FILE} (it forces the first token)"
        )
    if args.actor.policy_loss_type != "gspo":
        errors.append("--actor.policy_loss_type gspo: AdaptThink's loss has one importance ratio per sequence")
    clip = tuple(args.actor.eps_clip_low_high or (args.actor.eps_clip, args.actor.eps_clip))
    if clip != CLIP:
        errors.append(f"--actor.eps_clip_low_high {' '.join(map(str, clip))}: AdaptThink clips at 0.2 0.2")
    if args.actor.dual_clip is not None:
        errors.append("--actor.dual_clip: AdaptThink's loss has no dual clip; drop it")
    if args.algo.kl.init_coef > 0:  # the KL coefficient of both the loss and the reward (0: neither)
        errors.append(f"--algo.kl.init_coef {args.algo.kl.init_coef}: AdaptThink has no KL; set --algo.kl.init_coef 0")
    if args.actor.entropy_coef:  # None: no entropy term; 0: logged only
        errors.append(f"--actor.entropy_coef {args.actor.entropy_coef}: AdaptThink has no entropy term; set it to 0")
    if args.algo.advantage.is_correction_level != "off":  # under gspo, OpenRLHF's ratio is then against vLLM's
        errors.append(  # log-probs, not the recomputed old ones the first-token override writes into
            f"--algo.advantage.is_correction_level {args.algo.advantage.is_correction_level}: AdaptThink's ratio is "
            "against the recomputed old log-probs; set --algo.advantage.is_correction_level off"
        )
    if args.train.async_enable:  # rollouts of the weights before the last update (and buffered or partial ones)
        errors.append(
            "--train.async_enable: AdaptThink is on-policy (each step's rollouts come from the weights it updates, "
            "so the old log-probs are the sampling ones); drop --train.async_enable"
        )
    per_step = args.rollout.batch_size * args.rollout.n_samples_per_prompt
    if args.train.batch_size != per_step or args.train.max_epochs != 1:
        errors.append(
            f"--train.batch_size {args.train.batch_size} and --train.max_epochs {args.train.max_epochs}: AdaptThink "
            f"takes exactly one optimizer step per rollout step of {per_step} samples; set --train.batch_size "
            f"{per_step} (--rollout.batch_size × --rollout.n_samples_per_prompt) and --train.max_epochs 1"
        )
    return errors
