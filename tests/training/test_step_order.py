"""With --train.dynamic_batch_enable every optimizer step of a rollout sees the whole range of lengths, not the
extremes first and the middle last (OpenRLHF's balance_experiences order, which the replay buffer does not shuffle
then), and each rank keeps exactly the samples, hence the tokens, OpenRLHF's balancing gave it."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest
import torch
from openrlhf.trainer.ppo_utils.experience import Experience, balance_experiences, split_experience_batch

from lead_recipes.training.step_order import balanced_then_shuffled


def _args(dp, train_batch):
    return NS(
        actor=NS(num_nodes=1, num_gpus_per_node=dp),
        ds=NS(ring_attn_size=1, tensor_parallel_size=1),
        train=NS(batch_size=train_batch),
    )


def _samples(lengths):
    out = []
    for i, n in enumerate(lengths):
        seq = torch.arange(1, n + 1)[None]
        out.append(
            Experience(
                sequences=seq,
                attention_mask=torch.ones_like(seq),
                action_mask=torch.ones(1, n - 1),
                total_length=torch.tensor([float(n)]),
                response_length=torch.tensor([float(n - 1)]),
                prompts=[f"p{i}"],
                labels=["1"],
                info={"sample": torch.tensor([float(i)])},
            )
        )
    return out


def _ids(batch) -> list[float]:
    return [float(x) for x in batch.info["sample"]]


def optimizer_steps(rank_batches, step_size):
    """Each rank's samples cut as the replay buffer cuts them: consecutive slices of train.batch_size / dp."""
    steps = []
    for batch in rank_batches:
        lengths = [int(e.total_length.item()) for e in split_experience_batch(batch)]
        steps.append([lengths[i : i + step_size] for i in range(0, len(lengths), step_size)])
    return steps


def spans(steps) -> bool:
    """Every optimizer step of every rank holds one of its rank's longest and one of its shortest quarter."""
    for rank in steps:
        ranked = sorted(x for step in rank for x in step)
        low, high = ranked[len(ranked) // 4 - 1], ranked[-(len(ranked) // 4)]
        if not all(min(step) <= low and max(step) >= high for step in rank):
            return False
    return True


@pytest.mark.parametrize("dp, train_batch", [(1, 16), (2, 16), (4, 32)])
def test_each_optimizer_step_spans_the_lengths_and_each_rank_keeps_its_samples(dp, train_batch):
    lengths = [20 + (37 * i) % 200 for i in range(64)]  # 64 distinct lengths in a scrambled order
    upstream = balance_experiences(_samples(lengths), _args(dp, train_batch))
    ours = balanced_then_shuffled(_samples(lengths), _args(dp, train_batch), seed=7)
    size = train_batch // dp
    assert not spans(optimizer_steps(upstream, size))  # as read: the first steps extremes, the last the middle
    assert spans(optimizer_steps(ours, size))
    for a, b in zip(upstream, ours):  # same samples per rank: token balance kept
        assert sorted(_ids(a)) == sorted(_ids(b))
        assert a.total_length.sum() == b.total_length.sum()


def test_the_order_is_deterministic_in_the_seed():
    lengths = [20 + (37 * i) % 200 for i in range(32)]
    runs = [[_ids(e) for e in balanced_then_shuffled(_samples(lengths), _args(2, 8), seed=s)] for s in (1, 1, 2)]
    assert runs[0] == runs[1] != runs[2]


class _OneRankTrainer:
    """Stands in for OpenRLHF's ActorPPOTrainer around a real replay buffer (its DeepSpeed model cannot be built on
    CPU): ppo_train runs max_epochs passes, each recording the buffer's order as upstream's loop would read it."""

    def __init__(self, samples, max_epochs):
        from openrlhf.trainer.ppo_utils.replay_buffer import NaiveReplayBuffer

        self.max_epochs, self.epochs = max_epochs, []
        self.replay_buffer = NaiveReplayBuffer(1, 0, False, False, True)
        self.replay_buffer.items.extend(samples)

    def ppo_train(self, kl_ctl):
        for _ in range(self.max_epochs):
            self.epochs.append([float(e.info["sample"]) for e in self.replay_buffer.items])
        return {"policy_loss": float(len(self.epochs)), "actor_lr": float(len(self.epochs))}


def _fit(actor_class, samples, args, monkeypatch):
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)  # the buffer names its (unused) target device
    actor = object.__new__(actor_class)
    actor.strategy, actor.actor, actor.trainer = NS(args=args), NS(train=lambda: None), _OneRankTrainer(samples, 3)
    status = actor.fit(0.0)
    assert actor.trainer.max_epochs == 3 and "ppo_train" not in vars(actor.trainer)  # restored after fit
    return actor.trainer.epochs, status


def test_each_later_epoch_deals_the_ranks_samples_into_its_steps_anew(monkeypatch):
    from openrlhf.trainer.ray.ppo_actor import PolicyModelActor

    from lead_recipes.training.step_order import RecipePolicyModelActor

    lengths = [20 + (37 * i) % 200 for i in range(32)]
    args = _args(1, 8)
    args.train.dynamic_batch_enable, args.train.seed = True, 3
    (first,) = balanced_then_shuffled(_samples(lengths), args, seed=7)  # the trainer's deal: epoch 1
    upstream, _ = _fit(PolicyModelActor.__ray_actor_class__, split_experience_batch(first), args, monkeypatch)
    assert upstream[0] == upstream[1] == upstream[2]  # as read: every epoch repeats the first one's order
    ours, status = _fit(RecipePolicyModelActor, split_experience_batch(first), args, monkeypatch)
    assert ours[0] == upstream[0] and len({tuple(o) for o in ours}) == 3
    for order in ours:  # each epoch: the rank's samples, every optimizer step spanning the lengths
        assert sorted(order) == sorted(upstream[0])
        by_id = dict(zip(range(32), lengths))
        assert spans([[[by_id[int(i)] for i in order[j : j + 8]] for j in range(0, 32, 8)]])
    assert status == {"policy_loss": 2.0, "actor_lr": 3.0}  # the epochs' mean; the last learning rate
    again, _ = _fit(RecipePolicyModelActor, split_experience_batch(first), args, monkeypatch)
    assert again == ours  # seeded


class _Strategy:
    """What OpenRLHF's ppo_train and replay buffer use of DeepspeedStrategy, on a one-rank gloo group: its own
    all_reduce (world size 1), the dp mesh group, rank 0, no ring attention."""

    world_size, ring_attn_group, accumulated_gradient = 1, None, 1

    def __init__(self, args):
        import torch.distributed as dist
        from openrlhf.utils.deepspeed.deepspeed import DeepspeedStrategy

        self.args, self.ds_device_mesh = args, {"dp": NS(get_group=lambda: dist.group.WORLD)}
        self.all_reduce = DeepspeedStrategy.all_reduce.__get__(self)

    def is_rank_0(self):
        return True


@pytest.fixture
def one_rank_group(tmp_path):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def _real_ppo_train_fit(actor_class, samples, monkeypatch, epochs=3):
    """`actor_class.fit` over OpenRLHF's own ActorPPOTrainer.ppo_train (DataLoader, setup_dynamic_batch, status
    merge) and a real replay buffer; only training_step is a recorder (no model on CPU). Returns the micro-batches
    (epoch, step, sample ids, optimizer step?, the loss's token normaliser) and the status."""
    from openrlhf.trainer.ppo_utils.replay_buffer import NaiveReplayBuffer
    from openrlhf.trainer.ray.ppo_actor import ActorPPOTrainer
    from openrlhf.utils.loss_utils import get_loss_batch_info

    args = _args(1, 8)
    vars(args.train).update(dynamic_batch_enable=True, seed=3, max_tokens_per_gpu=400)
    args.rollout = NS(batch_size=8, n_samples_per_prompt=4)  # 32 samples: 4 optimizer steps of 8
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)  # the buffer names its (unused) target device
    buffer = NaiveReplayBuffer(1, 0, False, True, True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: "cpu")
    for name in ("empty_cache", "synchronize"):
        monkeypatch.setattr(torch.cuda, name, lambda: None)
    trainer = object.__new__(ActorPPOTrainer)
    trainer.args, trainer.strategy, trainer.max_epochs = args, _Strategy(args), epochs
    trainer.replay_buffer, trainer.dataloader_pin_memory = buffer, False
    buffer.items.extend(samples)
    seen, optimizer_steps = [], [0]

    def training_step(experience, kl_ctl, step, loss_batch_info=None):
        info = get_loss_batch_info(
            trainer.strategy, experience.action_mask, replay_buffer=buffer, step=step, dynamic_batch=True
        )
        sample = torch.tensor([float(i) for i in experience.info["sample"]])  # a list of 0-d tensors after collate
        ids = [int(i) for i in sample]
        optimizer_steps[0] += buffer.dynamic_optimizer_step[step]
        seen.append((step, ids, buffer.dynamic_optimizer_step[step], float(info["batch_num_tokens"])))
        tokens = experience.action_mask.sum(-1).float()
        return {  # a token-additive loss (Σ id·tokens / Σ tokens) and the optimizer-step count as the "lr"
            "metrics": {"policy_loss": (sample * tokens).sum() / tokens.sum(), "actor_lr": float(optimizer_steps[0])},
            "weights": {"policy_loss": "token", "actor_lr": None},
            "num_samples": float(len(ids)),
            "num_action_tokens": float(tokens.sum()),
        }

    trainer.training_step = training_step
    actor = object.__new__(actor_class)
    actor.strategy, actor.actor, actor.trainer = trainer.strategy, NS(train=lambda: None), trainer
    status = actor.fit(0.0)
    assert trainer.max_epochs == epochs and "ppo_train" not in vars(trainer) and not buffer.items
    return seen, status


def _steps(seen):
    """The micro-batches grouped into optimizer steps: (sample ids, the loss's token normaliser of the step)."""
    steps, current = [], []
    for _step, ids, is_optimizer_step, norm in seen:
        current += ids
        if is_optimizer_step:
            steps.append((current, norm))
            current = []
    assert not current
    return steps


def test_openrlhfs_own_ppo_train_cuts_each_epochs_new_deal_with_upstreams_steps_loss_norm_and_status(
    one_rank_group, monkeypatch
):
    """The policy actor's epochs through OpenRLHF's real ppo_train: as many optimizer (hence lr-scheduler) steps as
    upstream, each epoch's steps cut from its own deal by setup_dynamic_batch (each step's loss normaliser is its own
    samples' tokens), every step spanning the lengths, and the logged status equal to upstream's."""
    from openrlhf.trainer.ray.ppo_actor import PolicyModelActor

    from lead_recipes.training.step_order import RecipePolicyModelActor

    lengths = [20 + (37 * i) % 200 for i in range(32)]
    args = _args(1, 8)
    (first,) = balanced_then_shuffled(_samples(lengths), args, seed=7)  # the trainer's deal: epoch 1
    runs = {
        name: _real_ppo_train_fit(cls, split_experience_batch(first), monkeypatch)
        for name, cls in (("upstream", PolicyModelActor.__ray_actor_class__), ("ours", RecipePolicyModelActor))
    }
    for name, (seen, _) in runs.items():
        steps = _steps(seen)
        assert len(steps) == 3 * 4, name  # 3 epochs x 4 optimizer steps: the lr schedule's count
        for ids, norm in steps:  # the loss normaliser is the step's own action tokens
            assert norm == sum(lengths[i] - 1 for i in ids), name
        epochs = [sorted(i for ids, _ in steps[e * 4 : e * 4 + 4] for i in ids) for e in range(3)]
        assert epochs == [list(range(32))] * 3, name
    upstream, ours = (_steps(runs[k][0]) for k in ("upstream", "ours"))
    assert upstream[:4] == upstream[4:8] == upstream[8:] and ours[:4] == upstream[:4]  # as read / the first deal
    assert ours[:4] != ours[4:8] != ours[8:] != ours[:4]
    assert spans([[[lengths[i] for i in ids] for ids, _ in ours[e * 4 : e * 4 + 4]] for e in range(3)])
    (up_status, our_status) = (runs[k][1] for k in ("upstream", "ours"))
    assert our_status.keys() == up_status.keys() and our_status["actor_lr"] == up_status["actor_lr"] == 12.0
    assert our_status["policy_loss"] == pytest.approx(up_status["policy_loss"], rel=1e-6)


def test_training_runs_the_policy_actor_that_deals_each_epoch(monkeypatch):
    import runpy
    import sys

    from lead_recipes.methods.config import RecipeConfig
    from lead_recipes.training import openrlhf_plugin as plugin
    from lead_recipes.training.step_order import RecipePolicyModelActorRemote

    seen = {}
    monkeypatch.setattr(
        runpy,
        "run_module",
        lambda *a, **k: seen.update(cls=sys.modules["openrlhf.trainer.ray.ppo_actor"].PolicyModelActor),
    )
    plugin.run_openrlhf([], RecipeConfig(method="lead"))
    assert seen["cls"] is RecipePolicyModelActorRemote
    from openrlhf.trainer.ray.ppo_actor import PolicyModelActor

    assert PolicyModelActor is not RecipePolicyModelActorRemote  # restored after the run


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_trainers_optimizer_steps_each_span_the_lengths(ray_local, tiny_qwen2, prompt_file, tmp_path):
    """The real PPOTrainer.train_step with --train.dynamic_batch_enable: what it appends to the actor (the replay
    buffer's input) cut into the optimizer steps of --train.batch_size 8 (4 per rollout of 32 samples)."""
    from support.trainer import recording_trainer

    trainer, calls = recording_trainer(
        tiny_qwen2,
        prompt_file,
        tmp_path / "ckpt",
        healthy=16,
        extra=[
            "--train.dynamic_batch_enable",
            "--train.batch_size",
            "8",
            "--train.max_tokens_per_gpu",
            "4096",
            "--vllm.num_engines",
            "1",
        ],
    )
    appended = []
    trainer.actor_model_group.async_run_method_batch = lambda **kw: appended.append(kw["experience"]) or []
    trainer.fit()
    assert len(calls["ppo_train"]) == 4 and len(appended) == 4
    for rollout in appended:
        assert spans(optimizer_steps(rollout, 8))
