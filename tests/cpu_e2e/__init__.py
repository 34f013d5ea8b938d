"""CPU end-to-end harness (tests only): the real `lead-recipes train` on a CPU machine with fake Ray GPUs.
See docs/e2e.md."""
