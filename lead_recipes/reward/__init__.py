"""The OpenRLHF-facing side of grading: the reward function files and the reward server. `reward_func` and
`remote_reward` are the files OpenRLHF loads as its reward function (in-process, or forwarding to servers with
fail-over), `server` is `lead-recipes serve`, and `logs` the `extra_logs` keys all three return. See
docs/grading.md#the-openrlhf-reward-function---rewardremote_url-pathpy.
"""
