"""Grading: from a model's response to a verdict, in three stages. `extraction` reads the final answer (boxes,
answer statements, number and bracket syntax); `equivalence` decides whether it equals the gold (answer forms,
units, precision); `pool` runs math-verify in worker processes with hard timeouts (`Grader`, `get_grader`).
`options` declares the `--grade.*` options every command shares, `labels` reads the gold from a training label,
`repetition` is GRPO-LEAD's repetition detector and `cli` is `lead-recipes grade`. No torch or OpenRLHF here; the
OpenRLHF-facing side is `lead_recipes.reward`. See docs/grading.md.
"""
