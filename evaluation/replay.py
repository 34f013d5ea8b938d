"""Replay backend: grade saved generations (JSONL, one row per sample) as if a backend had produced them. A sampling
setting is recorded only when every row carries it with one value or the user passed it as a flag, else "unknown"
(a replay never sampled); the file also gives the benchmarks and samples per problem. It does not generate, grade or
write files. See docs/evaluation.md#replay-saved-generations.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from evaluation.backends import GenRequest, Sink, count_tokens, sample_row

UNKNOWN = "unknown"
SETTINGS = (
    "temperature",
    "top_p",
    "min_p",
    "top_k",
    "max_new_tokens",
    "chat_template_enable",
    "system_prompt",
    "prompt_template_name",
    "prompt_template",
    "l1_budget",
    "l1_mode",
)
# GenConfig fields a replay can only know from the file or a flag; "seed" is derived from the rows' seeds; the
# preset is known only when --eval.preset names it.
_RECORDED = SETTINGS + ("seed", "preset")
ROW_FIELDS = ("benchmark", "id", "sample", "response", "num_tokens")  # what --replay.field_map may rename


class ReplayBackend:
    """Saved generations (see the module docstring). A request with no saved row is an error listing the missing
    keys (raised by `check`, before the run directory is touched); nothing is generated. `explicit` names the
    GenConfig fields the user gave as flags: those are recorded as given. `field_map`: {row field: the file's column}
    (ROW_FIELDS). A problem's rows without `sample` are numbered 0, 1, … in file order."""

    name = "replay"
    prompt_mode = "none"

    def __init__(self, path: str | Path, tokenizer=None, explicit=frozenset(), chunk_size: int = 16384, field_map=None):
        from lead_recipes.jsonl import read_jsonl

        self.path, self.tokenizer, self.chunk_size = str(path), tokenizer, chunk_size
        self.explicit = frozenset(explicit)
        self.rows: dict[tuple, dict] = {}
        columns = {f: (field_map or {}).get(f, f) for f in ROW_FIELDS}
        numbered: dict[tuple, int] = defaultdict(int)  # per problem: rows seen, the next sample number
        for i, raw in enumerate(read_jsonl(Path(path))):
            row = dict(raw, **{f: raw[c] for f, c in columns.items() if isinstance(raw, dict) and c in raw})
            try:
                problem = (str(row["benchmark"]), str(row["id"]))
                numbered[problem] += 1
                key = (*problem, int(row["sample"]) if "sample" in row else numbered[problem] - 1)
                row["sample"] = key[2]
                if not isinstance(row["response"], str):
                    raise TypeError("response is not a string")
                if key[2] < 0:
                    raise ValueError("sample is negative")
            except (KeyError, TypeError, ValueError) as e:
                names = ", ".join(columns[f] for f in ("benchmark", "id", "response"))
                raise ValueError(
                    f"{path}: row {i + 1} needs {names} (and sample, or none on every row of its problem) ({e}); "
                    "--replay.field_map renames them, e.g. id=problem_id,response=output"
                ) from None
            if key in self.rows:
                raise ValueError(f"{path}: duplicate generation {key}")
            self.rows[key] = row
        if not self.rows:
            raise ValueError(f"{path}: no generations")
        self.settings = self._shared_settings()

    def _shared_settings(self) -> dict:
        """The sampling settings every row agrees on; a setting some rows carry and others lack or contradict is
        an error (the file would mix two configurations)."""
        out = {}
        for name in SETTINGS:
            values = {repr(r.get(name, UNKNOWN)) for r in self.rows.values()}
            carried = [r[name] for r in self.rows.values() if name in r]
            if not carried:
                continue
            if len(values) > 1:
                raise ValueError(
                    f"{self.path}: rows disagree on {name} ({', '.join(sorted(values)[:3])}); "
                    "a replay file must hold one configuration"
                )
            out[name] = carried[0]
        return out

    def benchmarks(self) -> list[str]:
        """Benchmark names in first-appearance order."""
        return list(dict.fromkeys(k[0] for k in self.rows))

    def n_per_benchmark(self) -> dict[str, int]:
        """Samples per problem of each benchmark: every problem must hold samples 0..n-1 with one n."""
        samples = defaultdict(set)
        for bench, pid, s in self.rows:
            samples[(bench, pid)].add(s)
        out: dict[str, int] = {}
        for (bench, pid), got in samples.items():
            n = len(got)
            if got != set(range(n)):
                raise ValueError(
                    f"{self.path}: {bench}/{pid} has samples {sorted(got)[:6]}, not 0..{n - 1}; "
                    "pass --sampling.n to use the first n"
                )
            if out.setdefault(bench, n) != n:
                raise ValueError(
                    f"{self.path}: {bench} has {out[bench]} samples for some problems and {n} for "
                    f"{pid}; pass --sampling.n to use the first n of each"
                )
        return out

    def _seed_record(self):
        """The run seed when every row's seed is base + sample for one base; "per-sample" when the rows carry
        other seeds (each is in samples.jsonl); else unknown."""
        seeds = [(r.get("seed"), k[2]) for k, r in self.rows.items()]
        if any(s is None for s, _ in seeds):
            return UNKNOWN
        bases = {int(s) - sample for s, sample in seeds}
        return bases.pop() if len(bases) == 1 else "per-sample"

    def generation_record(self, gen) -> dict:
        """gen.to_dict() with each setting the file does not carry and no flag gave replaced by "unknown", and the
        list of those under "unknown"."""
        rec = gen.to_dict()
        if "n_default" not in self.explicit:  # each benchmark's n comes from the file: no default applies
            rec["n_default"] = None
        known = dict(self.settings, seed=self._seed_record())
        for name in _RECORDED:
            if name in known and known[name] != UNKNOWN:
                rec[name] = known[name]
            elif name not in self.explicit:
                rec[name] = UNKNOWN
        rec["unknown"] = [k for k in _RECORDED if rec[k] == UNKNOWN]
        return rec

    def resolve(self, gen, explicit_values: dict):
        """`gen` with the file's settings filled in where no flag gave one; a flag that contradicts the file is an
        error (the generations were made with the file's value). A cap neither gives is None: no sample is clamped
        to the preset's cap, nor called truncated by it."""
        from dataclasses import replace

        for name, value in self.settings.items():  # the template's text decides, not what it was called
            if name in explicit_values and name != "prompt_template_name" and explicit_values[name] != value:
                raise ValueError(
                    f"the flag for {name} ({explicit_values[name]!r}) contradicts {self.path}, "
                    f"whose generations carry {name} = {value!r}"
                )
        known = {k: v for k, v in self.settings.items() if k not in explicit_values}
        if "max_new_tokens" not in self.settings and "max_new_tokens" not in explicit_values:
            known["max_new_tokens"] = None
        return replace(gen, **known)

    def info(self) -> dict:
        return {"backend": self.name, "replay_path": self.path}

    def check(self, requests: list[GenRequest], gen) -> None:
        """Every requested generation is in the file and has a token count (or a tokenizer to count it)."""
        missing = [(r.benchmark, r.id, r.sample) for r in requests if (r.benchmark, r.id, r.sample) not in self.rows]
        if missing:
            raise ValueError(
                f"{self.path} lacks {len(missing)} of the requested generations, e.g. {missing[:3]}; "
                + _coverage_hint(requests, set(missing))
            )
        if self.tokenizer is None:
            for r in requests:
                if self.rows[(r.benchmark, r.id, r.sample)].get("num_tokens") is None:
                    raise ValueError(
                        f"{self.path}: {r.benchmark}/{r.id}/{r.sample} has no num_tokens and no "
                        "--eval.tokenizer was given to count them"
                    )

    def generate(self, requests: list[GenRequest], gen, sink: Sink) -> None:
        self.check(requests, gen)
        for start in range(0, len(requests), self.chunk_size):
            rows = []
            for req in requests[start : start + self.chunk_size]:
                row = self.rows[(req.benchmark, req.id, req.sample)]
                num = row.get("num_tokens")
                if num is None:
                    num = count_tokens(self.tokenizer, row["response"])
                reason, cap = row.get("finish_reason"), gen.max_new_tokens
                if "truncated" in row:
                    truncated = row["truncated"]
                elif reason:
                    truncated = reason == "length"
                else:  # without a known cap nothing says whether the sample was cut off
                    truncated = None if cap is None else int(num) >= cap
                out = sample_row(
                    req, row["response"], int(num) if cap is None else min(int(num), cap), reason, truncated
                )
                # a seed flag given for a file without seeds states them (seed + s, as the other backends use)
                out["seed"] = row.get("seed", gen.seed + req.sample if "seed" in self.explicit else None)
                rows.append(out)
            sink(rows)

    def close(self) -> None:
        pass


def _coverage_hint(requests: list[GenRequest], missing: set) -> str:
    """Which problems of each benchmark the file covers, and the flag that evaluates just those: `--limit k` when it
    holds the first k problems of every benchmark (a smoke run's file), else what --limit and --data.benchmarks do."""
    problems: dict[str, dict[str, bool]] = defaultdict(dict)  # benchmark -> problem id -> all its samples held
    for r in requests:
        held = problems[r.benchmark].setdefault(r.id, True)
        problems[r.benchmark][r.id] = held and (r.benchmark, r.id, r.sample) not in missing
    counts = {b: sum(ids.values()) for b, ids in problems.items()}
    text = "it holds " + ", ".join(f"{b}: {counts[b]} of {len(ids)} problems" for b, ids in problems.items())
    firsts = all(list(ids.values()) == sorted(ids.values(), reverse=True) for ids in problems.values())
    ks = set(counts.values())
    if firsts and len(ks) == 1 and ks != {0}:
        k = ks.pop()
        return text + f": the first {k} of each, which --limit {k} evaluates"
    return text + " (--limit N takes the first N problems of each benchmark; --data.benchmarks chooses benchmarks)"
