"""Length-efficient math-reasoning RL (LEAD, GRPO-LEAD, Leash and baselines) on OpenRLHF 0.11.2.

Importing this package imports nothing heavy: grading, methods, the OpenRLHF plug-in and the reward server are
separate modules.
See README.md.
"""

__version__ = "0.1.0"
