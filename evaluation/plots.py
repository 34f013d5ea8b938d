"""The plots of `lead-recipes eval`: run.png, the accuracy-vs-length frontier and budget curves. Each returns what it
drew, so a test can check the picture; matplotlib is imported lazily. See docs/evaluation.md#the-run-directory.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

from evaluation import store


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _finish_png(plt, fig, ax, path: Path, **legend) -> None:
    """Grid, legend, layout, then the PNG written atomically (a killed run never leaves a torn plot)."""
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, **legend)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    store.write_atomic(path, buf.getvalue())


def _overlaps(key, label: str, firsts: dict) -> tuple[int, str]:
    """How many earlier runs drew exactly `key` (their marker or line is under this one), and this run's legend label,
    which names the first of them: two identical runs stay visible as a smaller marker in a larger one."""
    same = firsts.setdefault(key, [])
    same.append(label)
    return len(same) - 1, label + (f" (same as {same[0]})" if len(same) > 1 else "")


_SHAPES = "sD^vP*Xph"  # per-benchmark markers; the averages are circles
_MARKERS = "DP*Xv^ph<>"  # one per ten configurations (config_styles); not o or s, which mark the starts


def config_styles(n: int) -> list[tuple[tuple, str]]:
    """(colour, marker) for n configurations, no pair repeated: tab10's colours, then tab20's light shades of them,
    then evenly spaced hues; the marker changes with each ten."""
    import matplotlib

    tab20 = matplotlib.colormaps["tab20"]
    order = [tab20(2 * i) for i in range(10)] + [tab20(2 * i + 1) for i in range(10)]
    hues = matplotlib.colormaps["hsv"]
    colours = order[:n] + [hues(i / max(1, n - 20)) for i in range(max(0, n - 20))]
    return [(colours[i], _MARKERS[(i // 10) % len(_MARKERS)]) for i in range(n)]


def average_stderr(summary: dict) -> float:
    """Standard error of the unweighted benchmark average: sqrt(Σ se_b²) / B (the benchmarks' problems are
    independent)."""
    ses = [float(m.get("accuracy_stderr") or 0.0) for m in summary["benchmarks"].values()]
    return sum(se * se for se in ses) ** 0.5 / max(1, len(ses))


def plot_frontier(points: list[tuple[str, dict]], path: Path, title: str = "Accuracy vs mean length") -> dict:
    """Accuracy–efficiency frontier: per run (one colour) a circle at its benchmark-averaged (length, accuracy) and a
    small marker per benchmark (one shape per benchmark, named in the legend), each with its ± standard error as a
    vertical bar. Returns the legend labels, the marker sizes and the error bars drawn, so a test can check the
    picture."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 5))
    names = list(dict.fromkeys(n for _, s in points for n in s["benchmarks"]))
    shape = {n: _SHAPES[i % len(_SHAPES)] for i, n in enumerate(names)}
    firsts, sizes, errors = {}, {}, {}
    for i, ((label, s), (colour, _)) in enumerate(zip(points, config_styles(len(points)))):
        below, label = _overlaps(json.dumps([s["average"], s["benchmarks"]], sort_keys=True), label, firsts)
        sizes[label] = size = 150 / (1 + below)
        x, y = s["average"]["mean_length"], 100 * s["average"]["accuracy"]
        bar = ax.errorbar([x], [y], yerr=[100 * average_stderr(s)], color=colour, capsize=4, zorder=2 + i)
        ((low, high),) = [seg[:, 1] for seg in bar.lines[2][0].get_segments()]  # read back: what the figure shows
        errors[label] = (high - low) / 2
        for m in s["benchmarks"].values():
            yerr = [100 * float(m.get("accuracy_stderr") or 0.0)]
            ax.errorbar([m["mean_length"]], [100 * m["accuracy"]], yerr=yerr, color=colour, alpha=0.4, zorder=2 + i)
        ax.scatter(
            [s["average"]["mean_length"]],
            [100 * s["average"]["accuracy"]],
            s=size,
            color=colour,
            edgecolor="black",
            label=label,
            zorder=3 + i,
        )
        for n, m in s["benchmarks"].items():
            ax.scatter(
                [m["mean_length"]], [100 * m["accuracy"]], s=size / 3, marker=shape[n], color=colour, zorder=3 + i
            )
    for n in names:  # the benchmark key, in grey: which shape is which benchmark
        ax.scatter([], [], s=30, marker=shape[n], color="grey", label=f"{n} (per-benchmark markers)")
    ax.set_xlabel("mean response length (tokens, thinking included)")
    ax.set_ylabel("accuracy (avg@n, %; bars ± standard error over problems)")
    ax.set_title(title)
    labels = ax.get_legend_handles_labels()[1]
    _finish_png(plt, fig, ax, path, loc="upper left", bbox_to_anchor=(1.01, 1))
    return {"labels": labels, "sizes": sizes, "stderr": errors}


def plot_budgets(curves: list[tuple[str, dict]], path: Path) -> dict:
    """Budget curves: accuracy vs token budget, one line per benchmark (single run) or per run (average), the mode
    in the title; a single run of one benchmark draws one line, named as both (its average would hide it). Returns
    the legend labels and the line widths drawn, so a test can check the picture."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    firsts, sizes = {}, {}
    for label, sweep in curves:
        bs = sorted(sweep["budgets"], key=int)
        names = list(sweep["budgets"][bs[0]]["benchmarks"])
        if len(curves) == 1 and len(names) > 1:
            for name in names:
                ax.plot(
                    [int(b) for b in bs],
                    [100 * sweep["budgets"][b]["benchmarks"][name]["accuracy"] for b in bs],
                    marker="o",
                    label=name,
                )
        average = f"{label} average" + (f" = {names[0]}" if len(names) == 1 else "")
        below, label = _overlaps(json.dumps(sweep, sort_keys=True), average, firsts)
        sizes[label] = width = 3.5 / (1 + below)
        ax.plot(
            [int(b) for b in bs],
            [100 * sweep["budgets"][b]["average"]["accuracy"] for b in bs],
            marker="s",
            markersize=3 + width,
            linewidth=width,
            label=label,
        )
    l1 = any(sweep["mode"] == "l1_prompt" for _, sweep in curves)
    ax.set_xlabel("budget asked for in the prompt (L1)" if l1 else "max new tokens (budget)")
    ax.set_ylabel("accuracy (%)")
    modes = sorted({sweep["mode"] for _, sweep in curves})
    ax.set_title(f"Accuracy at a token budget ({', '.join(modes)} mode; report.md explains it)", fontsize=10)
    labels = ax.get_legend_handles_labels()[1]
    _finish_png(plt, fig, ax, path)
    return {"labels": labels, "sizes": sizes, "lines": len(ax.lines)}


def plot_run(summary: dict, rows: list[dict], path: Path) -> dict:
    """What one run shows: accuracy (± stderr) and mean length per benchmark, and the histogram of response
    lengths (correct, wrong and truncated samples stacked, the cap marked or named). Returns the values drawn, read
    back from the figure's own bars, so a test can check the picture."""
    plt = _pyplot()
    names = list(summary["benchmarks"])
    fig, (ax_acc, ax_len, ax_hist) = plt.subplots(1, 3, figsize=(14, 4.2))
    heights = [100 * summary["benchmarks"][n]["accuracy"] for n in names]
    errs = [100 * summary["benchmarks"][n]["accuracy_stderr"] for n in names]
    acc = ax_acc.bar(names, heights, yerr=errs, capsize=3)
    # from 0, with room for the error bars; never a ±0.04% axis around an all-zero accuracy
    ax_acc.set_ylim(0, min(100.0, max(5.0, 1.15 * max(h + e for h, e in zip(heights, errs)))))
    ax_acc.set_ylabel("accuracy (avg@n, %; ± standard error)")
    lens = ax_len.bar(names, [summary["benchmarks"][n]["mean_length"] for n in names], color="tab:orange")
    ax_len.set_ylabel("mean response length (tokens)")
    for ax in (ax_acc, ax_len):
        ax.tick_params(axis="x", labelrotation=30)
        ax.grid(alpha=0.3, axis="y")
    # Truncated samples get their own colour: they pile up at the real cap even when the record does not know it.
    # The axis ends at the longest sample; the cap is drawn when known and on the axis, else named in the legend.
    cap = summary["config"]["generation"]["max_new_tokens"]
    cap = cap if isinstance(cap, int) else None
    longest = max((r["num_tokens"] for r in rows), default=1)
    on_axis = cap is not None and cap <= 1.05 * longest
    # A row of unknown truncation counts as correct or wrong; the "truncated" bar appears when all rows know theirs
    # or some row is known truncated, so every row is in exactly one bar.
    unknown = any(r["truncated"] is None for r in rows)
    known = not unknown or any(r["truncated"] for r in rows)
    kinds = (
        ("correct", "tab:green", lambda r: r["correct"] and not r["truncated"]),
        ("wrong", "tab:red", lambda r: not r["correct"] and not r["truncated"]),
        ("truncated", "tab:gray", lambda r: bool(r["truncated"])),
    )[: 3 if known else 2]
    counts = ax_hist.hist(
        [[r["num_tokens"] for r in rows if keep(r)] for _, _, keep in kinds],
        bins=40,
        range=(0, max(longest, cap) if on_axis else longest),
        stacked=True,
        label=[name for name, _, _ in kinds],
        color=[color for _, color, _ in kinds],
    )[0]
    if unknown:
        ax_hist.plot([], [], " ", label="truncation unknown" if not known else "truncation unknown for some")
    if cap is None:
        ax_hist.plot([], [], " ", label="cap unknown")
    elif on_axis:
        ax_hist.axvline(cap, color="k", linestyle="--", linewidth=1, label=f"cap {cap}")
    else:
        ax_hist.plot([], [], " ", label=f"cap {cap} (beyond the longest sample, {longest})")
    ax_hist.set_xlabel("response length (tokens)")
    ax_hist.set_ylabel("samples")
    config = summary["config"]
    fig.suptitle(f"{config.get('model') or config['backend']['backend']} — preset {config['generation']['preset']}")
    drawn = {
        "accuracy": {n: b.get_height() / 100 for n, b in zip(names, acc.patches)},
        "mean_length": {n: b.get_height() for n, b in zip(names, lens.patches)},
        "histogram_total": int(round(float(counts[-1].sum()))),
        "histogram_truncated": int(round(float((counts[-1] - counts[-2]).sum()))) if known else None,
        "accuracy_axis": ax_acc.get_ylim(),
        "legend": ax_hist.get_legend_handles_labels()[1],
        "cap": cap,
        "cap_line": on_axis,
    }
    _finish_png(plt, fig, ax_hist, path)
    return drawn
