"""Benchmark loading (AIME 2024, AIME 2025, AMC 2023, MATH-500, OlympiadBench) from a directory of `<name>.jsonl`
files (by default $LEAD_RECIPES_BENCHMARKS_DIR or ./data/benchmarks), a single JSONL file (`name=path`) or a Hugging
Face hub dataset, with the expected counts checked for the five named benchmarks. It does not build prompts,
generate or grade. See docs/evaluation.md#benchmarks.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from lead_recipes.jsonl import read_jsonl as read_jsonl_file  # also used by evaluation.backends

BENCHMARKS_DIR_ENV = "LEAD_RECIPES_BENCHMARKS_DIR"
LOCAL_BENCHMARKS_DIR = os.path.join("data", "benchmarks")  # beside ./data/sources, which `lead-recipes data` reads
EXPECTED_COUNTS = {"aime2024": 30, "aime2025": 30, "amc2023": 40, "math500": 500, "olympiadbench": 675}
BENCHMARKS = tuple(EXPECTED_COUNTS)
_MATH_DOLLAR = re.compile(r"(?<!\\)\$")

# Known hub copies with their field names ("hf:" sources). Users can pass any other with an explicit mapping.
HUB_DEFAULTS = {
    "aime2024": ("HuggingFaceH4/aime_2024", "train", {"id": "id", "problem": "problem", "answer": "answer"}),
    "aime2025": ("yentinglin/aime_2025", "train", {"id": "id", "problem": "problem", "answer": "answer"}),
    "amc2023": ("math-ai/amc23", "test", {"id": "id", "problem": "question", "answer": "answer"}),
    "math500": ("HuggingFaceH4/MATH-500", "test", {"id": "unique_id", "problem": "problem", "answer": "answer"}),
    "olympiadbench": (
        "Hothan/OlympiadBench",
        "train",
        {"id": "id", "problem": "question", "answer": "final_answer"},
        "OE_TO_maths_en_COMP",
    ),
}


class HubUnavailableError(FileNotFoundError):
    """A hub benchmark that cannot be fetched (offline): the message names the local-directory option. A
    FileNotFoundError, so every CLI that reports missing benchmark files reports this one as one line."""


@dataclass(frozen=True)
class Problem:
    """One benchmark problem: stable string id (unique within its benchmark), problem text and gold answer."""

    benchmark: str
    id: str
    problem: str
    answer: str


def _normalize_answer(value) -> str:
    """Gold answers arrive as strings, numbers or lists (OlympiadBench `final_answer`); join lists with ", "
    and drop math-mode `$` delimiters as PROVENANCE.md does for the shared copy. An escaped `\\$` (MATH's
    "\\$36") is currency and stays."""
    if isinstance(value, (list, tuple)):
        value = ", ".join(str(v) for v in value)
    return _MATH_DOLLAR.sub("", str(value)).strip()


def _rows_to_problems(name: str, rows, mapping: dict, origin: str) -> list[Problem]:
    problems, seen = [], set()
    for i, row in enumerate(rows):
        try:
            pid = str(row[mapping["id"]]) if mapping.get("id") in row else str(i)
            text, answer = str(row[mapping["problem"]]), _normalize_answer(row[mapping["answer"]])
        except KeyError as e:
            raise ValueError(f"{origin}: row {i} lacks field {e} (mapping {mapping})") from None
        if not text.strip() or not answer:
            raise ValueError(f"{origin}: row {i} (id {pid!r}) has an empty problem or answer")
        if pid in seen:
            raise ValueError(f"{origin}: duplicate id {pid!r}")
        seen.add(pid)
        problems.append(Problem(name, pid, text, answer))
    return problems


def parse_spec(spec: str) -> tuple[str, str | None]:
    """`name` or `name=path-or-hf:dataset` → (name, source or None)."""
    name, _, source = spec.partition("=")
    if not name or any(c in name for c in "/\\ "):
        raise ValueError(f"invalid benchmark name {name!r} in {spec!r}")
    return name, (source or None)


def load_benchmark(
    spec: str, data_dir: str | Path | None = None, limit: int | None = None, field_map: dict | None = None
) -> list[Problem]:
    """Load one benchmark. `spec` is a name (`math500`: read `<data_dir>/math500.jsonl`; with no data_dir, the hub
    default above), `name=/path/file.jsonl` (custom set) or `name=hf:owner/dataset[:split[:config]]` (hub, with
    `field_map` {"id","problem","answer"} → column names, defaulting to the known mapping; `:config` selects a
    dataset configuration).
    Count check: the five named benchmarks must have their expected size (ValueError otherwise)."""
    name, source = parse_spec(spec)
    if source is None and name not in EXPECTED_COUNTS:
        raise ValueError(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)} (or pass name=path.jsonl)")
    mapping = {"id": "id", "problem": "problem", "answer": "answer"}
    if source is None and data_dir is not None:
        path = Path(data_dir) / f"{name}.jsonl"
        if not path.is_file():
            raise FileNotFoundError(f"benchmark file {path} not found (expected <benchmarks dir>/{name}.jsonl)")
        problems = _rows_to_problems(name, read_jsonl_file(path), mapping, str(path))
    elif source is None or source.startswith("hf:"):
        problems = _load_hub(name, source[3:] if source else None, field_map)
    else:
        path = Path(source)
        if not path.is_file():
            raise FileNotFoundError(f"benchmark file {path} not found")
        problems = _rows_to_problems(name, read_jsonl_file(path), dict(mapping, **(field_map or {})), str(path))
    expected = EXPECTED_COUNTS.get(name)
    if expected is not None and len(problems) != expected:
        raise ValueError(
            f"{name}: loaded {len(problems)} problems, expected {expected}; "
            "wrong file or subset (a different OlympiadBench split?)"
        )
    if limit is not None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        problems = problems[:limit]
    return problems


def _load_hub(name: str, dataset: str | None, field_map: dict | None) -> list[Problem]:
    """Hub loading via `datasets` (lazy import: the base install does not need it). `dataset` is
    "owner/name[:split[:config]]"; without it the HUB_DEFAULTS entry is used. The defaults were written from the
    dataset cards and are not exercised by the offline tests: check the counts error if one has moved."""
    config = None
    if dataset is None:
        if name not in HUB_DEFAULTS:
            raise ValueError(f"no hub default for {name!r}; pass {name}=hf:owner/dataset:split")
        dataset, split, mapping = HUB_DEFAULTS[name][:3]
        config = HUB_DEFAULTS[name][3] if len(HUB_DEFAULTS[name]) > 3 else None
    else:
        dataset, _, rest = dataset.partition(":")
        split, _, config = rest.partition(":")
        mapping = HUB_DEFAULTS.get(name, (None, None, {"id": "id", "problem": "problem", "answer": "answer"}))[2]
    mapping = dict(mapping, **(field_map or {}))
    try:
        import datasets  # optional dependency, only for hub sources
    except ImportError as e:
        raise ImportError("loading from the hub needs `datasets` (pip install 'lead-recipes[eval]')") from e
    offline = any(
        os.environ.get(v, "").lower() in ("1", "true", "yes", "on") for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    )
    # Unreachable, the hub client retries for ~30 s and ends in a traceback; a 3 s probe turns that into one line.
    # In offline mode the hub cache is tried instead (a cached copy still loads).
    if not offline and not _hub_reachable():
        raise HubUnavailableError(_hub_hint(name, f"the Hugging Face hub ({_hub_endpoint()}) cannot be reached"))
    try:
        ds = datasets.load_dataset(dataset, config or None, split=split or "test")
    except (ConnectionError, OSError) as e:
        reason = f"hf:{dataset} is not available offline ({type(e).__name__})"
        raise HubUnavailableError(_hub_hint(name, reason)) from None
    return _rows_to_problems(name, ds, mapping, f"hf:{dataset}:{split}:{config or ''}")


def _hub_endpoint() -> str:
    return os.environ.get("HF_ENDPOINT") or "https://huggingface.co"


def _hub_reachable(timeout_s: float = 3.0) -> bool:
    url = urlparse(_hub_endpoint())
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname, port), timeout=timeout_s).close()
        return True
    except OSError:
        return False


def _hub_hint(name: str, reason: str) -> str:
    return (
        f"{name}: {reason}; pass --data.benchmarks_dir DIR (or set {BENCHMARKS_DIR_ENV}, or use "
        f"./{LOCAL_BENCHMARKS_DIR}) for a directory holding {name}.jsonl with id, problem, answer"
    )


def default_benchmarks_dir() -> str | None:
    """The benchmark directory when --data.benchmarks_dir is not given: $LEAD_RECIPES_BENCHMARKS_DIR, else
    ./data/benchmarks when it is a directory (offline clusters keep them there), else None: the hub copies."""
    if os.environ.get(BENCHMARKS_DIR_ENV):
        return os.environ[BENCHMARKS_DIR_ENV]
    return LOCAL_BENCHMARKS_DIR if os.path.isdir(LOCAL_BENCHMARKS_DIR) else None


def load_benchmarks(specs, data_dir=None, limit=None, field_map=None) -> dict[str, list[Problem]]:
    """Load several benchmarks (in the given order); names must be unique."""
    out: dict[str, list[Problem]] = {}
    for spec in specs:
        problems = load_benchmark(spec, data_dir, limit, field_map)
        name = parse_spec(spec)[0]
        if name in out:
            raise ValueError(f"benchmark {name!r} given twice")
        out[name] = problems
    return out
