"""Helpers the test areas and benchmarks/ share (not tests, not fixtures): the tiny offline model, L1 targets
for a method batch, the real two-node Slurm cluster. On sys.path through pytest's `pythonpath`."""
