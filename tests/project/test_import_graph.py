"""The import graph of lead_recipes/ and evaluation/ has no cycles: not between modules, not between the package's
folders, and evaluation depends on lead_recipes, never the reverse; grading's stages (extraction, equivalence, pool)
import only earlier stages, and grading never imports the reward side. Imports inside functions count (a lazy import
is still a dependency). Read from the source with `ast`; nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("lead_recipes", "evaluation")


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules `name` imports (a `from pkg import mod` counts as importing pkg.mod)."""
    is_pkg = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_pkg else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names}
    return {m for m in found if m in modules and m != name}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan), each sorted."""
    index, low, stack, on_stack, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _folder(module: str) -> str:
    """lead_recipes.grading.pool.grader -> lead_recipes.grading; lead_recipes.data -> lead_recipes.data (a top
    module)."""
    parts = module.split(".")
    return ".".join(parts[:2])


def test_no_two_modules_import_each_other_even_through_others():
    assert _cycles(_graph()) == []


def test_no_two_folders_of_the_package_import_each_other():
    folders: dict[str, set[str]] = {}
    for src, targets in _graph().items():
        folders.setdefault(_folder(src), set()).update(_folder(t) for t in targets if _folder(t) != _folder(src))
    assert _cycles(folders) == []


STAGES = ("extraction", "equivalence", "pool")  # grading's stages in order: each reads only the ones before it


def _stage_offenders(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(module, import) pairs where a grading stage imports a later stage, or grading imports lead_recipes.reward."""

    def stage(module: str) -> int | None:
        parts = module.split(".")
        return (
            STAGES.index(parts[2])
            if parts[:2] == ["lead_recipes", "grading"] and parts[2:3] and parts[2] in STAGES
            else None
        )

    out = []
    for src, targets in graph.items():
        for t in targets:
            later = stage(src) is not None and stage(t) is not None and stage(t) > stage(src)
            upward = src.startswith("lead_recipes.grading") and t.startswith("lead_recipes.reward")
            if later or upward:
                out.append((src, t))
    return sorted(out)


def test_each_grading_stage_imports_only_earlier_stages_and_grading_never_the_reward_side():
    assert _stage_offenders(_graph()) == []


def test_the_stage_check_names_an_import_of_a_later_stage():
    graph = {"lead_recipes.grading.extraction.a": {"lead_recipes.grading.pool.b"}, "lead_recipes.grading.pool.b": set()}
    assert _stage_offenders(graph) == [("lead_recipes.grading.extraction.a", "lead_recipes.grading.pool.b")]


def test_the_package_never_imports_evaluation():
    offenders = {
        src: sorted(t for t in targets if t.split(".")[0] == "evaluation")
        for src, targets in _graph().items()
        if src.split(".")[0] == "lead_recipes"
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_cycle_finder_finds_a_cycle_through_a_third_module():
    # the checker itself must be able to fail: a → b → c → a is one cycle, d hangs off it
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
