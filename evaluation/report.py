"""Reports and plots from summary dicts: report.md/report.csv, run.png, the accuracy-vs-length frontier, budget
curves and the comparison table with AES (`lead-recipes eval compare`). Matplotlib is imported lazily; nothing
here generates or grades. See docs/evaluation.md#the-run-directory.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from evaluation import metrics, store
from evaluation.scoring import BUDGET_MODES, left_out_text


def _pct(x) -> str:
    return "—" if x is None else f"{100 * x:.1f}"


def _num(x, fmt="{:.3f}") -> str:
    return "null" if x is None else fmt.format(x)


def run_table_rows(summary: dict) -> list[dict]:
    """One flat row per benchmark plus the average row (the CSV content)."""
    rows = []
    for name, m in summary["benchmarks"].items():
        row = {
            "benchmark": name,
            "n_problems": m["n_problems"],
            "n_samples": m["n_samples"],
            "accuracy": m["accuracy"],
            "accuracy_stderr": m["accuracy_stderr"],
            "mean_length": m["mean_length"],
            "truncation_rate": m["truncation_rate"],
            "no_answer_rate": m["no_answer_rate"],
        }
        row.update({f"pass@{k}": v for k, v in m["pass_at_k"].items()})
        row.update({f"cons@{k}": v for k, v in m["cons_at_k"].items()})
        if "aes" in summary:
            row["aes"] = summary["aes"]["per_benchmark"].get(name, {}).get("aes")
        rows.append(row)
    avg = {
        "benchmark": "average (unweighted)",
        "accuracy": summary["average"]["accuracy"],
        "mean_length": summary["average"]["mean_length"],
    }
    if "aes" in summary:
        avg["aes"] = summary["aes"]["overall"]["aes"]
    rows.append(avg)
    return rows


def _csv(rows: list[dict]) -> str:
    fields = []
    for r in rows:
        fields += [k for k in r if k not in fields]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def render_markdown(summary: dict) -> str:
    gen = summary["config"]["generation"]
    chat = gen["chat_template_enable"]
    chat = chat if isinstance(chat, str) else "on" if chat else "off"
    seed = (
        "unknown"
        if gen["seed"] == "unknown"
        else "per sample (in samples.jsonl)"
        if gen["seed"] == "per-sample"
        else f"{gen['seed']} (sample s uses seed + s)"
    )
    avg_set = summary["average"].get("set")
    lines = [
        f"# Evaluation report: {summary['config'].get('model') or summary['config']['backend']['backend']}",
        "",
        f"Preset `{gen['preset']}`: temperature {gen['temperature']}, top-p {gen['top_p']}, min-p {gen['min_p']}, "
        f"top-k {gen['top_k']}, max new tokens **{gen['max_new_tokens']}**, seed {seed}, prompt "
        f"`{gen['prompt_template_name']}`, chat template {chat}"
        + (" (settings marked unknown were not recorded with the replayed generations)" if gen.get("unknown") else "")
        + ". Accuracy = avg@n (mean over samples) ± standard error over problems, in %. Length = "
        "mean generated tokens incl. thinking (truncated at the cap)."
        + (f" The average covers {avg_set['label']}: {avg_set['note']}." if avg_set else ""),
        "",
        "| benchmark | problems | n | accuracy | pass@k | cons@k | mean length | truncated | no answer |"
        + (" AES |" if "aes" in summary else ""),
        "|---|---|---|---|---|---|---|---|---|" + ("---|" if "aes" in summary else ""),
    ]
    for name, m in summary["benchmarks"].items():
        pk = ", ".join(f"@{k} {_pct(v)}" for k, v in m["pass_at_k"].items())
        ck = ", ".join(f"@{k} {_pct(v)}" for k, v in m["cons_at_k"].items())
        line = (
            f"| {name} | {m['n_problems']} | {m['n_samples']} | {_pct(m['accuracy'])} ± "
            f"{_pct(m['accuracy_stderr'])} | {pk} | {ck} | {m['mean_length']:.1f} | "
            f"{'unknown' if m['truncation_rate'] is None else _pct(m['truncation_rate'])} | "
            f"{_pct(m['no_answer_rate'])} |"
        )
        if "aes" in summary:
            line += f" {_num(summary['aes']['per_benchmark'].get(name, {}).get('aes'))} |"
        lines.append(line)
    avg = summary["average"]
    line = f"| **average** | | | {_pct(avg['accuracy'])} | | | {avg['mean_length']:.1f} | | |"
    if "aes" in summary:
        line += f" {_num(summary['aes']['overall']['aes'])} |"
    lines.append(line)
    if "aes" in summary:
        o = summary["aes"]["overall"]
        lines += [
            "",
            f"AES (O1-Pruner α={o['alpha']}, β={o['beta']}, γ={o['gamma']}) vs the base run on the "
            f"benchmark-averaged accuracy and length: {_num(o['aes'])} (ΔLength {_num(o['delta_length'])}, "
            f"ΔAcc {_num(o['delta_accuracy'])})" + (f"; {o['reason']}" if o["reason"] else ""),
        ]
    if "budget_sweep" in summary:
        sweep = summary["budget_sweep"]
        names = list(summary["benchmarks"])
        l1 = sweep["mode"] == "l1_prompt"  # the budget is in the prompt: L1's length error is the other axis
        lines += [
            "",
            f"## Token-budget sweep (mode `{sweep['mode']}`"
            + (f", `{sweep['l1_mode']}` prompts: one generation per budget)" if l1 else ")"),
            "",
            f"Mode `{sweep['mode']}`: {BUDGET_MODES[sweep['mode']]}."
            + (f" {left_out_text(sweep)}." if sweep.get("left_out") else ""),
            "",
            "| budget | "
            + " | ".join(names)
            + " | average | avg length |"
            + (" avg abs(length - budget) |" if l1 else ""),
            "|---|" + "---|" * (len(names) + 2 + l1),
        ]
        for b, v in sweep["budgets"].items():
            lines.append(
                f"| {b} | "
                + " | ".join(_pct(v["benchmarks"][n]["accuracy"]) for n in names)
                + f" | {_pct(v['average']['accuracy'])} | {v['average']['mean_length']:.1f} |"
                + (f" {v['average']['mean_abs_deviation']:.1f} |" if l1 else "")
            )
    lines += ["", "## Configuration", "", "```json", json.dumps(summary["config"], indent=2), "```", ""]
    return "\n".join(lines)


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


def plot_frontier(points: list[tuple[str, dict]], path: Path, title: str = "Accuracy vs mean length") -> dict:
    """Accuracy–efficiency frontier: per run (one colour) a circle at its benchmark-averaged (length, accuracy) and a
    small marker per benchmark (one shape per benchmark, named in the legend). Returns the legend labels and the
    marker sizes drawn, so a test can check the picture."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 5))
    names = list(dict.fromkeys(n for _, s in points for n in s["benchmarks"]))
    shape = {n: _SHAPES[i % len(_SHAPES)] for i, n in enumerate(names)}
    firsts, sizes = {}, {}
    for i, (label, s) in enumerate(points):
        below, label = _overlaps(json.dumps([s["average"], s["benchmarks"]], sort_keys=True), label, firsts)
        sizes[label] = size = 150 / (1 + below)
        colour = f"C{i % 10}"
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
    ax.set_ylabel("accuracy (avg@n, %)")
    ax.set_title(title)
    labels = ax.get_legend_handles_labels()[1]
    _finish_png(plt, fig, ax, path, loc="upper left", bbox_to_anchor=(1.01, 1))
    return {"labels": labels, "sizes": sizes}


def plot_budgets(curves: list[tuple[str, dict]], path: Path) -> dict:
    """Budget curves: accuracy vs token budget, one line per benchmark (single run) or per run (average), the mode
    in the title. Returns the legend labels and the line widths drawn, so a test can check the picture."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    firsts, sizes = {}, {}
    for label, sweep in curves:
        bs = sorted(sweep["budgets"], key=int)
        if len(curves) == 1:
            for name in sweep["budgets"][bs[0]]["benchmarks"]:
                ax.plot(
                    [int(b) for b in bs],
                    [100 * sweep["budgets"][b]["benchmarks"][name]["accuracy"] for b in bs],
                    marker="o",
                    label=name,
                )
        below, label = _overlaps(json.dumps(sweep, sort_keys=True), f"{label} average", firsts)
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
    return {"labels": labels, "sizes": sizes}


def plot_run(summary: dict, rows: list[dict], path: Path) -> dict:
    """What one run shows: accuracy (± stderr) and mean length per benchmark, and the histogram of response
    lengths (correct, wrong and truncated samples stacked, the cap marked or named). Returns the values drawn, read
    back from the figure's own bars, so a test can check the picture."""
    plt = _pyplot()
    names = list(summary["benchmarks"])
    fig, (ax_acc, ax_len, ax_hist) = plt.subplots(1, 3, figsize=(14, 4.2))
    acc = ax_acc.bar(
        names,
        [100 * summary["benchmarks"][n]["accuracy"] for n in names],
        yerr=[100 * summary["benchmarks"][n]["accuracy_stderr"] for n in names],
        capsize=3,
    )
    ax_acc.set_ylabel("accuracy (avg@n, %)")
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
    kinds = (
        ("correct", "tab:green", lambda r: r["correct"] and not r["truncated"]),
        ("wrong", "tab:red", lambda r: not r["correct"] and not r["truncated"]),
        ("truncated", "tab:gray", lambda r: bool(r["truncated"])),
    )
    counts = ax_hist.hist(
        [[r["num_tokens"] for r in rows if keep(r)] for _, _, keep in kinds],
        bins=40,
        range=(0, max(longest, cap) if on_axis else longest),
        stacked=True,
        label=[name for name, _, _ in kinds],
        color=[color for _, color, _ in kinds],
    )[0]
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
        "histogram_truncated": int(round(float((counts[-1] - counts[-2]).sum()))),
        "cap": cap,
        "cap_line": on_axis,
    }
    _finish_png(plt, fig, ax_hist, path)
    return drawn


def run_label(path: str | Path, summary: dict) -> str:
    """A run's label in plots and comparisons: the --eval.model it evaluated, else its directory name."""
    p = Path(path)
    return summary.get("config", {}).get("model") or (p.name if p.is_dir() else p.parent.name)


def write_run_report(run_dir: Path, summary: dict, plots: bool = True, rows: list[dict] | None = None) -> None:
    run_dir = Path(run_dir)
    store.write_atomic(run_dir / "report.md", render_markdown(summary))
    store.write_atomic(run_dir / "report.csv", _csv(run_table_rows(summary)))
    if plots:
        plot_run(
            summary, rows if rows is not None else store.read_samples(run_dir / "samples.jsonl"), run_dir / "run.png"
        )
        if summary.get("budget_sweep", {}).get("budgets"):
            plot_budgets([(run_label(run_dir, summary), summary["budget_sweep"])], run_dir / "budget_curves.png")


def compare(runs: list[tuple[str, dict]], base: tuple[str, dict] | None, out_dir: Path | None = None) -> dict:
    """Side-by-side table of runs (and the base), with AES of each run vs the base. Writes compare.md,
    compare.csv, compare.json and accuracy_vs_length.png (+ budget_curves.png if runs have sweeps) to `out_dir`,
    and names them under "written"."""
    all_runs = ([base] if base else []) + runs
    names = []
    for _, s in all_runs:
        names += [n for n in s["benchmarks"] if n not in names]
    rows, table = [], {}
    for label, s in all_runs:
        row = {"run": label + (" (base)" if base and label == base[0] and s is base[1] else "")}
        for n in names:
            m = s["benchmarks"].get(n)
            row[f"{n} acc"] = m["accuracy"] if m else None
            row[f"{n} len"] = m["mean_length"] if m else None
        row["avg acc"], row["avg len"] = s["average"]["accuracy"], s["average"]["mean_length"]
        if base and s is not base[1]:
            rep = metrics.aes_report(s, base[1])
            row["AES"] = rep["overall"]["aes"]
            row.update({f"{n} AES": rep["per_benchmark"].get(n, {}).get("aes") for n in names})
            table[label] = rep
        rows.append(row)
    header = list(rows[0]) + [k for r in rows[1:] for k in r if k not in rows[0]]
    header = list(dict.fromkeys(header))
    md = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        md.append("| " + " | ".join(_fmt_cell(k, r.get(k)) for k in header) + " |")
    notes = [f"{lb}: AES undefined: {r['overall']['reason']}" for lb, r in table.items() if r["overall"]["reason"]]
    if notes:
        md += ["", *notes]
    result = {"table": rows, "aes": table, "markdown": "\n".join(md)}
    if out_dir is not None:
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        store.write_atomic(out_dir / "compare.md", result["markdown"] + "\n")
        store.write_atomic(out_dir / "compare.csv", _csv(rows))
        store.write_json(out_dir / "compare.json", {"table": rows, "aes": table})
        shown = [(lb + " (base)" if base and s is base[1] else lb, s) for lb, s in all_runs]
        plot_frontier(shown, out_dir / "accuracy_vs_length.png", "Accuracy–efficiency frontier")
        result["written"] = ["compare.md", "compare.csv", "compare.json", "accuracy_vs_length.png"]
        sweeps = [(lbl, s["budget_sweep"]) for lbl, s in shown if s.get("budget_sweep", {}).get("budgets")]
        if sweeps:
            plot_budgets(sweeps, out_dir / "budget_curves.png")
            result["written"].append("budget_curves.png")
    return result


def _fmt_cell(key: str, v) -> str:
    if v is None:
        return "—"
    if isinstance(v, str):
        return v
    if key.endswith("acc"):
        return f"{100 * v:.1f}"
    if key.endswith("len"):
        return f"{v:.0f}"
    return f"{v:.3f}"
