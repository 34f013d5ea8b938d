"""AdaptThink in OpenRLHF's whole loop on CPU (deselected by default, `pytest -m e2e_full`; docs/e2e.md): 2 steps and
a resume with the package's executor. Training rollouts start with the forced token, round(G·ρ) of each group the
no-think one, and that token is in the trained action span; evaluation rollouts of the same run are not forced; the
trained advantage is the method's. The tiny tokenizer has no single-id `</think>`: the smoke driver forces 'Q' and
'X' (single ids there, never the first token of the fixture model, which answers "The answer is …")."""

from __future__ import annotations

import json

import pytest
from cpu_e2e import harness
from cpu_e2e.checks import advantage_mismatches

pytestmark = [
    pytest.mark.e2e_full,
    pytest.mark.slow,
    pytest.mark.timeout(1500),
    pytest.mark.skipif(harness.available() is not None, reason=str(harness.available())),
]
P = harness.gpu_smoke.PROFILES["cpu"]
PER_STEP, N, CAP = P["rollout_batch"] * P["n"], P["n"], P["max_new_tokens"]
EVAL_PROMPTS = (("What is 8 / 4?", "2"), ("What is 7 - 4?", "3"))  # not training prompts: told apart by text
# a reward-function file that records what it graded (prompt, response), then grades with the package's
RECORDING_REWARD = """
import json
from lead_recipes.reward.reward_func import reward_func as graded, response_text

def reward_func(queries, prompts, labels, **kwargs):
    with open({log!r}, "a") as f:
        for q, p in zip(queries, prompts):
            f.write(json.dumps({{"prompt": p, "response": response_text(q, p)}}) + "\\n")
    return graded(queries, prompts, labels, **kwargs)
"""


def test_adaptthink_forces_training_rollouts_only_and_trains_two_steps_and_resumes(cluster, model, tmp_path):
    flags = harness.gpu_smoke.adaptthink_flags(str(model), CAP)
    nothink, think = (int(flags[flags.index(f"--recipe.adaptthink.{k}_token_id") + 1]) for k in ("nothink", "think"))
    forced_text = harness.gpu_smoke.ADAPTTHINK_TOKENS
    data = tmp_path / "adaptthink-prompts.jsonl"  # the smoke prompts, each label with its ref_acc
    harness.gpu_smoke.write_data(str(data), "cpu", "adaptthink")
    ref = {json.loads(line)["prompt"]: json.loads(line)["label"]["ref_acc"] for line in open(data)}
    with open(tmp_path / "eval.jsonl", "w") as f:
        f.writelines(json.dumps({"prompt": q, "label": {"answer": a, "ref_acc": 0.5}}) + "\n" for q, a in EVAL_PROMPTS)
    graded = tmp_path / "graded.jsonl"
    (tmp_path / "recording_reward.py").write_text(RECORDING_REWARD.format(log=str(graded)))
    extra = [
        *("--data.prompt_dataset", str(data), "--reward.remote_url", str(tmp_path / "recording_reward.py")),
        *("--eval.dataset", str(tmp_path / "eval.jsonl"), "--eval.steps", "1", "--eval.n_samples_per_prompt", "2"),
    ]
    argv = ["--recipe.method", "adaptthink", *flags]
    run = harness.Run(cluster, model, tmp_path / "adaptthink", "adaptthink", episodes=1, extra=extra)
    assert run.wait() == 0, run.tail()
    trained = run.trained_rows()
    assert len(trained) == 2 * PER_STEP
    groups: dict[tuple[int, str], list[dict]] = {}
    for k, r in enumerate(trained):
        groups.setdefault((k // PER_STEP, r["prompt"]), []).append(r)
    share = round(N * harness.gpu_smoke.ADAPTTHINK_RHO)
    for rs in groups.values():  # the forced token is the first trained token: round(G·ρ) no-think per group
        firsts = sorted(r["response_ids"][0] for r in rs)
        assert firsts == sorted([nothink] * share + [think] * (N - share)), [r["response_ids"][:3] for r in rs]
        assert all((r["response_ids"][0] == nothink) == (r["info"]["nothink"] > 0.5) for r in rs)
        (question,) = [q for q in ref if q in rs[0]["prompt"]]
        assert all(r["info"]["ref_acc"] == ref[question] for r in rs)
    assert all(len(r["response_ids"]) <= CAP // 2 for r in trained if r["info"]["nothink"] > 0.5)
    assert advantage_mismatches(run, argv, 1, N, CAP, PER_STEP) == []
    # the rollouts graded (chat-templated prompts; the preflight's probe of the reward file is not one)
    seen = [s for s in map(json.loads, open(graded)) if s["prompt"].startswith("<|im_start|>")]
    evals = [s for s in seen if any(q in s["prompt"] for q, _ in EVAL_PROMPTS)]
    assert len(evals) == 2 * len(EVAL_PROMPTS) * 2  # an evaluation pass after each of the 2 steps
    assert not [s["response"][:8] for s in evals if s["response"].startswith(forced_text)]  # never forced
    trains = [s for s in seen if s not in evals]
    assert len(trains) == 2 * PER_STEP and all(s["response"].startswith(forced_text) for s in trains)

    resumed = harness.Run(
        cluster, model, run.dir, "adaptthink", episodes=2, extra=["--ckpt.load_enable", *extra], log_name="resume.log"
    )
    assert resumed.wait() == 0, resumed.tail()
    assert "restored adaptthink state at global_step 2" in resumed.text()
    assert advantage_mismatches(resumed, argv, 3, N, CAP, PER_STEP) == []
