"""The trade-off benchmark's tables and plots, from the result files that tradeoff.py writes (one per run), so a
crashed or partial sweep can be reported and a finished one redrawn (`tradeoff.py --report-only`)."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from evaluation.metrics import aes

BEST_MARGIN = 1.2  # "steps to near the best length": first step whose rollouts' mean length ≤ 1.2 × L_best


def load(work: Path) -> tuple[dict, dict[str, list[dict]]]:
    starts = {p.parent.name: json.loads(p.read_text()) for p in sorted(work.glob("start*/eval.json"))}
    runs: dict[str, list[dict]] = {}
    for p in sorted(work.glob("runs/start*/*/seed*.json")):
        r = json.loads(p.read_text())
        r["start"] = p.parent.parent.name
        runs.setdefault(r["name"], []).append(r)
    return starts, runs


def start_mixups(work: Path, runs: dict[str, list[dict]]) -> tuple[list[str], int]:
    """(runs trained from a build of their start other than the one in `work` now, runs with no recorded start
    hash): a table over runs from different builds of one start compares different models."""
    infos = {p.parent.name: json.loads(p.read_text()) for p in work.glob("start*/info.json")}
    mixed, unknown = [], 0
    for rs in runs.values():
        for r in rs:
            built = infos.get(r["start"], {}).get("weights_sha256")
            if r.get("start_sha256") is None or built is None:
                unknown += 1
            elif r["start_sha256"] != built:
                mixed.append(
                    f"{r['start']}/{r['name']}/seed{r['seed']} (start {r['start_sha256'][:12]}, now {built[:12]})"
                )
    return mixed, unknown


def best_point(start: dict) -> tuple[float, float]:
    """The best policy at a start: the steps behaviour's accuracy and its length without waste."""
    s = start["by_behaviour"]["steps"]
    return s["accuracy"], s["core_length"]


SMOOTH = 5  # steps-to figures read the moving average over this many steps (one step is 64 samples)


def first_step(values: list[float], bound: float) -> int | None:
    """The last step of the first SMOOTH-step window whose mean is ≤ bound (one noisy step does not count)."""
    means = [sum(values[i - SMOOTH : i]) / SMOOTH for i in range(SMOOTH, len(values) + 1)]
    return next((i + SMOOTH for i, v in enumerate(means) if v <= bound), None)


def run_metrics(r: dict, start: dict) -> dict:
    e = r["end"]
    a_best, l_best = best_point(start)
    lengths = [s["length"] for s in r["steps"]]
    wastes = [s["waste"] for s in r["steps"]]
    return {
        "acc0": start["accuracy"],
        "acc": e["accuracy"],
        "len0": start["length"],
        "len": e["length"],
        "steps_share": e["by_behaviour"]["steps"]["share"],
        "direct_share": e["by_behaviour"]["direct"]["share"],
        "waste0": start["waste"],
        "waste": e["waste"],
        "aes": aes(e["accuracy"], e["length"], start["accuracy"], start["length"])["aes"],
        "distance": max(0.0, (a_best - e["accuracy"]) / a_best) + abs(e["length"] - l_best) / l_best,
        "to_best": first_step(lengths, BEST_MARGIN * l_best),
        "to_half_waste": first_step(wastes, start["waste"] / 2),
        **advantage_breakdown(r["trained"]),
    }


def _corr(xs: list[float], ys: list[float]) -> float | None:
    if len(xs) < 3:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxy = sum((a - mx) * (b - my) for a, b in zip(xs, ys))
    sxx, syy = sum((a - mx) ** 2 for a in xs), sum((b - my) ** 2 for b in ys)
    return sxy / math.sqrt(sxx * syy) if sxx > 1e-12 and syy > 1e-12 else None


def advantage_breakdown(steps: list[list[dict]]) -> dict:
    """What the method paid for, from the advantages the actor trained on, all within prompt groups:
    adv_steps_minus_direct = mean advantage of steps minus direct samples in groups holding both;
    corr_waste[_steps/_direct] = corr(waste, advantage) centred within (group, behaviour, correctness) cells of
    solved groups, over both behaviours and per behaviour (so the correctness signal does not dilute it);
    corr_len_unsolved = corr(length, advantage) centred within groups with no correct sample; and their count."""
    gaps, unsolved_xy, n_unsolved = [], ([], []), 0
    waste_xy = {b: ([], []) for b in ("steps", "direct")}
    for batch in steps:
        groups: dict[str, list[dict]] = {}
        for s in batch:
            groups.setdefault(s["group"], []).append(s)
        for g in groups.values():
            by = {b: [s for s in g if s["behaviour"] == b] for b in ("steps", "direct")}
            if by["steps"] and by["direct"]:
                gaps.append(
                    statistics.fmean(s["adv"] for s in by["steps"]) - statistics.fmean(s["adv"] for s in by["direct"])
                )
            if not any(s["correct"] for s in g):
                n_unsolved += 1
                ml, ma = statistics.fmean(s["length"] for s in g), statistics.fmean(s["adv"] for s in g)
                unsolved_xy[0].extend(s["length"] - ml for s in g)
                unsolved_xy[1].extend(round(s["adv"] - ma, 6) for s in g)
                continue
            for b, samples in by.items():
                for cell in ([s for s in samples if s["correct"]], [s for s in samples if not s["correct"]]):
                    if len(cell) > 1:
                        mw, ma = statistics.fmean(s["waste"] for s in cell), statistics.fmean(s["adv"] for s in cell)
                        waste_xy[b][0].extend(s["waste"] - mw for s in cell)
                        waste_xy[b][1].extend(round(s["adv"] - ma, 6) for s in cell)
    both = [x for b in waste_xy.values() for x in b[0]], [y for b in waste_xy.values() for y in b[1]]
    return {
        "adv_steps_minus_direct": statistics.fmean(gaps) if gaps else None,
        "corr_waste": _corr(*both),
        "corr_waste_steps": _corr(*waste_xy["steps"]),
        "corr_waste_direct": _corr(*waste_xy["direct"]),
        "corr_len_unsolved": _corr(*unsolved_xy),
        "unsolved_groups": n_unsolved,
    }


def spread(values: list) -> tuple[float | None, float | None, int]:
    v = [x for x in values if x is not None]
    if not v:
        return None, None, 0
    return statistics.fmean(v), (statistics.stdev(v) if len(v) > 1 else 0.0), len(v)


def fmt(values: list, digits: int = 3, signed: bool = False) -> str:
    m, sd, n = spread(values)
    if m is None:
        return "n/a"
    f = f"{{:{'+' if signed else ''}.{digits}f}}"
    return f"{f.format(m)} ± {sd:.{digits}f}" + ("" if n == len(values) else f" ({n}/{len(values)})")


def steps_fmt(values: list) -> str:
    hit = sorted(v for v in values if v is not None)
    if not hit:
        return f"never ({len(values)} runs)"
    return f"{statistics.median(hit):g}" + ("" if len(hit) == len(values) else f" ({len(hit)}/{len(values)} runs)")


def report(work: Path, args) -> None:
    starts, runs = load(work)
    if not starts:
        print(f"no start evaluations under {work}")
        return
    mixed, unknown = start_mixups(work, runs)
    if mixed:
        raise SystemExit(
            f"{len(mixed)} runs under {work} were trained from another build of their start than the one there now: "
            f"{'; '.join(mixed)}. Move them to the workdir of their own start, or delete them and rerun the sweep."
        )
    if unknown:
        print(f"\nNOTE: {unknown} runs (or their starts) carry no weights hash: their start build is unverified.")
    print(
        f"\n## SFT starts (evaluation: {args.eval_questions} questions × {args.eval_samples} samples, temperature 1)\n"
    )
    print(
        "| start | accuracy | mean length | waste tokens | steps: share / accuracy / length / core length | "
        "direct: share / accuracy / length | accuracy by waste tokens (steps; direct) |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, s in starts.items():
        st, di = s["by_behaviour"]["steps"], s["by_behaviour"]["direct"]
        buckets = "; ".join(f"{k}: {v[0]:.2f} ({v[1]})" for k, v in s["by_waste"].items() if v[0] is not None)
        print(
            f"| {name} | {s['accuracy']:.3f} | {s['length']:.1f} | {s['waste']:.1f} | {st['share']:.2f} / "
            f"{st['accuracy']:.3f} / {st['length']:.1f} / {st['core_length']:.1f} | {di['share']:.2f} / "
            f"{di['accuracy']:.3f} / {di['length']:.1f} | {buckets} |"
        )
    for p in sorted(work.glob("start*/info.json")):
        i = json.loads(p.read_text())
        libs = ", ".join(f"{k} {v}" for k, v in i["versions"].items())
        print(
            f"\n{p.parent.name}: weights sha256 {i['weights_sha256'][:16]}, template {i['template']}, "
            f"SFT threads {i['sft_threads']}; {libs}"
        )
    metrics = {name: [run_metrics(r, starts[r["start"]]) for r in rs] for name, rs in runs.items()}
    keyed = {name: {(r["start"], r["seed"]): m for r, m in zip(runs[name], ms)} for name, ms in metrics.items()}
    for ms in keyed.values():  # AES against grpo's end on the same start and seed: what RL alone gives is out
        for k, m in ms.items():
            g = keyed.get("grpo", {}).get(k)
            m["aes_vs_grpo"] = aes(m["acc"], m["len"], g["acc"], g["len"])["aes"] if g else None
    col = lambda name, key: [m[key] for m in metrics[name]]  # noqa: E731
    print("\n## At the end of RL (step 30), mean ± sd over runs (starts × seeds)\n")
    print(
        "| config | runs | accuracy start → end | mean length start → end | steps share | direct share | "
        "waste tokens start → end | AES vs start | AES vs grpo's end (paired) | distance to best | "
        "steps to 1.2 × best length (5-step mean) | "
        "steps to half the start's waste (5-step mean) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in metrics:
        print(
            f"| {name} | {len(metrics[name])} | {fmt(col(name, 'acc0'))} → {fmt(col(name, 'acc'))} | "
            f"{fmt(col(name, 'len0'), 1)} → {fmt(col(name, 'len'), 1)} | {fmt(col(name, 'steps_share'), 2)} | "
            f"{fmt(col(name, 'direct_share'), 2)} | {fmt(col(name, 'waste0'), 1)} → {fmt(col(name, 'waste'), 1)} | "
            f"{fmt(col(name, 'aes'), 2, True)} | {fmt(col(name, 'aes_vs_grpo'), 2, True)} | "
            f"{fmt(col(name, 'distance'), 2)} | "
            f"{steps_fmt(col(name, 'to_best'))} | {steps_fmt(col(name, 'to_half_waste'))} |"
        )
    print("\n## What the advantages paid for (training side, within prompt groups), mean ± sd over runs\n")
    print(
        "| config | adv(steps) − adv(direct) | corr(waste, adv) within behaviour: both / steps / direct | "
        "corr(length, adv) in all-wrong groups | all-wrong groups per run |"
    )
    print("|---|---|---|---|---|")
    for name in metrics:
        print(
            f"| {name} | {fmt(col(name, 'adv_steps_minus_direct'), 3, True)} | "
            f"{fmt(col(name, 'corr_waste'), 3, True)} / {fmt(col(name, 'corr_waste_steps'), 3, True)} / "
            f"{fmt(col(name, 'corr_waste_direct'), 3, True)} | {fmt(col(name, 'corr_len_unsolved'), 3, True)} | "
            f"{fmt(col(name, 'unsolved_groups'), 1)} |"
        )
    per_start = {(name, m_start): [] for name in metrics for m_start in starts}
    for name, rs in runs.items():
        for r, m in zip(rs, metrics[name]):
            per_start[(name, r["start"])].append(m)
    print("\n## Per start: accuracy / length / AES, mean over seeds\n")
    print("| config | " + " | ".join(starts) + " |")
    print("|---|" + "---|" * len(starts))
    for name in metrics:
        cells = []
        for s in starts:
            ms = per_start[(name, s)]
            cells.append(
                " / ".join(f"{spread([m[k] for m in ms])[0]:.3f}" if ms else "–" for k in ("acc", "len", "aes"))
            )
        print(f"| {name} | " + " | ".join(cells) + " |")
    comparisons(keyed)
    plots = args.plot_dir / f"{args.plot_name}.png", args.plot_dir / f"{args.plot_name}_steps.png"
    plot_tradeoff(metrics, starts, runs, plots[0])
    plot_steps(runs, starts, plots[1])
    log = work / "sweep.jsonl"
    if log.exists():
        rows = [json.loads(x) for x in log.read_text().splitlines()]
        walls = [r["wall_s"] for r in rows if r["event"] == "run"]
        sft = [r["sft_s"] for r in rows if r["event"] == "sft"]
        loads = [r["load"][0] for r in rows]
        if walls:
            print(
                f"\nruns: {len(walls)}, run wall median {statistics.median(walls):.0f} s (sum {sum(walls):.0f} s); "
                f"SFT {sum(sft):.0f} s; first event {rows[0]['time']}, last {rows[-1]['time']}; load average "
                f"(1 min) at events: median {statistics.median(loads):.1f}, max {max(loads):.1f}"
            )
    print(f"plots: {plots[0]}, {plots[1]}")


def _delta(metrics: dict, a: str, b: str | None, key: str, base: str | None = None) -> str:
    """a − b paired by (start, seed) (the same prompts and evaluation noise), or a's key − a's base key per run;
    established when the mean paired difference exceeds the spread (sd) of the paired differences over runs."""
    if a not in metrics or (b is not None and b not in metrics):
        return "not run"
    if base:
        pairs = {k: (m[key], m[base]) for k, m in metrics[a].items()}
    else:
        pairs = {k: (m[key], metrics[b][k][key]) for k, m in metrics[a].items() if k in metrics[b]}
    d = {k: x - y for k, (x, y) in pairs.items() if x is not None and y is not None}
    if not d:
        return "n/a"
    mean, sd, n = spread(list(d.values()))
    per_start = ", ".join(
        f"{s} {statistics.fmean(v for (st, _), v in d.items() if st == s):+.3f}" for s in sorted({st for st, _ in d})
    )
    verdict = "established" if n > 1 and abs(mean) > sd else "not established"
    return (
        f"{mean:+.3f} ± {sd:.3f} over {n} pairs, {sum(v > 0 for v in d.values())}/{n} positive "
        f"(per start: {per_start}) — {verdict}"
    )


def comparisons(metrics: dict[str, dict[tuple, dict]]) -> None:
    """The expected effects. RL raises every method's accuracy from the SFT start, so "keeps accuracy" and
    "cuts waste" compare each method's end state with grpo's (same starts, same seeds), not with the start."""
    print(
        "\n## The issue's expectations, as paired differences at step 30 (same start and seed; established = "
        "|mean| > sd of the differences)\n"
    )
    rows = [
        ("grpo: accuracy end − start", "grpo", None, "acc", "acc0"),
        ("grpo: waste end − start", "grpo", None, "waste", "waste0"),
    ]
    for m in (
        "lead",
        "lead-flat",
        "lead-bmax",
        "grpo-lead",
        "leash",
        "leash-low",
        "leash-tight",
        "composed",
        "composed-budget",
        "gdpo",
        "shorter-better",
        "lead-max-asym",
        "dler",
        "dler-short",
        "laser-de",
    ):
        rows += [
            (f"{m} − grpo: end waste", m, "grpo", "waste", None),
            (f"{m} − grpo: end steps share", m, "grpo", "steps_share", None),
            (f"{m} − grpo: end accuracy", m, "grpo", "acc", None),
        ]
    for m in ("leash-low", "leash-tight"):
        rows += [
            (f"{m} − leash: end accuracy", m, "leash", "acc", None),
            (f"{m} − leash: end length", m, "leash", "len", None),
        ]
    rows += [
        ("lead − lead-flat: end length (the sentinel's added length)", "lead", "lead-flat", "len", None),
        ("lead − lead-flat: end accuracy", "lead", "lead-flat", "acc", None),
        ("lead-bmax − lead: end waste", "lead-bmax", "lead", "waste", None),
        ("lead-max-asym − lead: end waste", "lead-max-asym", "lead", "waste", None),
        ("lead-max-asym − lead: end accuracy", "lead-max-asym", "lead", "acc", None),
        ("dler-short − dler: end accuracy", "dler-short", "dler", "acc", None),
        ("dler-short − dler: end steps share", "dler-short", "dler", "steps_share", None),
        ("composed-budget − composed: end waste", "composed-budget", "composed", "waste", None),
        ("composed-budget − composed: end accuracy", "composed-budget", "composed", "acc", None),
    ]
    singles = [m for m in ("lead", "grpo-lead", "leash", "leash-low", "gdpo", "shorter-better", "grpo") if m in metrics]
    if "composed" in metrics and singles:  # the best by mean AES on these runs: a selection in its favour
        best = max(singles, key=lambda m: spread([x["aes"] for x in metrics[m].values()])[0])
        rows.append((f"composed − best single on AES ({best})", "composed", best, "aes", None))
        rows.append((f"composed-budget − best single on AES ({best})", "composed-budget", best, "aes", None))
    for label, a, b, key, base in rows:
        if a in metrics and (b is None or b in metrics):
            print(f"- {label}: {_delta(metrics, a, b, key, base)}")


def _styles(names) -> dict:
    """{config: (colour, marker)}, no pair repeated however many configs (evaluation.plots.config_styles)."""
    from evaluation.plots import config_styles

    names = list(names)
    return dict(zip(names, config_styles(len(names))))


def plot_tradeoff(metrics: dict, starts: dict, runs: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 6))
    styles, markers = _styles(metrics), dict(zip(starts, "os^v"))
    for name, ms in metrics.items():
        for r, m in zip(runs[name], ms):
            ax.scatter(m["len"], m["acc"], color=styles[name][0], marker=markers[r["start"]], s=22, alpha=0.55)
        ax.scatter(
            spread([m["len"] for m in ms])[0],
            spread([m["acc"] for m in ms])[0],
            color=styles[name][0],
            marker=styles[name][1],
            s=110,
            edgecolor="black",
            zorder=3,
            label=f"{name} (mean of {len(ms)})",
        )
    for s_name, s in starts.items():
        a_best, l_best = best_point(s)
        di = s["by_behaviour"]["direct"]
        ax.scatter(
            s["length"],
            s["accuracy"],
            color="black",
            marker="X",
            s=90,
            zorder=4,
            label="SFT starts" if s_name == next(iter(starts)) else None,
        )
        ax.scatter(
            l_best,
            a_best,
            color="gold",
            marker="*",
            s=260,
            edgecolor="black",
            zorder=4,
            label="best policy (steps, no waste) at each start" if s_name == next(iter(starts)) else None,
        )
        ax.scatter(
            di["length"] - di["waste"],
            di["accuracy"],
            color="grey",
            marker="P",
            s=90,
            zorder=4,
            label="direct, no waste, at each start" if s_name == next(iter(starts)) else None,
        )
    ax.set(
        xlabel="mean response length at the end (tokens, evaluation)",
        ylabel="accuracy at the end (evaluation)",
        title="Accuracy against length after RL: small marks = runs (○ start0, □ start1), large = mean (edged)",
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right", ncol=2)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_steps(runs: dict, starts: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(20, 4.8))
    colors = {name: style[0] for name, style in _styles(runs).items()}
    panels = (
        ("accuracy", "accuracy of the step's rollouts"),
        ("length", "mean length of the step's rollouts"),
        ("steps_share", "share of the steps behaviour"),
        ("waste", "mean waste tokens (after the answer)"),
    )
    for name, rs in runs.items():
        for ax, (key, _) in zip(axes, panels):
            series = [
                [s["by_behaviour"]["steps"]["share"] if key == "steps_share" else s[key] for s in r["steps"]]
                for r in rs
            ]
            n = min(map(len, series))
            x = list(range(1, n + 1))
            mean = [statistics.fmean(v[i] for v in series) for i in range(n)]
            sd = [statistics.stdev(v[i] for v in series) if len(series) > 1 else 0.0 for i in range(n)]
            ax.plot(x, mean, color=colors[name], lw=1.4, label=name)
            ax.fill_between(
                x, [m - d for m, d in zip(mean, sd)], [m + d for m, d in zip(mean, sd)], color=colors[name], alpha=0.12
            )
    best = statistics.fmean(best_point(s)[1] for s in starts.values())
    axes[1].axhline(best, color="gold", ls="--", lw=1, label="best policy's length (mean of starts)")
    for ax, (_, label) in zip(axes, panels):
        ax.set(xlabel="RL step", ylabel=label)
        ax.grid(alpha=0.3)
    axes[3].legend(fontsize=7, ncol=2)
    axes[1].legend(fontsize=7, handles=axes[1].get_lines()[-1:])
    fig.suptitle("Training rollouts over steps: mean over runs (starts × seeds), band = ± 1 sd")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
