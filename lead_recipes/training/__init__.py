"""Training on OpenRLHF: `lead-recipes train` (`cli`, with `args` for recipe overlays and `preflight` for the checks
before a job starts), the plug-in into OpenRLHF's trainer (`openrlhf_plugin` and `grading_gate`, the only modules
that import OpenRLHF internals), per-step statistics and records (`step_stats`), checkpoint-on-request for preemption
(`preemption`), the skip and stop on failed grading (`grading_gate`, `guard`) and the environment forwarded to Ray actors (`actor_env`)."""
