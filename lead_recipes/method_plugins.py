"""Methods registered from outside the package: each installed distribution's entry point in the group
`lead_recipes.methods` names a `MethodEntry`, which `methods.config.REGISTRY` appends to ours at import, in every
process (so a Ray worker, importing the same installed packages, builds the same `RecipeConfig` and unpickles it).
See CONTRIBUTING.md#a-method-outside-the-package.
"""

from __future__ import annotations

from importlib.metadata import entry_points

GROUP = "lead_recipes.methods"


class PluginError(RuntimeError):
    """An installed method entry point that cannot be registered; the message names it and its distribution."""


def installed_methods(taken: tuple[str, ...]) -> tuple:
    """The `MethodEntry` of every entry point in GROUP, sorted by name; `taken`: the names already registered."""
    from lead_recipes.methods.config import RESERVED_SECTIONS, MethodEntry  # defined before REGISTRY, which calls this

    found = []
    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        dist = f"{ep.dist.name} {ep.dist.version}" if getattr(ep, "dist", None) is not None else "unknown"
        where = f"entry point {ep.name!r} = {ep.value!r} of group {GROUP!r} (distribution {dist})"
        try:
            obj = ep.load()
        except Exception as exc:  # any failure of the plugin's import, re-raised naming its source
            raise PluginError(f"{where}: cannot load it ({type(exc).__name__}: {exc}); fix or uninstall it") from exc
        if not isinstance(obj, MethodEntry):
            raise PluginError(
                f"{where}: names a {type(obj).__name__}, not a lead_recipes.methods.config.MethodEntry; point it at "
                'one, e.g. ENTRY = MethodEntry("my-method", "my_pkg.method:MyMethod", MyConfig, "lead-1.5b")'
            )
        sections = {n.replace("-", "_") for n in (*taken, *(e.name for e in found))}
        if obj.section in sections:  # the name, or the flag section --recipe.<name with - → _>.* it gives
            raise PluginError(f"{where}: the method name {obj.name!r} (flags --recipe.{obj.section}.*) is taken")
        if obj.section in RESERVED_SECTIONS:
            raise PluginError(
                f"{where}: the method name {obj.name!r} is reserved (--recipe.{obj.section} is a flag or a section "
                f"of every method; reserved: {', '.join(RESERVED_SECTIONS)}); rename the method"
            )
        found.append(obj)
    return tuple(found)
