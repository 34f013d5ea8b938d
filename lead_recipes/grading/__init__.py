"""Grading: from a model's response to a verdict and a reward.

`answers` and `statement` extract the final answer (the `boxed` and `fallback` policies), `forms` aligns answer
forms a careful human grader accepts, `grader` runs math-verify in a pool of worker processes (`worker`) with a hard
per-answer timeout, `repetition` detects repetitive responses; `reward_func` is the file OpenRLHF loads as its
reward function, `server` the remote reward server (`lead-recipes serve`), `remote_reward` the reward-function file
that forwards to such servers, and `cli` is `lead-recipes grade`. Nothing here imports torch or OpenRLHF.
"""
