"""Training on OpenRLHF: `lead-recipes train` (`cli`, with `args` for recipe overlays and `preflight` for the checks
before a job starts), the plug-in into OpenRLHF's trainer (`openrlhf_plugin`, the only module that imports OpenRLHF
internals), per-step statistics and records (`step_stats`), checkpoint-on-request for preemption (`preemption`), the
stop on failed grading (`guard`) and the environment forwarded to Ray actors (`actor_env`)."""
