"""Recipes (YAML) and the code that renders them to `lead-recipes train` commands: local, Ray job, Slurm."""
