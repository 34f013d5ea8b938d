"""The experience maker of the OpenRLHF plug-in on real OpenRLHF objects and real rollouts (../shared/data/rollouts,
graded by the package grader, lengths from the tiny Qwen2 tokenizer): advantages equal the method function's output
for every method after OpenRLHF's own micro-batch reordering, γ = 1 returns equal OpenRLHF's loop, regrouping and
failure paths, and the version guard (the seams themselves: test_openrlhf_seams.py). It also saves and restores
through the trainer classes (on a Ray started once for this module)."""

from __future__ import annotations

import copy
import json
import math
import pickle
import random
from types import SimpleNamespace as NS

import pytest
import ray
import torch
from openrlhf.models.utils import compute_reward
from openrlhf.trainer.ppo_utils.experience import Experience
from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker
from openrlhf.trainer.ppo_utils.kl_controller import FixedKLController
from support.batches import ready
from support.trainer import CAP, N, make_trainer

from lead_recipes.grading.pool.grader import get_grader
from lead_recipes.grading.repetition import is_repetitive
from lead_recipes.methods import build_method
from lead_recipes.methods.base import RolloutBatch
from lead_recipes.methods.config import METHODS, REGISTRY, RecipeConfig
from lead_recipes.recipes import openrlhf_parser
from lead_recipes.reward.logs import REWARD_LOG_KEYS, answer_boxed, think_boxed, think_once
from lead_recipes.training import openrlhf_plugin as plugin
from lead_recipes.training import preemption as preempt
from lead_recipes.training import resume
from lead_recipes.training.first_token import EXECUTOR_FILE

PROMPTS = 40  # of the 100 groups, to keep the module quick


def make_args(method="lead", cap=CAP, n=N, **reward):
    recipe = RecipeConfig(method=method)
    return NS(
        algo=NS(
            advantage=NS(estimator="group_norm", gamma=1.0, lambd=1.0, no_std_norm=False, is_correction_level="off"),
            kl=NS(use_loss=False, estimator="k1", init_coef=0.0),
        ),
        rollout=NS(
            n_samples_per_prompt=n, max_new_tokens=cap, micro_batch_size=4, max_tokens_per_gpu=6000, batch_size=PROMPTS
        ),
        reward=NS(
            clip_range=(-10, 10),
            overlong_buffer_len=reward.get("overlong_buffer_len"),
            overlong_penalty_factor=reward.get("overlong_penalty_factor", 1.0),
            stop_properly_penalty_coef=reward.get("stop_properly_penalty_coef"),
        ),
        data=NS(max_len=cap + 256),
        # AdaptThink's settings (lead_recipes.training.first_token); the other methods ignore them
        train=NS(
            dynamic_batch_enable=True,
            async_enable=False,
            agent_func_path=EXECUTOR_FILE,
            batch_size=PROMPTS * n,
            max_epochs=1,
        ),
        eval=NS(dataset="monitor.jsonl", steps=20),  # Laser-D/-DE's monitor set (read by no other method)
        actor=NS(
            num_nodes=1,
            num_gpus_per_node=2,
            policy_loss_type="gspo",
            eps_clip_low_high=(0.2, 0.2),
            dual_clip=None,
            entropy_coef=None,
        ),
        ds=NS(ring_attn_size=1, tensor_parallel_size=1),
        ckpt=NS(path="unused"),
        recipe=recipe,
    )


def maker(args, kl_coef=0.0, cls=plugin.RecipeExperienceMaker, tokenizer=None):
    return cls(None, None, None, None, FixedKLController(kl_coef), NS(args=args), tokenizer or NS(pad_token_id=0))


@pytest.fixture(scope="module")
def rollouts(shared_data, tiny_qwen2):
    """Per-sample records: problem q, sample j, prompt, label, token ids of the response, grade info."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_qwen2)
    groups = [json.loads(line) for line in (shared_data / "rollouts" / "qwen25math_cot_math100x8.jsonl").open()]
    groups = groups[:PROMPTS]
    items = [(g["answer"], s["response"], None) for g in groups for s in g["samples"]]
    grades = get_grader().grade_many(items)
    records = []
    for q, g in enumerate(groups):
        prompt = g["system_prompt"] + "\n" + g["problem"]
        prompt_ids = tok(prompt)["input_ids"][:200]
        for j, s in enumerate(g["samples"]):
            grade = grades[q * N + j]
            resp_ids = tok(s["response"])["input_ids"] + [tok.eos_token_id]
            truncated = len(resp_ids) > CAP
            info = {
                "correct": float(grade.correct),
                "repetitive": float(is_repetitive(s["response"])),
                "think_boxed": float(think_boxed(prompt + s["response"])),
                "answer_boxed": float(answer_boxed(prompt + s["response"])),
                "think_once": float(think_once(s["response"])),
            }
            info.update(
                {
                    f"status_{st}": float(grade.status == st)
                    for st in ("correct", "wrong", "no_answer", "timeout", "error")
                }
            )
            info["grade_latency_s"] = float(grade.latency_s)
            info["n_gold"], info["l1_max"] = 0.0, 0.0  # plain labels: no L1 target
            assert tuple(info) == REWARD_LOG_KEYS
            records.append(
                dict(
                    q=q,
                    j=j,
                    prompt=prompt,
                    label=g["answer"],
                    prompt_ids=prompt_ids,
                    resp_ids=resp_ids[:CAP],
                    truncated=truncated,
                    info=info,
                )
            )
    assert any(r["info"]["correct"] for r in records) and not all(r["info"]["correct"] for r in records)
    return records


def to_experience(rec, sample_id):
    """One rollout as SamplesGenerator._process_response_into_experience builds it (B = 1)."""
    ids = rec["prompt_ids"] + rec["resp_ids"]
    seq = torch.tensor(ids)
    action_mask = torch.zeros(len(ids) - 1, dtype=torch.long)
    action_mask[len(rec["prompt_ids"]) - 1 :] = 1
    info = {k: torch.tensor([v]) for k, v in rec["info"].items()}
    info["reward"] = torch.tensor([rec["info"]["correct"]])
    info["sample_id"] = torch.tensor([float(sample_id)])
    return Experience(
        action_log_probs=torch.zeros(1, len(ids) - 1),  # AdaptThink's seam overwrites its first action token
        sequences=seq[None],
        attention_mask=torch.ones_like(seq)[None],
        action_mask=action_mask[None],
        rewards=torch.tensor([rec["info"]["correct"]]),
        scores=torch.tensor([rec["info"]["correct"]]),
        response_length=torch.tensor([len(rec["resp_ids"])]),
        truncated=torch.tensor([rec["truncated"]]),
        total_length=torch.tensor([float(len(ids))]),
        prompts=[rec["prompt"]],
        labels=[rec["label"]],
        info=info,
    )


def micro_batches(records, args, seed=0, kl_scale=0.0):
    """Groups in a random order (as ray.wait returns prompts), each group's samples contiguous and shuffled, then
    OpenRLHF's own split_rollout_samples (dynamic batching: seq-len balanced partitions reorder the samples)."""
    rng = random.Random(seed)
    by_q = {}
    for sid, rec in enumerate(records):
        by_q.setdefault(rec["q"], []).append(sid)
    order = list(by_q)
    rng.shuffle(order)
    samples = []
    for q in order:
        members = by_q[q][:]
        rng.shuffle(members)
        samples += [to_experience(records[sid], sid) for sid in members]
    exps = maker(args, cls=RemoteExperienceMaker).split_rollout_samples(samples)
    g = torch.Generator().manual_seed(seed)
    for e in exps:  # what make_experience attaches without a reference model (kl = 0), or a synthetic KL
        e.kl = torch.randn(e.action_mask.shape, generator=g) * kl_scale * e.action_mask
    return exps


def expected_output(records, method_name, cap=CAP):
    """The method function on the batch in problem order, built from the records (not from `index`)."""
    qs = sorted({r["q"] for r in records})
    pos = {q: i for i, q in enumerate(qs)}
    shape = (len(qs), N)
    correct, lengths, trunc, rep = (
        torch.zeros(shape, dtype=torch.bool),
        torch.zeros(shape),
        torch.zeros(shape, dtype=torch.bool),
        torch.zeros(shape, dtype=torch.bool),
    )
    boxed = {key: torch.zeros(shape, dtype=torch.bool) for key in ("think_boxed", "answer_boxed", "think_once")}
    for r in records:
        i, j = pos[r["q"]], r["j"]
        correct[i, j], lengths[i, j] = bool(r["info"]["correct"]), min(len(r["resp_ids"]), cap)
        trunc[i, j], rep[i, j] = r["truncated"], bool(r["info"]["repetitive"])
        for key, flags in boxed.items():
            flags[i, j] = bool(r["info"].get(key, 0.0))
    targets = {r["q"]: (r["info"].get("n_gold", 0.0), r["info"].get("l1_max", 0.0)) for r in records}
    n_gold = l1_max = None
    if all(targets[q][0] > 0 for q in qs):  # the reward function echoed an L1 target for every prompt
        n_gold = torch.tensor([targets[q][0] for q in qs])
        l1_max = torch.tensor([targets[q][1] == 1.0 for q in qs])
    executor = {}
    if "nothink" in records[0]["info"]:  # AdaptThink's executor echo
        executor["nothink"] = torch.zeros(shape, dtype=torch.bool)
        for r in records:
            executor["nothink"][pos[r["q"]], r["j"]] = r["info"]["nothink"] > 0.5
        executor["ref_acc"] = torch.tensor([next(r["info"]["ref_acc"] for r in records if r["q"] == q) for q in qs])
    batch = RolloutBatch(
        correct=correct,
        lengths=lengths,
        max_new_tokens=cap,
        truncated=trunc,
        repetitive=rep,
        n_gold=n_gold,
        l1_max=l1_max,
        **boxed,
        **executor,
    )
    out = ready(build_method(make_args(method_name).recipe)).step(batch)
    return {
        sid: (out.advantages[pos[r["q"]], r["j"]].item(), out.rewards[pos[r["q"]], r["j"]].item())
        for sid, r in enumerate(records)
    }, out


@pytest.mark.parametrize("method", METHODS)
def test_plugin_advantages_equal_method_output_after_openrlhf_reordering(rollouts, method):
    if method in ("l1-exact", "l1-max"):  # L1 needs the per-prompt targets the reward function echoes
        maximum = method == "l1-max"
        rollouts = with_targets(rollouts, {q: (float(300 + 61 * q), float(maximum and q % 2)) for q in range(PROMPTS)})
    if method == "adaptthink":
        rollouts = with_executor(rollouts)
    args = make_args(method)
    exps = micro_batches(rollouts, args)
    assert [int(i) for e in exps for i in e.info["sample_id"]] != sorted(range(len(rollouts)))  # really reordered
    plugin_maker = maker(args)
    ready(plugin_maker.method)  # Laser-D/-DE: the same monitor pass as expected_output's method
    plugin_maker.compute_advantages_and_returns(exps)
    expected, _ = expected_output(rollouts, method)
    for e in exps:
        for b, sid in enumerate(e.info["sample_id"].long().tolist()):
            adv = expected[sid][0]
            mask = e.action_mask[b].bool()
            assert torch.allclose(e.advantages[b][mask], torch.full((int(mask.sum()),), adv), atol=1e-5), sid
            assert e.info["recipe_advantage"][b].item() == pytest.approx(adv, abs=1e-5)
            assert e.info["recipe_reward"][b].item() == pytest.approx(expected[sid][1], abs=1e-5)


def with_executor(records):
    """The records with AdaptThink's executor echo: half of each group no-think, a reference accuracy per prompt."""
    out = copy.deepcopy(records)
    for r in out:
        r["info"]["nothink"], r["info"]["ref_acc"] = float(r["j"] < N // 2), (r["q"] % 5) / 4
    return out


def test_adaptthink_old_log_prob_of_each_first_action_token_becomes_log_rho_and_nothing_else_changes(rollouts):
    """The seam GSPO's importance ratio needs (lead_recipes.training.first_token), on OpenRLHF's own micro-batches:
    the first action token of a no-think sample gets log ρ, of a thinking one log(1 − ρ); every other entry stays."""
    rho = 0.25  # not 0.5, where log ρ = log(1 − ρ) and a swap would not show
    args = make_args("adaptthink")
    args.recipe = RecipeConfig.of({"method": "adaptthink", "adaptthink": {"rho": rho}})
    exps = micro_batches(with_executor(rollouts), args)
    before = [e.action_log_probs.clone() + torch.arange(e.action_log_probs.shape[1]) for e in exps]
    for e, b in zip(exps, before):
        e.action_log_probs.copy_(b)  # distinct values, so a write to the wrong position shows
    maker(args).compute_advantages_and_returns(exps)
    for e, b in zip(exps, before):
        want = b.clone()
        for row in range(len(want)):
            first = int(e.action_mask[row].nonzero()[0, 0])
            want[row, first] = math.log(rho if e.info["nothink"][row] > 0.5 else 1 - rho)
        assert torch.equal(e.action_log_probs, want)


def with_targets(records, targets):
    """The records with the reward function's L1 echo: every sample of prompt q gets targets[q] = (n_gold, l1_max)."""
    out = copy.deepcopy(records)
    for r in out:
        r["info"]["n_gold"], r["info"]["l1_max"] = targets[r["q"]]
    return out


def spy_on_batches(plugin_maker):
    """The RolloutBatch objects the plug-in hands to its method."""
    seen, step = [], plugin_maker.method.step
    plugin_maker.method.step = lambda batch: seen.append(batch) or step(batch)
    return seen


def test_l1_targets_from_the_labels_reach_the_method_per_prompt_after_openrlhf_reordering(rollouts):
    targets = {q: (float(100 + 37 * q), float(q % 3 == 0)) for q in range(PROMPTS)}
    records = with_targets(rollouts, targets)
    records[5]["info"]["n_gold"] = records[5]["info"]["l1_max"] = 0.0  # one sample's echo lost (error fallback)
    args = make_args("grpo")
    plugin_maker = maker(args)
    seen = spy_on_batches(plugin_maker)
    exps = micro_batches(records, args, seed=3)
    plugin_maker.compute_advantages_and_returns(exps)
    (batch,) = seen
    row_q = {i // N: records[int(s)]["q"] for e in exps for i, s in zip(e.index, e.info["sample_id"])}
    assert sorted(row_q.values()) == list(range(PROMPTS)) and list(row_q.values()) != sorted(row_q.values())
    assert batch.n_gold.tolist() == [targets[row_q[i]][0] for i in range(PROMPTS)]
    assert batch.l1_max.tolist() == [targets[row_q[i]][1] == 1.0 for i in range(PROMPTS)]
    expected, _ = expected_output(rollouts, "grpo")  # grpo ignores the targets: same advantages as without
    got = {int(s): e.info["recipe_advantage"][b].item() for e in exps for b, s in enumerate(e.info["sample_id"])}
    assert all(got[sid] == pytest.approx(expected[sid][0], abs=1e-5) for sid in expected)


def test_plain_labels_give_the_method_no_l1_targets(rollouts):
    args = make_args("grpo")
    plugin_maker = maker(args)
    seen = spy_on_batches(plugin_maker)
    plugin_maker.compute_advantages_and_returns(micro_batches(rollouts, args))
    assert seen[0].n_gold is None and seen[0].l1_max is None


def test_a_step_mixing_prompts_with_and_without_l1_targets_is_an_error_naming_the_data(rollouts):
    targets = {q: (0.0, 0.0) if q == 7 else (500.0, 0.0) for q in range(PROMPTS)}
    args = make_args("grpo")
    with pytest.raises(
        ValueError, match=r"prompt group \d+ has no L1 target while .* \(n_gold \[0\.0, .*data build --l1.mode"
    ):
        maker(args).compute_advantages_and_returns(micro_batches(with_targets(rollouts, targets), args))


def test_samples_of_one_prompt_with_different_l1_targets_are_an_error(rollouts):
    records = with_targets(rollouts, {q: (500.0, 0.0) for q in range(PROMPTS)})
    records[9]["info"]["n_gold"] = 600.0
    args = make_args("grpo")
    with pytest.raises(ValueError, match=r"has different L1 targets \(n_gold \[.*600\.0"):
        maker(args).compute_advantages_and_returns(micro_batches(records, args))


def test_permuting_rollouts_permutes_advantages(rollouts):
    per_seed = []
    for seed in (1, 2):
        exps = micro_batches(rollouts, make_args("lead"), seed=seed)
        maker(make_args("lead")).compute_advantages_and_returns(exps)
        per_seed.append(
            {int(s): e.info["recipe_advantage"][b].item() for e in exps for b, s in enumerate(e.info["sample_id"])}
        )
    assert per_seed[0].keys() == per_seed[1].keys()
    assert all(per_seed[0][k] == pytest.approx(per_seed[1][k], abs=1e-5) for k in per_seed[0])


def test_per_token_returns_equal_openrlhf_compute_reward_and_loop_without_kl_in_reward(rollouts):
    # kl = 0 in the reward (no reference model, or --algo.kl.use_loss): one non-zero per row, so exactly equal
    args = make_args("grpo")
    exps = micro_batches(rollouts, args)
    plugin_maker = maker(args, kl_coef=0.01)
    plugin_maker.compute_advantages_and_returns(exps)
    for e in exps:
        reward = compute_reward(
            e.info["recipe_advantage"],
            0.01,
            torch.zeros(e.action_mask.shape),
            action_mask=e.action_mask,
            reward_clip_range=(-10, 10),
        )
        want = RemoteExperienceMaker.get_cumulative_returns(None, reward, e.action_mask, 1.0)
        assert torch.equal(e.returns, want)
        assert torch.equal(e.advantages, e.returns)
        assert torch.equal(e.info["return"], reward.sum(-1))
        assert e.kl is None


def test_per_token_returns_with_kl_in_reward_match_openrlhf_loop_within_its_rounding(rollouts):
    """With KL in the reward every token adds a term; OpenRLHF's loop accumulates float32 rounding (~1e-6 over
    ~1k tokens), the cumsum accumulates in float64. Ours is within 1e-6 of the exact sum and never further from
    the loop than the loop is from the exact sum (+1e-6)."""
    args = make_args("grpo")
    exps = micro_batches(rollouts, args, kl_scale=0.05)
    kls = [e.kl.clone() for e in exps]
    maker(args, kl_coef=0.1).compute_advantages_and_returns(exps)
    for e, kl in zip(exps, kls):
        reward = compute_reward(
            e.info["recipe_advantage"], 0.1, kl, action_mask=e.action_mask, reward_clip_range=(-10, 10)
        )
        loop = RemoteExperienceMaker.get_cumulative_returns(None, reward, e.action_mask, 1.0)
        exact = (e.action_mask * reward.double()).flip(-1).cumsum(-1).flip(-1)
        assert (e.returns.double() - exact).abs().max() <= 1e-6
        loop_err = (loop.double() - exact).abs().max().item()
        assert (e.returns - loop).abs().max().item() <= loop_err + 1e-6
        assert torch.allclose(e.info["return"], reward.sum(-1), atol=1e-6)


def _realistic_rewards(dtype, rows=16, width=1500, seed=0):
    """compute_reward's output shape of values: small per-token KL terms plus one outcome value at EOS."""
    g = torch.Generator().manual_seed(seed)
    mask = torch.zeros(rows, width, dtype=torch.bool)
    ends = torch.randint(1, width - 50, (rows,), generator=g)
    mask[torch.arange(width)[None, :] < ends[:, None]] = True
    rewards = torch.randn(rows, width, generator=g) * 1e-4
    rewards[torch.arange(rows), ends - 1] += torch.randn(rows, generator=g) * 2
    return rewards.to(dtype), mask


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_vectorised_cumulative_returns_equal_openrlhf_loop(dtype):
    rewards, mask = _realistic_rewards(dtype)
    ours = maker(make_args()).get_cumulative_returns(rewards, mask, 1.0)
    stock = RemoteExperienceMaker.get_cumulative_returns(None, rewards, mask, 1.0)
    assert ours.dtype == stock.dtype == dtype
    # the loop adds in `dtype` (float32 rounding accumulates over ~1k tokens); the cumsum accumulates in float64
    exact = (mask * rewards.double()).flip(-1).cumsum(-1).flip(-1)
    loop_err = (stock.double() - exact).abs().max().item()
    assert (ours.double() - exact).abs().max() <= 1e-6
    assert (ours.double() - stock.double()).abs().max() <= loop_err + 1e-6
    if dtype == torch.float64:
        assert (ours - stock).abs().max() <= 1e-9


def test_vectorised_cumulative_returns_keep_bf16_dtype_within_one_rounding():
    rewards, mask = _realistic_rewards(torch.bfloat16)
    ours = maker(make_args()).get_cumulative_returns(rewards, mask, 1.0)
    stock = RemoteExperienceMaker.get_cumulative_returns(None, rewards, mask, 1.0)
    assert ours.dtype == torch.bfloat16
    assert torch.allclose(ours.float(), stock.float(), rtol=2**-7, atol=1e-6)


def test_gamma_below_one_falls_back_to_openrlhf_loop():
    rewards, mask = torch.randn(4, 50), torch.ones(4, 50, dtype=torch.bool)
    ours = maker(make_args()).get_cumulative_returns(rewards, mask, 0.9)
    assert torch.equal(ours, RemoteExperienceMaker.get_cumulative_returns(None, rewards, mask, 0.9))


@pytest.mark.parametrize(
    "penalties",
    [
        {"overlong_buffer_len": 256},
        {"overlong_buffer_len": 512, "overlong_penalty_factor": 0.5},
        {"stop_properly_penalty_coef": 0.0},
    ],
)
def test_with_length_penalties_grpo_equals_openrlhfs_own_group_norm(rollouts, penalties):
    """OpenRLHF's group_norm on its own code path (the anchor) and the plug-in with `grpo`: the same per-token
    advantages, so the penalty enters the group statistics once, as a reward term
    (docs/training.md#dapos-overlong-penalty)."""
    args = make_args("grpo", **penalties)
    ours, theirs = micro_batches(rollouts, args), micro_batches(rollouts, args)
    maker(args).compute_advantages_and_returns(ours)
    maker(args, cls=RemoteExperienceMaker).compute_advantages_and_returns(theirs)
    changed = 0
    for mine, anchor in zip(ours, theirs):
        assert torch.equal(mine.info["sample_id"], anchor.info["sample_id"])
        mask = mine.action_mask.bool()
        a_mine = (mine.advantages * mask).sum(-1) / mask.sum(-1)  # kl = 0: one value per response
        a_anchor = (anchor.advantages * mask).sum(-1) / mask.sum(-1)
        assert torch.allclose(mine.advantages[mask], torch.repeat_interleave(a_mine, mask.sum(-1)), atol=1e-6)
        # the estimators differ only in ε (1e-6 here, 1e-9 upstream), which matters where a group's std is tiny
        std = anchor.info["group_reward_std"]
        assert torch.allclose(a_mine * (std + 1e-6), a_anchor * (std + 1e-9), atol=1e-6)
        changed += int((mine.info["recipe_reward"] != mine.info["correct"]).sum())
    assert changed  # the penalty really moved some rewards


def test_the_trainer_logs_steps_prompts_and_eta_after_each_step_counted_from_its_start(monkeypatch):
    """Beyond OpenRLHF's per-episode bar, `lead-recipes train` logs the run total and an ETA across episodes."""
    logged = []
    monkeypatch.setattr(plugin.logger, "info", logged.append)
    clock = iter([1000.0, 1090.0])  # the start of fit(), then the end of the first step after the resume
    monkeypatch.setattr("lead_recipes.progress.time.monotonic", lambda: next(clock))
    trainer = NS(args=NS(train=NS(num_episodes=2)), prompts_dataloader=[None] * 100, recipe_progress=None)
    mixin = plugin._RecipeTrainerMixin
    mixin._log_progress(trainer, 11, {"total_consumed_prompts": 88})  # before fit() started: nothing
    mixin._start_progress(trainer, {"global_step": 10, "total_consumed_prompts": 80})
    mixin._log_progress(trainer, 11, {"total_consumed_prompts": 88})
    # 112 prompts left at 8 per 90 s step: 14 more steps, 21 minutes
    assert logged == ["lead-recipes: step 11/~25, 88/200 prompts (44.0%), 1m 30s/step, ETA 21m 00s"]


def test_mixed_prompt_group_is_rejected(rollouts):
    args = make_args("grpo")
    exps = micro_batches(rollouts[: 2 * N], args)
    a, b = exps[0], exps[-1]
    a.index[0], b.index[-1] = b.index[-1], a.index[0]  # swap two samples of different prompts across groups
    if a.prompts[0] == b.prompts[-1]:
        pytest.skip("picked two samples of the same prompt")
    with pytest.raises(ValueError, match="mixes"):
        maker(args).compute_advantages_and_returns(exps)


def test_non_permutation_indices_are_rejected(rollouts):
    exps = micro_batches(rollouts[: 2 * N], make_args("grpo"))
    exps[0].index[0] = exps[-1].index[-1]
    with pytest.raises(ValueError, match="permutation"):
        maker(make_args("grpo")).compute_advantages_and_returns(exps)


def test_missing_correct_key_names_the_reward_function(rollouts):
    exps = micro_batches(rollouts[: 2 * N], make_args("grpo"))
    del exps[0].info["correct"]
    with pytest.raises(ValueError, match="reward function"):
        maker(make_args("grpo")).compute_advantages_and_returns(exps)


def test_non_group_estimator_is_refused():
    args = make_args()
    args.algo.advantage.estimator = "reinforce_baseline"
    with pytest.raises(ValueError, match="group_norm"):
        maker(args)


def test_stats_count_grading_statuses_and_problems_are_recorded(rollouts):
    args = make_args("lead")
    exps = micro_batches(rollouts, args)
    m = maker(args)
    m.compute_advantages_and_returns(exps)
    n_correct = sum(r["info"]["correct"] for r in rollouts)
    assert m.last_stats["recipe/grading/correct_count"] == n_correct
    assert sum(
        m.last_stats[f"recipe/grading/{s}_count"] for s in ("correct", "wrong", "no_answer", "timeout", "error")
    ) == len(rollouts)
    assert m.last_stats["recipe/grading/status_missing"] == 0.0
    assert m.last_stats["recipe/correct_rate"] == pytest.approx(n_correct / len(rollouts))
    assert any(k.startswith("recipe/lead/") for k in m.last_stats)
    assert len(m.last_problems) == PROMPTS
    assert sum(p["correct"] for p in m.last_problems) == n_correct
    assert {p["total"] for p in m.last_problems} == {N}


def test_recipe_state_is_json_and_pickle_safe():
    method = build_method(make_args("leash").recipe)
    state = resume.recipe_client_state(method, "abc123")
    assert json.loads(json.dumps(state)) == state
    assert pickle.loads(pickle.dumps(make_args("lead").recipe)) == make_args("lead").recipe


def test_resumed_checkpoint_without_recipe_state_is_an_error():
    method = build_method(make_args("lead").recipe)
    with pytest.raises(RuntimeError, match="refusing"):
        resume.restore_recipe_state(method, {"global_step": 5})
    assert resume.restore_recipe_state(method, {"global_step": 0}) is None


def test_version_guard_names_a_different_version(monkeypatch):
    real = openrlhf_parser.importlib.metadata.version
    monkeypatch.setattr(
        openrlhf_parser.importlib.metadata, "version", lambda name: "0.12.0" if name == "openrlhf" else real(name)
    )
    with pytest.raises(openrlhf_parser.OpenRLHFMismatch, match="0.12.0"):
        openrlhf_parser.check_openrlhf()


# ------------------------------------------------------------------ trainer: checkpointed controller state (Ray)
@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("method", ["lead", "leash"])
def test_restored_trainer_continues_controller_exactly(ray_local, tiny_qwen2, prompt_file, rollouts, tmp_path, method):
    ckpt = tmp_path / "ckpt"
    first = make_trainer(tiny_qwen2, prompt_file, ckpt, method)
    assert isinstance(first.experience_maker, plugin.RecipeExperienceMaker)
    initial = first.recipe_method.state_dict()
    first.experience_maker.compute_advantages_and_returns(micro_batches(rollouts, make_args(method), seed=3))
    first._append_problems(1)
    assert first.recipe_method.state_dict() != initial  # the controller moved
    client_states = {"episode": 0, "global_step": 1, "total_consumed_prompts": 4, "data_loader_state_dict": {}}
    first.save_logs_and_checkpoints(1, dict(first.experience_maker.last_stats), client_states)
    assert client_states["recipe"]["controller"] == first.recipe_method.state_dict()

    second = make_trainer(tiny_qwen2, prompt_file, ckpt, method, load=True)
    assert second.recipe_method.state_dict() == initial
    states = second.init_checkpoint_states()
    second.restore_best_checkpoint_state(states)
    assert second.recipe_method.state_dict() == first.recipe_method.state_dict()

    step2 = micro_batches(rollouts, make_args(method), seed=4)
    a, b = copy.deepcopy(step2), copy.deepcopy(step2)
    first.experience_maker.compute_advantages_and_returns(a)
    second.experience_maker.compute_advantages_and_returns(b)
    for x, y in zip(a, b):
        assert torch.equal(x.advantages, y.advantages)
    assert second.recipe_method.state_dict() == first.recipe_method.state_dict()
    assert second.experience_maker.last_stats == first.experience_maker.last_stats
    lines = [json.loads(x) for x in (ckpt / plugin.PROBLEMS_FILE).read_text().splitlines()]
    assert len(lines) == PROMPTS and {x["step"] for x in lines} == {1}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_fresh_trainer_refuses_checkpoint_without_recipe_state(ray_local, tiny_qwen2, prompt_file, tmp_path):
    ckpt = tmp_path / "ckpt"
    first = make_trainer(tiny_qwen2, prompt_file, ckpt, "lead")
    states = {"episode": 0, "global_step": 2, "total_consumed_prompts": 8, "data_loader_state_dict": {}}
    # what stock OpenRLHF would have saved: no "recipe" key
    plugin.BasePPOTrainer.save_logs_and_checkpoints(first, 2, {}, states)
    second = make_trainer(tiny_qwen2, prompt_file, ckpt, "lead", load=True)
    with pytest.raises(RuntimeError, match="no client_states"):
        second.restore_best_checkpoint_state(second.init_checkpoint_states())


def test_wandb_run_id_is_kept_across_a_resume(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_RUN_ID", raising=False)
    monkeypatch.delenv("WANDB_RESUME", raising=False)
    args = NS(logger=NS(wandb=NS(key="k")), ckpt=NS(path=str(tmp_path), load_enable=False))
    first = resume.prepare_wandb_resume(args)
    monkeypatch.delenv("WANDB_RUN_ID")
    args.ckpt.load_enable = True
    assert resume.prepare_wandb_resume(args) == first
    assert resume.os.environ["WANDB_RUN_ID"] == first and plugin.os.environ["WANDB_RESUME"] == "allow"
    args.ckpt.load_enable = False
    monkeypatch.delenv("WANDB_RUN_ID")
    assert resume.prepare_wandb_resume(args) != first  # a fresh run gets a fresh id


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_async_training_actor_installs_the_recipe_and_saves_its_state(ray_local, tiny_qwen2, prompt_file, tmp_path):
    sync = make_trainer(tiny_qwen2, prompt_file, tmp_path / "ckpt", "leash")  # for its resolved strategy and group
    actor = plugin.RecipeTrainingActor(
        pretrain=str(tiny_qwen2),
        strategy=sync.strategy,
        actor_model_group=sync.actor_model_group,
        critic_model_group=None,
        reward_model_group=None,
        reference_model_group=None,
        vllm_engines=None,
        vllm_lock=None,
        rollout_queue=None,
        rollout_slots=None,
    )
    assert isinstance(actor.experience_maker, plugin.RecipeExperienceMaker)
    states = {"episode": 0, "global_step": 1, "total_consumed_prompts": 4, "data_loader_state_dict": {}}
    actor.save_logs_and_checkpoints(1, {}, states)
    assert states["recipe"]["method"] == "leash"


def test_async_trainer_swaps_training_actor_inside_its_own_process(monkeypatch):
    import openrlhf.trainer.ppo_trainer_async as pta

    seen = {}
    monkeypatch.setattr(pta, "TrainingActor", pta.TrainingActor)  # restored after the test
    monkeypatch.setattr(pta, "GenerateSamplesActor", pta.GenerateSamplesActor)
    monkeypatch.setattr(
        plugin.PPOTrainerAsync.__ray_actor_class__,
        "__init__",
        lambda self, *a, **k: seen.update(cls=pta.TrainingActor, gen=pta.GenerateSamplesActor),
    )
    plugin.RecipeAsyncTrainer("model", None, None, None, None, None, None)
    assert seen["cls"] is plugin.RecipeTrainingActorRemote
    from lead_recipes.training.grading_gate import RecipeGenerateSamplesActorRemote

    assert seen["gen"] is RecipeGenerateSamplesActorRemote  # its generator counts grading before filtering


def test_advantage_step_restores_the_torch_thread_count(rollouts):
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        maker(make_args("grpo")).compute_advantages_and_returns(micro_batches(rollouts[: 2 * N], make_args("grpo")))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


# ------------------------------------------------------------------ checkpoint on request (preemption)
def _saved_states(ckpt):
    root = ckpt / "_actor"
    tag = (root / "latest").read_text().strip()
    return tag, torch.load(root / tag / "client_states.pt", weights_only=True)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_save_request_makes_trainer_checkpoint_with_recipe_state_at_next_step_boundary_and_stop(
    ray_local, tiny_qwen2, prompt_file, rollouts, tmp_path, monkeypatch
):
    """The real RecipeTrainer (DeepSpeed's save is the CPU stand-in above: DeepSpeed needs CUDA here) at a step that
    is no periodic save step: nothing is saved without a request; with one, OpenRLHF's own save path writes a full
    checkpoint with the controller state, the marker names it, the request is consumed and training stops."""
    monkeypatch.delenv(preempt.SAVE_REQUEST_ENV, raising=False)
    ckpt = tmp_path / "ckpt"
    trainer = make_trainer(tiny_qwen2, prompt_file, ckpt, "lead", save_steps=20)
    trainer.experience_maker.compute_advantages_and_returns(micro_batches(rollouts, make_args("lead"), seed=5))
    states = {"episode": 0, "global_step": 3, "total_consumed_prompts": 12, "data_loader_state_dict": {}}
    trainer.save_logs_and_checkpoints(3, {}, dict(states))
    assert not (ckpt / "_actor" / "latest").exists()  # step 3 is no save step (save_steps 20)

    request = trainer.args.recipe_save_request
    assert request == str(ckpt / preempt.REQUEST_FILE)
    preempt.request_save(request, "SIGUSR1")
    with pytest.raises(preempt.SavedOnRequest) as stopped:
        trainer.save_logs_and_checkpoints(3, {}, dict(states))
    tag, saved = _saved_states(ckpt)
    assert (stopped.value.step, stopped.value.tag, tag) == (3, "global_step3", "global_step3")
    assert saved["global_step"] == 3 and saved["total_consumed_prompts"] == 12
    assert saved["recipe"]["controller"] == trainer.recipe_method.state_dict() and saved["recipe"]["method"] == "lead"
    marker = json.loads((ckpt / preempt.SAVED_FILE).read_text())
    assert (marker["step"], marker["tag"], marker["request"]["signal"]) == (3, "global_step3", "SIGUSR1")
    assert not (ckpt / preempt.REQUEST_FILE).exists() and trainer.args.ckpt.save_steps == 20


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_fit_stops_at_the_requested_save_and_closes_its_trackers(
    ray_local, tiny_qwen2, prompt_file, tmp_path, monkeypatch
):
    """Upstream fit() (here its loop body's save call: the loop needs vLLM) calls save_logs_and_checkpoints after
    each step; with a request pending, fit ends with SavedOnRequest and the trackers closed (upstream closes them
    only after a normal end), so OpenRLHF's final model save is skipped."""
    monkeypatch.delenv(preempt.SAVE_REQUEST_ENV, raising=False)
    trainer = make_trainer(tiny_qwen2, prompt_file, tmp_path / "ckpt", "lead", save_steps=20)
    steps = []

    def upstream_loop(self, global_step=0):
        for step in range(global_step + 1, global_step + 4):
            steps.append(step)
            if step == 2:
                preempt.request_save(self.args.recipe_save_request, "SIGUSR1")
            self.save_logs_and_checkpoints(
                step,
                {},
                {"episode": 0, "global_step": step, "total_consumed_prompts": 4 * step, "data_loader_state_dict": {}},
            )

    class Tracker:
        closed = False

        def log_train(self, *a):
            pass

        def close(self):
            Tracker.closed = True

    monkeypatch.setattr(plugin.PPOTrainer.__ray_actor_class__, "fit", upstream_loop)
    trainer.tensorboard_logger = Tracker()
    with pytest.raises(preempt.SavedOnRequest):
        trainer.fit()
    assert steps == [1, 2] and Tracker.closed
    assert _saved_states(tmp_path / "ckpt")[0] == "global_step2"


@pytest.mark.slow
def test_saved_on_request_raised_in_a_ray_actor_reaches_the_driver_as_itself(ray_local):
    """`lead-recipes train` recognises the stop through ray.get (RayTaskError subclasses the cause)."""

    @ray.remote
    def stop():
        raise preempt.SavedOnRequest(7, "global_step7")

    with pytest.raises(preempt.SavedOnRequest) as err:
        ray.get(stop.remote())
    assert (err.value.step, err.value.tag) == (7, "global_step7")
    assert pickle.loads(pickle.dumps(preempt.SavedOnRequest(1, "t"))).tag == "t"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_async_training_actor_saves_on_request_without_stopping(ray_local, tiny_qwen2, prompt_file, tmp_path):
    """Async mode: PPOTrainerAsync.fit also waits on the generator actor, which would block forever if the
    trainer stopped, so the training actor saves and marks but keeps going (the job script ends it)."""
    sync = make_trainer(tiny_qwen2, prompt_file, tmp_path / "ckpt", "leash", save_steps=20)
    actor = plugin.RecipeTrainingActor(
        pretrain=str(tiny_qwen2),
        strategy=sync.strategy,
        actor_model_group=sync.actor_model_group,
        critic_model_group=None,
        reward_model_group=None,
        reference_model_group=None,
        vllm_engines=None,
        vllm_lock=None,
        rollout_queue=None,
        rollout_slots=None,
    )
    preempt.request_save(actor.args.recipe_save_request, "SIGTERM")
    actor.save_logs_and_checkpoints(
        2, {}, {"episode": 0, "global_step": 2, "total_consumed_prompts": 8, "data_loader_state_dict": {}}
    )
    tag, saved = _saved_states(tmp_path / "ckpt")
    assert tag == "global_step2" and saved["recipe"]["method"] == "leash"
    assert json.loads((tmp_path / "ckpt" / preempt.SAVED_FILE).read_text())["stopped"] is False


# ------------------------------------------------------------------ defects a real run shows (clip, std, resume)
def synthetic_records(groups=16, n=N, correct_groups=(0,), cap=CAP):
    """A batch where most groups are all wrong and truncated and a few have one short correct sample: LEAD and
    GDPO whiten over the batch, so the rare correct samples get |A| well beyond OpenRLHF's reward clip of 10."""
    records = []
    for q in range(groups):
        for j in range(n):
            correct = q in correct_groups and j == 0
            length = 40 + 5 * j if correct or q in correct_groups else cap
            info = {"correct": float(correct), "repetitive": 0.0}
            info.update(
                {
                    f"status_{st}": float(st == ("correct" if correct else "wrong"))
                    for st in ("correct", "wrong", "no_answer", "timeout", "error")
                }
            )
            info["grade_latency_s"] = 0.001
            records.append(
                dict(
                    q=q,
                    j=j,
                    prompt=f"problem {q}",
                    label=str(q),
                    prompt_ids=[1, 2, 3],
                    resp_ids=[5] * length,
                    truncated=length >= cap,
                    info=info,
                )
            )
    return records


@pytest.mark.parametrize("method", ["lead", "gdpo"])
def test_method_advantage_beyond_ten_reaches_the_loss_unclipped(method):
    records = synthetic_records()
    args = make_args(method)
    exps = micro_batches(records, args)
    maker(args).compute_advantages_and_returns(exps)
    adv = torch.cat([e.info["recipe_advantage"] for e in exps])
    assert adv.abs().max() > 10  # the premise: the method's own advantage exceeds OpenRLHF's default clip
    for e in exps:
        for b in range(len(e.action_mask)):
            mask = e.action_mask[b].bool()
            want = torch.full((int(mask.sum()),), e.info["recipe_advantage"][b].item())
            assert torch.allclose(e.advantages[b][mask], want, atol=1e-5)


def test_kl_in_the_reward_is_still_applied_to_an_unclipped_advantage():
    records = synthetic_records()
    args = make_args("lead")
    exps = micro_batches(records, args, kl_scale=0.05)
    kls = [e.kl.clone() for e in exps]
    maker(args, kl_coef=0.1).compute_advantages_and_returns(exps)
    for e, kl in zip(exps, kls):
        want = compute_reward(e.info["recipe_advantage"], 0.1, kl, action_mask=e.action_mask, reward_clip_range=None)
        assert torch.allclose(e.info["return"], want.sum(-1), atol=1e-5)


def test_group_reward_std_is_of_rewards_after_the_length_penalties(rollouts):
    args = make_args("grpo", overlong_buffer_len=256)
    exps = micro_batches(rollouts, args)
    lengths = {int(s): e.response_length[b].item() for e in exps for b, s in enumerate(e.info["sample_id"])}
    maker(args).compute_advantages_and_returns(exps)
    by_q = {}
    for sid, r in enumerate(rollouts):
        penalty = -min(max(lengths[sid] - (CAP - 256), 0), 256) / 256
        by_q.setdefault(r["q"], []).append(r["info"]["correct"] + penalty)
    moved = 0
    for e in exps:
        for b, sid in enumerate(e.info["sample_id"].long().tolist()):
            q = rollouts[sid]["q"]
            want = torch.tensor(by_q[q]).std().item()
            moved += (
                abs(
                    want
                    - torch.tensor(
                        [rollouts[s]["info"]["correct"] for s in range(len(rollouts)) if rollouts[s]["q"] == q]
                    )
                    .std()
                    .item()
                )
                > 1e-6
            )
            assert e.info["group_reward_std"][b].item() == pytest.approx(want, abs=1e-5)
    assert moved  # the penalties changed some group's std, so the order of the two steps is observable


def test_resume_drops_problem_records_after_the_restored_step(tmp_path):
    from lead_recipes.training.step_stats import truncate_problem_records

    path = tmp_path / plugin.PROBLEMS_FILE
    lines = [json.dumps({"step": s, "problem": p}) for s in (1, 2, 3, 4) for p in ("a", "b")]
    path.write_text("\n".join(lines) + "\n" + '{"step": 5, "probl')  # a torn last append
    assert truncate_problem_records(str(path), 2) == 5
    kept = [json.loads(x) for x in path.read_text().splitlines()]
    assert [(r["step"], r["problem"]) for r in kept] == [(1, "a"), (1, "b"), (2, "a"), (2, "b")]
    assert truncate_problem_records(str(path), 2) == 0
    assert truncate_problem_records(str(tmp_path / "absent.jsonl"), 2) == 0


def test_restore_truncates_the_problem_file_to_the_restored_step(tmp_path):
    class Stub(plugin._RecipeTrainerMixin, plugin.BasePPOTrainer):
        def __init__(self):  # no Ray, no models: only what restore uses
            self.args = NS(ckpt=NS(path=str(tmp_path)), rollout=NS(max_new_tokens=CAP), data=NS(max_len=CAP))
            self.experience_maker = NS(method=build_method(make_args("grpo").recipe))

    path = tmp_path / plugin.PROBLEMS_FILE
    path.write_text("".join(json.dumps({"step": s, "problem": "a"}) + "\n" for s in (1, 2, 3)))
    trainer = Stub()
    state = {
        "global_step": 1,
        "recipe": resume.recipe_client_state(trainer.recipe_method, None, trainer._recipe_settings()),
    }
    trainer.restore_best_checkpoint_state(state)
    assert [json.loads(x)["step"] for x in path.read_text().splitlines()] == [1]


# ----------------------------------- OpenRLHF's length penalties (docs/training.md#dapos-overlong-penalty)
def golden_g7_records():
    """baselines.md §8 G7: one group of 4 with DAPO's ±1 base, lengths 2000, 3500, 4096 (cut at the cap), 3072."""
    records = []
    for j, (correct, length) in enumerate([(1, 2000), (1, 3500), (0, 4096), (0, 3072)]):
        info = {"correct": float(correct), "repetitive": 0.0}
        ids = [5] * length
        records.append(
            dict(
                q=0, j=j, prompt="p", label="1", prompt_ids=[1, 2, 3], resp_ids=ids, truncated=length == 4096, info=info
            )
        )
    return records


def test_dapo_overlong_golden_group_g7_through_openrlhfs_own_penalty_and_the_plugin():
    """G7 to 1e-5: OpenRLHF's apply_length_penalties (L_max 4096, B 1024) on DAPO's ±1 reward, which is composed
    with every part off and the signed correctness reward: R = ±1 + P, then the group norm."""
    args = make_args("composed", cap=4096, n=4, overlong_buffer_len=1024)
    parts = dict(correct_reward="signed", length_reward="none", difficulty="none", budget="none")
    args.recipe = RecipeConfig.of({"method": "composed", "composed": parts})
    records = golden_g7_records()
    exps = micro_batches(records, args)
    maker(args).compute_advantages_and_returns(exps)
    got = {
        int(s): (e.info["recipe_reward"][b].item(), e.info["recipe_advantage"][b].item())
        for e in exps
        for b, s in enumerate(e.info["sample_id"])
    }
    want_r, want_a = [1.0, 0.582031, -2.0, -1.0], [0.971126, 0.671456, -1.179774, -0.462808]
    assert [got[j][0] for j in range(4)] == pytest.approx(want_r, abs=1e-6)
    assert [got[j][1] for j in range(4)] == pytest.approx(want_a, abs=1e-5)


def test_the_plugin_refuses_overlong_without_max_new_tokens_for_any_caller():
    """Without --rollout.max_new_tokens OpenRLHF measures the buffer from data.max_len, so the G7 group's cut response
    would get −0.5, not −1. `lead-recipes train` refuses it; so must the plug-in itself, for a
    caller of run_openrlhf or OpenRLHF's own entry point (docs/training.md says it guards them)."""
    args = make_args("grpo", cap=4096, n=4, overlong_buffer_len=1024)
    args.rollout.max_new_tokens, args.data.max_len = None, 4608
    with pytest.raises(ValueError, match="--reward.overlong_buffer_len without --rollout.max_new_tokens"):
        maker(args)


@pytest.mark.parametrize("method", [e.name for e in REGISTRY if not e.reward_is_score])
def test_stop_properly_is_refused_for_a_method_that_builds_its_own_reward(method):
    """ProRL's stop-properly coef rescales the reward function's 0/1 reward of a truncated sample; the plug-in hands
    the change to the method as a reward term. For thinkprune with coef 0 (stock OpenRLHF's way to zero a cut
    response's reward, with `--rollout.max_new_tokens L`) a cut response whose text holds the right answer would get
    R = −1 while a cut wrong one gets 0."""
    with pytest.raises(ValueError, match=f"--reward.stop_properly_penalty_coef.*{method}"):
        maker(make_args(method, stop_properly_penalty_coef=0.0))


def test_dler_takes_openrlhfs_stop_properly_scale_as_its_truncation_rule(rollouts):
    """DLER's truncation rule is OpenRLHF's `--reward.stop_properly_penalty_coef 0` (the recipe's flag): the reward
    the method shapes is the correctness of a rollout that stopped, 0 for a truncated one (docs/methods.md)."""
    args = make_args("dler", stop_properly_penalty_coef=0.0)
    exps = micro_batches(rollouts, args)
    maker(args).compute_advantages_and_returns(exps)
    truncated = 0
    for e in exps:
        assert torch.equal(e.info["recipe_reward"], e.info["correct"] * (~e.truncated.bool()).float())
        truncated += int(e.truncated.sum())
    assert truncated  # the rollouts do hold truncated samples


def test_laser_de_guard_gets_lasers_token_detector_on_each_responses_ids(rollouts):
    """With --recipe.laser_de.repetition_guard_enable the plug-in sets RolloutBatch.repetitive from Laser's detector
    on each response's token ids (read from the experience's sequences through its action mask, after OpenRLHF's
    reordering), not from the reward function's text detector; some responses differ between the two."""
    from lead_recipes.grading.repetition import laser_repetition_start

    args = make_args("laser-de")
    args.recipe = RecipeConfig.of({"method": "laser-de", "laser_de": {"repetition_guard_enable": True}})
    exps = micro_batches(rollouts, args)
    plugin_maker = maker(args)
    ready(plugin_maker.method)
    seen = spy_on_batches(plugin_maker)
    plugin_maker.compute_advantages_and_returns(exps)
    qs = sorted({r["q"] for r in rollouts})
    want = torch.zeros(len(qs), N, dtype=torch.bool)
    text = torch.zeros(len(qs), N, dtype=torch.bool)
    for r in rollouts:
        ids = r["resp_ids"]
        want[qs.index(r["q"]), r["j"]] = laser_repetition_start(ids) < len(ids)
        text[qs.index(r["q"]), r["j"]] = r["info"]["repetitive"] > 0.5
    assert torch.equal(seen[0].repetitive, want) and want.any()
    assert not torch.equal(want, text)  # the check tells the two detectors apart on these rollouts
