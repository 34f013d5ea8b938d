"""Running the grader: `grader` is the API (`Grader`, `Grade`, `get_grader`) and the parent side of a spawned pool
with hard timeouts, re-runs and a heavy lane; `worker` is what runs inside the workers (math-verify under a soft
timeout). See docs/grading.md#how-an-answer-is-graded.
"""
