"""Reports from summary dicts: report.md/report.csv, the plots of a run (evaluation/plots.py) and the comparison
table with AES (`lead-recipes eval compare`). Nothing here generates or grades. See
docs/evaluation.md#the-run-directory.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from evaluation import metrics, store
from evaluation.plots import plot_budgets, plot_frontier, plot_run
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
