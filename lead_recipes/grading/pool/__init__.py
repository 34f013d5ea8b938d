"""Running the grader: math-verify in worker processes with hard timeouts. `grader` is the API (`Grader`, `Grade`,
`get_grader`) and the parent side of a spawned pool with re-runs and a heavy lane; `worker` is what runs inside the
workers (math-verify under a soft timeout). See docs/grading.md#how-an-answer-is-graded.
"""
