"""`lead-recipes eval`: evaluate a model (vLLM or an OpenAI-compatible server) or saved generations (replay) on the
five benchmarks with a paper protocol, and `lead-recipes eval compare RUN... --eval.base RUN` for the side-by-side
table with AES.

This module parses flags and wires them up; the work is in run.py and report.py. It never imports the training stack.
See docs/evaluation.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from evaluation.protocols import DEFAULT_BENCHMARKS, PRESETS
from evaluation.replay import ROW_FIELDS
from lead_recipes.benchmarks import BENCHMARKS, BENCHMARKS_DIR_ENV, LOCAL_BENCHMARKS_DIR, default_benchmarks_dir
from lead_recipes.grading.options import REPORT_EXTRACTION, add_options
from lead_recipes.help_format import ArgumentParser
from lead_recipes.prompts import L1_MODES, PROMPT_TEMPLATES

DEFAULT_PRESET = "sober"
# GenConfig fields and the flag (argparse dest) that sets each; what a replay records as given.
_GEN_FLAGS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "min_p": "min_p",
    "top_k": "top_k",
    "seed": "seed",
    "max_new_tokens": "max_new_tokens",
    "chat_template_enable": "chat_template_enable",
    "system_prompt": "system_prompt",
    "prompt_template": "prompt_template",
    "l1_budget": "l1_budget",
    "l1_mode": "l1_mode",
}


def _int_list(text: str) -> list[int]:
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not vals or any(v < 1 for v in vals):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return vals


def _field_map(text: str) -> dict:
    out = {}
    for part in text.split(","):
        key, _, col = part.partition("=")
        if key.strip() not in ("id", "problem", "answer") or not col.strip():
            raise argparse.ArgumentTypeError(f"expected id=COL,problem=COL,answer=COL, got {text!r}")
        out[key.strip()] = col.strip()
    return out


def _replay_field_map(text: str) -> dict:
    out = dict(part.partition("=")[::2] for part in text.split(","))
    if not out or any(k not in ROW_FIELDS or not v for k, v in out.items()):
        fields = ", ".join(ROW_FIELDS)
        raise argparse.ArgumentTypeError(f"expected FIELD=COL,... with FIELD one of {fields}, got {text!r}")
    return out


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="lead-recipes eval",
        description=" ".join(__doc__.split("\n\n")[0].split()),
        epilog="`lead-recipes eval compare --help` for the comparison subcommand.",
    )
    p.add_argument("--output", required=True, help="run directory (rerun the same command to resume)")
    p.add_argument("--seed", type=int, help="sampling seed (default: the preset's)")
    p.add_argument("--limit", type=int, help="first N problems of each benchmark (smoke runs; default: all)")
    e = p.add_argument_group("eval")
    e.add_argument("--eval.backend", dest="backend", required=True, choices=("vllm", "openai", "replay"))
    e.add_argument(
        "--eval.model",
        dest="model",
        help="model path/name (vllm: loaded; openai: sent as `model`; replay: a label); no default: the vllm and "
        "openai backends need it",
    )
    e.add_argument(
        "--eval.preset",
        dest="preset",
        default=None,  # None: sober, and a replay records its preset as unknown
        choices=sorted(PRESETS),
        help=f"protocol (default {DEFAULT_PRESET}; a replay without this flag records its preset as unknown); "
        "grpo-lead-7b / grpo-lead-14b by model size",
    )
    e.add_argument(
        "--eval.base",
        dest="base",
        help="base-model run directory or summary.json: adds AES to the summary (default: none, no AES)",
    )
    e.add_argument(
        "--eval.tokenizer",
        dest="tokenizer",
        help="tokenizer for chat templates / token counts (replay, openai completions; default: none, the vllm "
        "backend uses the model's)",
    )
    e.add_argument(
        "--eval.budgets",
        dest="budgets",
        type=_int_list,
        help="token budgets for the sweep, e.g. 1024,2048,4096: the run's samples cut at each budget; with "
        "--prompt.l1_budget, one generation per budget whose prompt asks for that many tokens (default: no sweep)",
    )
    e.add_argument(
        "--eval.progress_enable",
        dest="progress",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="progress bars",
    )
    e.add_argument(
        "--eval.plots_enable", dest="plots", action=argparse.BooleanOptionalAction, default=True, help="write the plots"
    )
    d = p.add_argument_group("data")
    d.add_argument(
        "--data.benchmarks",
        dest="benchmarks",
        help=f"comma-separated: names ({','.join(BENCHMARKS)}), or name=path.jsonl / "
        "name=hf:owner/dataset:split (default: the preset's paper set; replay: the file's benchmarks)",
    )
    d.add_argument(
        "--data.benchmarks_dir",
        dest="data.benchmarks_dir",
        default=default_benchmarks_dir(),
        help=f"directory with <benchmark>.jsonl files (default: ${BENCHMARKS_DIR_ENV}, else ./{LOCAL_BENCHMARKS_DIR} "
        "if it exists, else the HF hub)",
    )
    d.add_argument(
        "--data.field_map",
        dest="field_map",
        type=_field_map,
        help="column names for custom/hub sources, e.g. problem=question,answer=final_answer,id=unique_id "
        "(default: id, problem, answer; the known columns of a named benchmark's hub copy)",
    )
    g = p.add_argument_group(
        "sampling", "protocol overrides (default: the preset's value; all recorded in summary.json)"
    )
    preset = "default: the preset's"
    g.add_argument("--sampling.max_new_tokens", dest="max_new_tokens", type=int, help=preset)
    g.add_argument(
        "--sampling.n",
        dest="n",
        type=int,
        help="samples per problem for every benchmark (replay: default from the file)",
    )
    g.add_argument("--sampling.temperature", dest="temperature", type=float, help=preset)
    g.add_argument("--sampling.top_p", dest="top_p", type=float, help=preset)
    g.add_argument("--sampling.min_p", dest="min_p", type=float, help=preset)
    g.add_argument("--sampling.top_k", dest="top_k", type=int, help=preset)
    t = p.add_argument_group("prompt", "protocol overrides (default: the preset's value)")
    t.add_argument(
        "--prompt.template",
        dest="prompt_template",
        help=f"one of {', '.join(PROMPT_TEMPLATES)} or a literal with {{problem}} ({preset})",
    )
    t.add_argument("--prompt.system", dest="system_prompt", help=f"system message ({preset})")
    t.add_argument(
        "--prompt.l1_budget",
        dest="l1_budget",
        type=int,
        help="an L1 model's budget: append ' Think for N tokens.' to the user turn, as `data build --l1.mode` "
        "trains it (default: none, the prompt asks for no budget)",
    )
    t.add_argument(
        "--prompt.l1_mode",
        dest="l1_mode",
        choices=L1_MODES,
        help="with --prompt.l1_budget: exact (default) or max (' Think for maximum N tokens.')",
    )
    t.add_argument(
        "--prompt.chat_template_enable",
        dest="chat_template_enable",
        action=argparse.BooleanOptionalAction,
        help="apply the model's chat template (default: the preset's, on; a replay: what its file records)",
    )
    gr = p.add_argument_group("grade", "part of the run identity: a run resumes only under the same settings")
    add_options(gr, ("extraction",), extraction=REPORT_EXTRACTION)
    r = p.add_argument_group("replay", "replay backend")
    r.add_argument(
        "--replay.path", dest="replay.path", help="JSONL of saved generations; no default: the replay backend needs it"
    )
    r.add_argument(
        "--replay.field_map",
        dest="replay_field_map",
        type=_replay_field_map,
        help="the file's column names, e.g. id=problem_id,response=output,num_tokens=tokens "
        f"(default: the names themselves: {', '.join(ROW_FIELDS)})",
    )
    o = p.add_argument_group("openai", "openai backend")
    o.add_argument("--openai.base_url", dest="openai.base_url", default="http://127.0.0.1:8000")
    o.add_argument("--openai.endpoint", dest="openai.endpoint", default="chat", choices=("chat", "completions"))
    # resolved when used: a default read from the environment would print the key in --help
    o.add_argument("--openai.api_key", dest="openai.api_key", help="default: $OPENAI_API_KEY, else none")
    o.add_argument("--openai.concurrency", dest="openai.concurrency", type=int, default=16)
    o.add_argument("--openai.retries", dest="openai.retries", type=int, default=5)
    o.add_argument("--openai.timeout_s", dest="openai.timeout_s", type=float, default=3600.0)
    v = p.add_argument_group("vllm", "vllm backend")
    v.add_argument("--vllm.dtype", dest="vllm.dtype", default="auto")
    v.add_argument("--vllm.tensor_parallel_size", dest="vllm.tensor_parallel_size", type=int, default=1)
    v.add_argument(
        "--vllm.data_parallel_size",
        dest="vllm.data_parallel_size",
        type=int,
        help="engines, each on its own tensor_parallel_size GPUs, requests sharded between them "
        "(default: visible GPUs // tensor_parallel_size, 1 without GPUs)",
    )
    v.add_argument(
        "--vllm.gpu_memory_utilization",
        dest="vllm.gpu_memory_utilization",
        type=float,
        help="default 0.9 on GPU, 0.3 on CPU (there it is a fraction of NUMA-node memory)",
    )
    v.add_argument(
        "--vllm.max_model_len", dest="vllm.max_model_len", type=int, help="default: vLLM's, the model's context length"
    )
    v.add_argument(
        "--vllm.max_num_seqs",
        dest="vllm.max_num_seqs",
        type=int,
        help="sequences each engine runs at once (default: vLLM's); twice as many are kept in the engine "
        "so that the batch stays full. Not part of the run identity: a run resumes with another value",
    )
    v.add_argument(
        "--vllm.enforce_eager_enable", dest="vllm.enforce_eager_enable", action="store_true", help="no CUDA graphs"
    )
    return p


def build_compare_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="lead-recipes eval compare", description="side-by-side table of finished runs with AES against a base run"
    )
    p.add_argument("runs", nargs="+", help="run directories (or summary.json files)")
    p.add_argument(
        "--output", help="directory for compare.md/.csv/.json and the frontier plot (default: none, only printed)"
    )
    e = p.add_argument_group("eval")
    e.add_argument("--eval.base", dest="base", help="base-model run (AES reference; default: none, no AES)")
    return p


def make_backend(args, gen, tok, replay=None):
    from evaluation import backends, vllm_dp

    a = vars(args)
    if args.backend == "vllm":
        if not args.model:
            raise ValueError("--eval.backend vllm needs --eval.model")
        if not os.path.isdir(args.model) and (args.model.count("/") > 1 or args.model.startswith((".", "/", "~"))):
            # not a hub id (owner/name) either: vLLM would pass it to the hub client and end in its traceback
            raise FileNotFoundError(f"--eval.model {args.model}: no such model directory")
        engine = dict(
            dtype=a["vllm.dtype"],
            tensor_parallel_size=a["vllm.tensor_parallel_size"],
            gpu_memory_utilization=a["vllm.gpu_memory_utilization"],
            max_model_len=a["vllm.max_model_len"],
            enforce_eager=a["vllm.enforce_eager_enable"],
            seed=gen.seed,
            max_num_seqs=a["vllm.max_num_seqs"],
        )
        dp = vllm_dp.data_parallel_size(a["vllm.data_parallel_size"], a["vllm.tensor_parallel_size"])
        if dp > 1:
            return vllm_dp.DataParallelVLLM(args.model, dp, **engine)
        return backends.VLLMBackend(args.model, **engine)
    if args.backend == "openai":
        if not args.model:
            raise ValueError("--eval.backend openai needs --eval.model (the served model name)")
        if a["openai.endpoint"] == "completions" and gen.chat_template_enable and tok is None:
            raise ValueError(
                "--openai.endpoint completions with the chat template on needs --eval.tokenizer "
                "(or use the chat endpoint, or --no-prompt.chat_template_enable)"
            )
        return backends.OpenAIBackend(
            a["openai.base_url"],
            args.model,
            endpoint=a["openai.endpoint"],
            api_key=a["openai.api_key"] or os.environ.get("OPENAI_API_KEY"),
            concurrency=a["openai.concurrency"],
            retries=a["openai.retries"],
            timeout_s=a["openai.timeout_s"],
            tokenizer=tok,
        )
    return replay


def _sources(specs: list[str], data_dir: str | None) -> dict:
    from lead_recipes.benchmarks import parse_spec

    out = {}
    for spec in specs:
        name, source = parse_spec(spec)
        out[name] = source or (str(Path(data_dir) / f"{name}.jsonl") if data_dir else "hf-hub default")
    return out


def benchmark_specs(args, replay=None) -> list[str]:
    """--data.benchmarks as given, else the replay file's benchmarks, else the preset's paper set."""
    if args.benchmarks:
        return [s.strip() for s in args.benchmarks.split(",") if s.strip()]
    return replay.benchmarks() if replay else list(DEFAULT_BENCHMARKS[args.preset or DEFAULT_PRESET])


def run_main(argv: list[str]) -> int:
    from evaluation import protocols, run
    from evaluation.scoring import left_out_text
    from lead_recipes.benchmarks import load_benchmarks

    args = build_parser().parse_args(argv)
    a = vars(args)
    try:
        tok = None
        if args.tokenizer:
            from evaluation.backends import load_tokenizer

            tok = load_tokenizer(args.tokenizer)
        given = {field: a[dest] for field, dest in _GEN_FLAGS.items() if a[dest] is not None}
        replay = None
        if args.backend == "replay":
            from evaluation.replay import ReplayBackend

            if not a["replay.path"]:
                raise ValueError("--eval.backend replay needs --replay.path")
            explicit = set(given) | ({"prompt_template_name"} if "prompt_template" in given else set())
            explicit |= {k for k, v in (("preset", args.preset), ("n_default", args.n)) if v is not None}
            replay = ReplayBackend(a["replay.path"], tokenizer=tok, explicit=explicit, field_map=args.replay_field_map)
        gen = protocols.resolve(
            args.preset or DEFAULT_PRESET,
            temperature=args.temperature,
            top_p=args.top_p,
            min_p=args.min_p,
            top_k=args.top_k,
            max_new_tokens=args.max_new_tokens,
            n=args.n,
            seed=args.seed,
            prompt_template=args.prompt_template,
            chat_template_enable=args.chat_template_enable,
            system_prompt=args.system_prompt,
            n_per_benchmark=replay.n_per_benchmark() if replay and args.n is None else None,
            l1_budget=args.l1_budget,
            l1_mode=args.l1_mode,
        )
        if replay:  # compared as resolved: a template name as its text, which is what the file records
            explicit_values = {k: getattr(gen, k) for k in given}
            if "prompt_template" in given:
                explicit_values["prompt_template_name"] = gen.prompt_template_name
            gen = replay.resolve(gen, explicit_values)
        specs = benchmark_specs(args, replay)
        data_dir = a["data.benchmarks_dir"]
        benchmarks = load_benchmarks(specs, data_dir, args.limit, args.field_map)
        base = run.load_summary(args.base) if args.base else None
        backend = make_backend(args, gen, tok, replay)
        try:
            summary = run.run_eval(
                gen,
                benchmarks,
                backend,
                args.output,
                model=args.model,
                base=base,
                budgets=args.budgets,
                tokenizer=tok,
                limit=args.limit,
                sources=_sources(specs, data_dir),
                progress=args.progress,
                plots=args.plots,
                extraction=a["grade.extraction"],
            )
        finally:
            backend.close()
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        print(f"lead-recipes eval: error: {e}", file=sys.stderr)
        return 2
    avg = summary["average"]
    left_out = left_out_text(summary.get("budget_sweep", {}))
    if left_out:
        print(f"lead-recipes eval: note: {left_out}", file=sys.stderr)
    print(
        f"average accuracy {100 * avg['accuracy']:.2f}%, mean length {avg['mean_length']:.1f} tokens "
        f"over {avg['set']['label']} ({avg['set']['note']}); report: {Path(args.output) / 'report.md'}"
    )
    return 0


def _summary_path(run_path: str) -> Path:
    """A run directory or its summary.json, as the one file it names."""
    path = Path(run_path).resolve()
    return path / "summary.json" if path.is_dir() else path


def compare_main(argv: list[str]) -> int:
    from evaluation import report, run

    args = build_compare_parser().parse_args(argv)
    try:
        # the base listed among the runs too is shown once, as the base
        runs = [r for r in args.runs if not (args.base and _summary_path(r) == _summary_path(args.base))]
        loaded = [(r, run.load_summary(r)) for r in runs + ([args.base] if args.base else [])]
        labels = [report.run_label(r, s) for r, s in loaded]
        # two runs of one model (e.g. two presets) keep apart by their directory names
        labels = [
            f"{lb} ({Path(r).name if Path(r).is_dir() else Path(r).parent.name})" if labels.count(lb) > 1 else lb
            for lb, (r, _) in zip(labels, loaded)
        ]
        pairs = [(lb, s) for lb, (_, s) in zip(labels, loaded)]
        runs, base = (pairs[:-1], pairs[-1]) if args.base else (pairs, None)
        result = report.compare(runs, base, Path(args.output) if args.output else None)
    except (ValueError, FileNotFoundError, KeyError) as e:
        print(f"lead-recipes eval compare: error: {e}", file=sys.stderr)
        return 2
    print(result["markdown"])  # the table, then why an AES is undefined or compares different benchmarks
    if args.output:
        print(f"wrote {', '.join(sorted(result['written']))} to {args.output}")
    return 0


def main(argv: list[str]) -> int:
    argv = list(argv)
    if argv and argv[0] == "compare":
        return compare_main(argv[1:])
    return run_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
