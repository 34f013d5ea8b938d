"""The source of every value a recipe sets, read from the comments of its file, and the docs rendered from the recipe
files: the per-recipe sections of docs/recipes.md and the recipe table of docs/launch.md (generated blocks, rewritten
by `python docs/generate.py`). The comment rules and the allowed sources:
docs/recipes.md#conventions.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from lead_recipes.methods.config import DEFAULT_METHOD
from lead_recipes.recipes.recipe import RECIPES_DIR, RESOURCE_DEFAULTS, RESOURCES, read_raw, recipe_names

SECTIONS = {"resources": "resources.", "openrlhf": "", "recipe": "recipe."}
SOURCE_FORM = re.compile(r"arXiv \d{4}\.\d{5}|authors' code|^ours: \S")
_KEY_LINE = re.compile(r"^  ([\w.]+):(.*)$")
_INHERITED = re.compile(r"^inherited ([\w.]+): (.+)$")


@dataclass
class Provenance:
    """One recipe file: its header comment, and the source of each value it sets or names as inherited."""

    header: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)  # flat key ("recipe.lead.l_min") -> source
    inherited: dict[str, str] = field(default_factory=dict)  # flat key of a base recipe's value -> source
    unused: list[str] = field(default_factory=list)  # comments among the values that are no value's source


def _split_comment(text: str) -> tuple[str, str | None]:
    """("value", "comment") of the text after a key's colon; a '#' inside quotes is part of the value."""
    quote = None
    for i, char in enumerate(text):
        if quote:
            quote = None if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char == "#" and (i == 0 or text[i - 1].isspace()):
            return text[:i].strip(), text[i + 1 :].strip()
    return text.strip(), None


def read(path: Path) -> Provenance:
    """A value's source is its trailing comment (continued by deeper-indented comment lines below it), or else the
    comment lines at the keys' indent above it, over consecutive values that have no comment of their own."""
    out, section, block, used, in_run, last_key = Provenance(), None, [], False, False, None
    lines = path.read_text().splitlines()
    for line in lines[: next((i for i, l in enumerate(lines) if not l.startswith("#")), len(lines))]:
        out.header.append(line[1:].strip())

    def end_block() -> None:
        nonlocal block, used, in_run
        if block and not used:
            out.unused.append(" ".join(block))
        block, used, in_run = [], False, False

    for line in lines[len(out.header) :]:
        stripped = line.strip()
        inherited = _INHERITED.match(stripped.lstrip("#").strip()) if stripped.startswith("#") else None
        if inherited:
            out.inherited[inherited.group(1)] = inherited.group(2)
            continue
        if not line.startswith((" ", "#")) and stripped:
            end_block()
            section, last_key = line.split(":")[0], None
        if section not in SECTIONS or not line.startswith(" ") and stripped:
            continue
        prefix = SECTIONS[section]
        if not stripped:
            end_block()
            last_key = None
        elif stripped.startswith("#"):
            text = stripped[1:].strip()
            if last_key and len(line) - len(line.lstrip()) > 2:
                out.sources[last_key] += " " + text
                continue
            last_key = None
            if in_run:
                end_block()
            block.append(text)
        elif _KEY_LINE.match(line):
            key, rest = _KEY_LINE.match(line).groups()
            comment = _split_comment(rest)[1]
            if comment:
                end_block()
                out.sources[prefix + key] = comment
            elif block:
                out.sources[prefix + key], used = " ".join(block), True
            in_run, last_key = True, (prefix + key if comment else None)
    end_block()
    return out


def own_values(name: str) -> dict:
    raw = yaml.safe_load((RECIPES_DIR / f"{name}.yaml").read_text()) or {}
    return {prefix + k: v for section, prefix in SECTIONS.items() for k, v in (raw.get(section) or {}).items()}


def merged_values(name: str) -> dict:
    raw = read_raw(RECIPES_DIR / f"{name}.yaml")
    return {prefix + k: v for section, prefix in SECTIONS.items() for k, v in (raw.get(section) or {}).items()}


def _cell(value) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _escape(source: str) -> str:
    return source.replace("|", "\\|")


def _prose(header: list[str]) -> str:
    paragraphs, current = [], []
    for text in header + [""]:
        if text:
            current.append(text)
        elif current:
            paragraphs.append(" ".join(current))
            current = []
    return "\n\n".join(paragraphs)


def section(name: str) -> str:
    """The docs section of one recipe: its header, its data command and one row per value it sets."""
    raw = yaml.safe_load((RECIPES_DIR / f"{name}.yaml").read_text())
    prov, merged = read(RECIPES_DIR / f"{name}.yaml"), merged_values(name)
    intro = f"[`launchers/recipes/{name}.yaml`](../launchers/recipes/{name}.yaml)"
    if raw.get("extends"):
        intro += f", extends [`{raw['extends']}`](#{raw['extends']}) (its values and sources where none is listed)"
    parts = [f'<a id="{name}"></a>', f"## {name}", f"{intro}: {_prose(prov.header)}"]
    data = raw.get("data") or {}
    if data.get("prepare"):
        parts.append(
            f"`data.prepare`: `lead-recipes data {' '.join(str(a) for a in data['prepare'])}`"
            + (f" ({data['notes'].strip()})" if data.get("notes") else "")
        )
    if data.get("prepare_eval"):
        parts.append(f"`data.prepare_eval`: `lead-recipes data {' '.join(str(a) for a in data['prepare_eval'])}`")
    rows = ["| hyperparameter | value | source |", "|---|---|---|"]
    for key, value in own_values(name).items():
        rows.append(f"| `{key}` | `{_cell(value)}` | {_escape(prov.sources.get(key, ''))} |")
    for key, source in prov.inherited.items():
        rows.append(f"| `{key}` | `{_cell(merged.get(key))}` | {_escape(source)} (inherited from `{raw['extends']}`) |")
    parts.append("\n".join(rows))
    return "\n\n".join(p for p in parts if p)


def sections() -> str:
    """The generated part of docs/recipes.md: one section per recipe, base recipes first."""
    return "\n\n".join(section(n) for n in _ordered())


def recipe_table() -> str:
    """The generated table of docs/launch.md: per recipe its method, model, prompt data, cap, layout, description."""
    rows = ["| recipe | method | model | prompt data | max new tokens | nodes × GPUs | description |", "|" + "---|" * 7]
    for name in _ordered():
        raw, v = read_raw(RECIPES_DIR / f"{name}.yaml"), merged_values(name)
        res = {**RESOURCE_DEFAULTS, **(raw.get("resources") or {})}
        sft = raw.get("entrypoint") == "sft"
        data = v.get("data.dataset" if sft else "data.prompt_dataset")
        rows_used = f", first {v['data.max_samples']:,} rows" if v.get("data.max_samples") else ""
        cells = [
            f"[`{name}`](recipes.md#{name})",
            "OpenRLHF `train_sft`" if sft else f"`{v.get('recipe.method', DEFAULT_METHOD)}`",
            f"`{v.get('model.model_name_or_path' if sft else 'actor.model_name_or_path')}`",
            f"`{data}`{rows_used}",
            f"(max_len {v.get('data.max_len')})" if sft else str(v.get("rollout.max_new_tokens")),
            f"{res['nodes']}×{res['gpus_per_node']}",
            _escape(str(raw.get("description", ""))),
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def resources_table() -> str:
    """The generated table of docs/slurm.md: each `resources:` key, the launch flag that overrides it, its default."""
    from lead_recipes.help_format import option_strings
    from lead_recipes.recipes.launch import build_parser

    flags = option_strings(build_parser())
    rows = ["| `resources.` key | launch flag | default | what it does |", "|---|---|---|---|"]
    for key, (_, default, what) in RESOURCES.items():
        flag = f"`--slurm.{key}`" if f"--slurm.{key}" in flags else ""
        shown = "unset" if default is None else f"`{json.dumps(default) if isinstance(default, bool) else default}`"
        rows.append(f"| `{key}` | {flag} | {shown} | {_escape(what)} |")
    return "\n".join(rows)


def _ordered() -> list[str]:
    """Base recipes before the recipes that extend them, otherwise by name."""
    names, done = recipe_names(), []
    bases = {n: (yaml.safe_load((RECIPES_DIR / f"{n}.yaml").read_text()) or {}).get("extends") for n in names}

    def visit(name: str) -> None:
        if name not in done:
            if bases[name] in bases:
                visit(bases[name])
            done.append(name)

    for name in names:
        visit(name)
    return done
