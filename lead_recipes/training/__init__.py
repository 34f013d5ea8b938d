"""Training on OpenRLHF: `lead-recipes train` and the plug-in into OpenRLHF's trainer. Here are the command (cli,
args, preflight), the plug-in (openrlhf_plugin and grading_gate, the only OpenRLHF importers), step statistics,
checkpoints and resume, checkpoint on request, the grading guard and the environment of the Ray actors. See
docs/training.md.
"""
