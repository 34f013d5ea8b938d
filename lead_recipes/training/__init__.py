"""Training on OpenRLHF: `lead-recipes train` (cli, args, preflight), the plug-in into OpenRLHF's trainer
(openrlhf_plugin and grading_gate, the only OpenRLHF importers), step statistics, checkpoints and resume, checkpoint
on request, the grading guard and the environment of the Ray actors. See docs/training.md.
"""
