"""Grading: from a model's response to a verdict and a reward. `grader` is the API (math-verify in a pool of
worker processes); `reward_func` and `remote_reward` are the files OpenRLHF loads as its reward function, `server` is
`lead-recipes serve` and `cli` is `lead-recipes grade`. Nothing here imports torch or OpenRLHF. See docs/grading.md.
"""
