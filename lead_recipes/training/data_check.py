"""The preflight's data check: each `--data.prompt_dataset` / `--eval.dataset` item read as OpenRLHF's
`blending_datasets` reads it (a local .json/.jsonl/.csv/.parquet/.arrow file, a `save_to_disk` directory or a
directory of data files, through `datasets`), its input and label columns present and every label gradable. A dataset
script is not run and a hub id is not fetched: the check says so. See docs/training.md (preflight).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from lead_recipes.grading.labels import label_problem
from lead_recipes.methods.baseline_config import ref_acc_ok
from lead_recipes.methods.config import METHODS, entry

LOCAL_FILES = (".json", ".jsonl", ".csv", ".parquet", ".arrow")  # blending_datasets' data_files branch


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


def load_local(item: str, split: str | None):
    """The `datasets.Dataset` blending_datasets loads for one item (`path[@data_dir]`) that exists locally; None for
    a dataset script, which the preflight does not run. Raises what `datasets` raises, or ValueError for a missing
    split."""
    import datasets

    path, _, data_dir = (part.strip() for part in item.partition("@"))
    ext, base = os.path.splitext(path)[-1], os.path.basename(path)
    if ext == ".py" or (os.path.isdir(path) and os.path.exists(os.path.join(path, f"{base}.py"))):
        return None
    if ext in LOCAL_FILES:
        data = datasets.load_dataset("json" if ext == ".jsonl" else ext[1:], data_files=path)
    else:
        try:
            data = datasets.load_from_disk(path)
        except Exception:  # noqa: BLE001 - not a save_to_disk directory: blending_datasets then loads its files
            data = datasets.load_dataset(path, data_dir=data_dir or None)
    if split and not isinstance(data, datasets.Dataset) and split in data:
        data = data[split]
    if not isinstance(data, datasets.Dataset):
        raise ValueError(f"no split {split!r} (it has {', '.join(data)})")
    return data


def label_problems(labels, label_key: str, method: str | None = None) -> str | None:
    """One line about the ungradable labels (an object without its gold answer would grade `error` on every sample
    and stop the run at the grading guard, hours in), or about labels without what `method` reads from every one
    (L1's n_gold: the method stops the run at its first step; AdaptThink's ref_acc, a number in [0, 1]: at the
    step that samples the label, maybe days in), or None."""
    keys = entry(method).label_keys if method in METHODS else ()

    def problem(label) -> str | None:
        missing = [k for k in keys if not (isinstance(label, dict) and k in label)]
        if missing:
            return f"--recipe.method {method} reads {', '.join(missing)} from every label, and this one has none " + (
                "(`lead-recipes data build --l1.mode exact|max` writes the L1 target)"
                if "n_gold" in missing
                else "(add each prompt's reference accuracy: docs/methods.md#adaptthink-outside-the-advantage-step)"
            )
        if "ref_acc" in keys and not ref_acc_ok(label["ref_acc"]):
            return (
                f"--recipe.method {method} reads ref_acc, the reference model's accuracy, a number in [0, 1], from "
                f"every label, and this one has {label['ref_acc']!r}"
            )
        return label_problem(label)

    bad = [(n, why) for n, why in enumerate(map(problem, labels), 1) if why]
    if not bad:
        return None
    return f"{len(bad)} row(s) with an ungradable --data.label_key {label_key!r}; row {bad[0][0]}: {bad[0][1]}"


def check_data(
    flag: str, spec: str | None, input_key: str, label_key: str | None, split: str | None, method: str | None = None
) -> Check:
    if not spec:
        return Check(flag, True, "not set")
    unchecked = []
    for item in spec.split(","):
        path = item.split("@")[0].strip()
        if not os.path.exists(path):
            hint = " (build it with `lead-recipes data build ...`)" if flag == "data" else ""
            looks_local = path.startswith((".", "/", "~")) or path.endswith(LOCAL_FILES)
            what = (
                "file does not exist" if looks_local else "not a local path; a hub dataset id is not resolvable offline"
            )
            return Check(flag, False, f"{path}: {what}{hint}")
        try:
            data = load_local(item.strip(), split)
        except Exception as exc:  # noqa: BLE001 - OpenRLHF would fail on it at start-up the same way
            return Check(flag, False, f"{path}: unreadable as OpenRLHF reads it: {type(exc).__name__}: {exc}")
        if data is None:
            unchecked.append(f"{path} is a dataset script, not run here")
            continue
        absent = [k for k in (input_key, label_key) if k and k not in data.column_names]
        if absent:
            return Check(flag, False, f"{path}: no column(s) {absent} (--data.input_key/--data.label_key)")
        bad = label_problems(data[label_key], label_key, method) if label_key else None
        if bad:
            return Check(flag, False, f"{path}: {bad}")
    return Check(flag, True, spec + (f" (not checked: {'; '.join(unchecked)})" if unchecked else ""))
