"""`lead-recipes eval`: evaluate a model (vLLM or an OpenAI-compatible server) or saved generations (replay) on the
five benchmarks with a paper protocol, and `lead-recipes eval compare RUN... --base RUN` for the side-by-side
table with AES. Flag parsing and wiring only; the work is in run.py / report.py. Never imports the training stack.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from evaluation.benchmarks import BENCHMARKS
from evaluation.protocols import PRESETS, PROMPT_TEMPLATES


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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lead-recipes eval", description=" ".join(__doc__.split("\n\n")[0].split()),
                                epilog="`lead-recipes eval compare --help` for the comparison subcommand.")
    p.add_argument("--backend", required=True, choices=("vllm", "openai", "replay"))
    p.add_argument("--model", help="model path/name (vllm: loaded; openai: sent as `model`; replay: a label)")
    p.add_argument("--benchmarks", default=",".join(BENCHMARKS),
                   help="comma-separated: names (%(default)s), or name=path.jsonl / name=hf:owner/dataset:split")
    p.add_argument("--preset", default="sober", choices=sorted(PRESETS))
    p.add_argument("--data-dir", help="directory with <benchmark>.jsonl files (default: the HF hub copies)")
    p.add_argument("--field-map", type=_field_map, help="column names for custom/hub sources, e.g. "
                   "problem=question,answer=final_answer,id=unique_id")
    p.add_argument("--output", required=True, help="run directory (rerun the same command to resume)")
    p.add_argument("--base", help="base-model run directory or summary.json: adds AES to the summary")
    g = p.add_argument_group("protocol overrides (default: the preset's value; all recorded in summary.json)")
    g.add_argument("--max-new-tokens", type=int)
    g.add_argument("--n", type=int, help="samples per problem for every benchmark")
    g.add_argument("--temperature", type=float)
    g.add_argument("--top-p", type=float)
    g.add_argument("--min-p", type=float)
    g.add_argument("--top-k", type=int)
    g.add_argument("--seed", type=int)
    g.add_argument("--limit", type=int, help="first N problems of each benchmark (smoke runs)")
    g.add_argument("--prompt-template", help=f"one of {', '.join(PROMPT_TEMPLATES)} or a literal with {{problem}}")
    g.add_argument("--system-prompt")
    g.add_argument("--chat_template_enable", action=argparse.BooleanOptionalAction, default=True,
                   help="apply the model's chat template (default on)")
    g.add_argument("--tokenizer", help="tokenizer for chat templates / token counts (replay, openai completions)")
    g.add_argument("--budgets", type=_int_list, help="token budgets for the sweep, e.g. 1024,2048,4096")
    r = p.add_argument_group("replay backend")
    r.add_argument("--replay.path", dest="replay.path", help="JSONL of saved generations")
    o = p.add_argument_group("openai backend")
    o.add_argument("--openai.base_url", dest="openai.base_url", default="http://127.0.0.1:8000")
    o.add_argument("--openai.endpoint", dest="openai.endpoint", default="chat", choices=("chat", "completions"))
    o.add_argument("--openai.api_key", dest="openai.api_key", default=os.environ.get("OPENAI_API_KEY"))
    o.add_argument("--openai.concurrency", dest="openai.concurrency", type=int, default=16)
    o.add_argument("--openai.retries", dest="openai.retries", type=int, default=5)
    o.add_argument("--openai.timeout_s", dest="openai.timeout_s", type=float, default=3600.0)
    v = p.add_argument_group("vllm backend")
    v.add_argument("--vllm.dtype", dest="vllm.dtype", default="auto")
    v.add_argument("--vllm.tensor_parallel_size", dest="vllm.tensor_parallel_size", type=int, default=1)
    v.add_argument("--vllm.gpu_memory_utilization", dest="vllm.gpu_memory_utilization", type=float,
                   help="default 0.9 on GPU, 0.3 on CPU (there it is a fraction of NUMA-node memory)")
    v.add_argument("--vllm.max_model_len", dest="vllm.max_model_len", type=int)
    v.add_argument("--vllm.enforce_eager_enable", dest="vllm.enforce_eager_enable",
                   action=argparse.BooleanOptionalAction, default=False)
    p.add_argument("--progress_enable", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--plots_enable", action=argparse.BooleanOptionalAction, default=True)
    return p


def build_compare_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lead-recipes eval compare",
                                description="side-by-side table of finished runs with AES against a base run")
    p.add_argument("runs", nargs="+", help="run directories (or summary.json files)")
    p.add_argument("--base", help="base-model run (AES reference)")
    p.add_argument("--output", help="directory for compare.md/.csv/.json and the frontier plot")
    p.add_argument("--plots_enable", action=argparse.BooleanOptionalAction, default=True)
    return p


def make_backend(args, gen):
    from evaluation import backends  # noqa: PLC0415
    a = vars(args)
    tok = backends.load_tokenizer(args.tokenizer) if args.tokenizer else None
    if args.backend == "vllm":
        if not args.model:
            raise ValueError("--backend vllm needs --model")
        return backends.VLLMBackend(args.model, dtype=a["vllm.dtype"],
                                    tensor_parallel_size=a["vllm.tensor_parallel_size"],
                                    gpu_memory_utilization=a["vllm.gpu_memory_utilization"],
                                    max_model_len=a["vllm.max_model_len"],
                                    enforce_eager=a["vllm.enforce_eager_enable"], seed=gen.seed), tok
    if args.backend == "openai":
        if not args.model:
            raise ValueError("--backend openai needs --model (the served model name)")
        if a["openai.endpoint"] == "completions" and gen.chat_template_enable and tok is None:
            raise ValueError("--openai.endpoint completions with the chat template on needs --tokenizer "
                             "(or use the chat endpoint, or --no-chat_template_enable)")
        return backends.OpenAIBackend(a["openai.base_url"], args.model, endpoint=a["openai.endpoint"],
                                      api_key=a["openai.api_key"], concurrency=a["openai.concurrency"],
                                      retries=a["openai.retries"], timeout_s=a["openai.timeout_s"],
                                      tokenizer=tok), tok
    if not a["replay.path"]:
        raise ValueError("--backend replay needs --replay.path")
    return backends.ReplayBackend(a["replay.path"], tokenizer=tok), tok


def run_main(argv: list[str]) -> int:
    from evaluation import protocols, run  # noqa: PLC0415
    from evaluation.benchmarks import load_benchmarks, parse_spec  # noqa: PLC0415
    args = build_parser().parse_args(argv)
    try:
        gen = protocols.resolve(args.preset, temperature=args.temperature, top_p=args.top_p, min_p=args.min_p,
                                top_k=args.top_k, max_new_tokens=args.max_new_tokens, n=args.n, seed=args.seed,
                                prompt_template=args.prompt_template,
                                chat_template_enable=args.chat_template_enable, system_prompt=args.system_prompt)
        specs = [s.strip() for s in args.benchmarks.split(",") if s.strip()]
        benchmarks = load_benchmarks(specs, args.data_dir, args.limit, args.field_map)
        sources = {parse_spec(s)[0]: (parse_spec(s)[1] or
                                      (str(Path(args.data_dir) / f"{parse_spec(s)[0]}.jsonl") if args.data_dir
                                       else "hf-hub default")) for s in specs}
        base = run.load_summary(args.base) if args.base else None
        backend, tok = make_backend(args, gen)
        summary = run.run_eval(gen, benchmarks, backend, args.output, model=args.model, base=base,
                               budgets=args.budgets, tokenizer=tok, limit=args.limit, sources=sources,
                               progress=args.progress_enable, plots=args.plots_enable)
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        print(f"lead-recipes eval: error: {e}", file=sys.stderr)
        return 2
    avg = summary["average"]
    print(f"average accuracy {100 * avg['accuracy']:.2f}%, mean length {avg['mean_length']:.1f} tokens "
          f"over {avg['n_benchmarks']} benchmarks; report: {Path(args.output) / 'report.md'}")
    return 0


def compare_main(argv: list[str]) -> int:
    from evaluation import report, run  # noqa: PLC0415
    args = build_compare_parser().parse_args(argv)
    try:
        runs = [(Path(r).name if Path(r).is_dir() else Path(r).parent.name, run.load_summary(r)) for r in args.runs]
        base = None
        if args.base:
            bp = Path(args.base)
            base = (bp.name if bp.is_dir() else bp.parent.name, run.load_summary(args.base))
        result = report.compare(runs, base, Path(args.output) if args.output else None)
    except (ValueError, FileNotFoundError, KeyError) as e:
        print(f"lead-recipes eval compare: error: {e}", file=sys.stderr)
        return 2
    print(result["markdown"])
    for label, rep in result["aes"].items():
        if rep["overall"]["reason"]:
            print(f"{label}: AES undefined: {rep['overall']['reason']}")
    return 0


def main(argv: list[str]) -> int:
    argv = list(argv)
    if argv and argv[0] == "compare":
        return compare_main(argv[1:])
    return run_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
