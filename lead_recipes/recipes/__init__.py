"""YAML recipes: loading, checking and launching the files of launchers/recipes/. `recipe` loads and renders them
into `lead-recipes train` flags, `layout` checks a recipe's GPU layout against OpenRLHF's, `launch` runs or submits
them (local, Ray job, Slurm) and `chain` orders recipes that build on each other (SFT → stage 1 → stage 2)."""


class RecipeError(ValueError):
    """A recipe is invalid; the message names the offending key and the file."""
