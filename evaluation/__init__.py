"""`lead-recipes eval`: benchmark evaluation with vLLM, an OpenAI-compatible server or saved generations. The
benchmarks are AIME24/25, AMC23, MATH-500 and OlympiadBench. Never imports ray, deepspeed or openrlhf.
See docs/evaluation.md."""
