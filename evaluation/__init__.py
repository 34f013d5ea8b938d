"""Benchmark evaluation (AIME24/25, AMC23, MATH-500, OlympiadBench). Never imports ray, deepspeed or openrlhf.
See docs/evaluation.md."""
