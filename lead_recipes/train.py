"""`lead-recipes train`: OpenRLHF's `train_ppo_ray` with a lead-recipes method in the group step.

    lead-recipes train [train_ppo_ray flags] [--recipe.* flags] [--dry-run | --preflight]

- The flags are exactly OpenRLHF's (parsed and validated by OpenRLHF's own `train_ppo_ray` code) plus `--recipe.*`
  (lead_recipes.flags). Ours are parsed first (allow_abbrev=False, so no abbreviation can swallow an OpenRLHF flag)
  and validated before anything heavy is imported or started.
- With no OpenRLHF flags, the embedded default recipe `lead-1.5b` (launchers/recipes/lead-1.5b.yaml: LEAD on MATH
  level 3-5 with DeepSeek-R1-Distill-Qwen-1.5B) supplies them; any flags given still override it.
- `--dry-run` prints the resolved command and configuration (after OpenRLHF's validation) and exits 0.
- Otherwise a preflight checks everything checkable (OpenRLHF version and seams, GPUs, flash-attn, data, model,
  reward function grading a probe, checkpoint directory, Ray) and exits 1 naming what is missing; `--preflight`
  stops after it. Only when all pass does training start (lead_recipes.seam.run_openrlhf). Before it, a real run
  whose prompt dataset is missing builds it with the recipe's `data.prepare` if that command's source file exists.
- Preemption: while it runs, SIGUSR1 (or a first SIGTERM) requests a checkpoint at the next step boundary and a
  second SIGTERM ends it (lead_recipes.preempt); after a requested save it exits PREEMPTED_EXIT (75).
- Secrets (URL tokens, the W&B key) are masked in everything printed.

This module never imports OpenRLHF itself (the seam does), and never starts Ray before the preflight.
"""
from __future__ import annotations

import argparse
import difflib
import json
import math
import os
import re
import shlex
import sys
from dataclasses import dataclass
from types import SimpleNamespace

from lead_recipes.flags import add_recipe_flags, recipe_argv, recipe_namespace, validate_recipe
# save_request_path, saved_marker_path, write_json_atomic: also imported from here by tests/test_slurm.py's
# stand-in trainer (it honours a request as the real trainer does)
from lead_recipes.preempt import (PREEMPTED_EXIT, SaveOnSignal, save_request_path, saved_marker_path,  # noqa: F401
                                  saved_on_request, write_json_atomic)

DEFAULT_RECIPE = "lead-1.5b"
PROG = "lead-recipes train"

_URL_SECRET = re.compile(r"([?&](?:token|key|api_key|apikey|access_token|secret|password)=)[^&\s\"']+", re.I)


def mask_secrets(text: str, args=None) -> str:
    """URL query secrets (`?token=...`), the W&B key and our tokens from the environment, replaced by ***."""
    secrets = [os.environ.get(k) for k in ("LEAD_RECIPES_SERVE_TOKEN", "WANDB_API_KEY")]
    if args is not None:
        secrets.append(getattr(getattr(getattr(args, "logger", None), "wandb", None), "key", None))
    for secret in sorted({s for s in secrets if isinstance(s, str) and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, "***")
    return _URL_SECRET.sub(r"\1***", text)


class UsageError(Exception):
    """A bad command line; the message says which flag and why."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one clear line instead of argparse's page-long usage dump
        raise UsageError(message)


def _our_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, allow_abbrev=False, add_help=False,
                                     description="OpenRLHF train_ppo_ray flags plus the --recipe.* flags below.")
    parser.add_argument("-h", "--help", action="store_true", help="show this help and exit")
    parser.add_argument("--dry-run", action="store_true", help="print the resolved command and configuration, exit 0")
    parser.add_argument("--preflight", action="store_true", help="run only the preflight checks (exit 0 if all pass)")
    add_recipe_flags(parser)
    return parser


def parse_command_line(argv: list[str]):
    """Split argv into (our options, recipe namespace, OpenRLHF argv, full argv used). Bad --recipe flags raise
    UsageError here, before anything is imported or started."""
    parser = _our_parser()
    ours, rest = parser.parse_known_args(argv)
    used = list(argv)
    if not rest and not ours.help:  # no OpenRLHF flags: the embedded default recipe, then the user's flags on top
        from launchers.recipe import load_recipe
        used = load_recipe(DEFAULT_RECIPE).train_argv() + list(argv)
        ours, rest = parser.parse_known_args(used)
    known = [s for a in parser._actions for s in a.option_strings]
    for token in rest:
        flag = token.split("=", 1)[0]
        if flag.startswith("--recipe.") or flag in ("--dry_run", "--dryrun", "--pre-flight"):
            close = difflib.get_close_matches(flag, known, n=1)
            raise UsageError(f"unknown flag {flag}" + (f" (did you mean {close[0]}?)" if close else "")
                             + f"; `{PROG} --help` lists the --recipe.* flags")
    recipe = recipe_namespace(ours)
    try:
        validate_recipe(recipe)
        from lead_recipes.methods import build_method
        build_method(recipe)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return ours, recipe, rest, used


def recipe_conflicts(args) -> tuple[list[str], list[str]]:
    """(errors, warnings) about OpenRLHF settings the recipe cannot run with; all decidable from the args alone."""
    errors, warnings = [], []
    if args.algo.advantage.estimator not in ("group_norm", "dr_grpo"):
        errors.append(f"--algo.advantage.estimator {args.algo.advantage.estimator}: use group_norm (the --recipe.method "
                      "replaces its group step; other estimators add a critic or batch whitening)")
    if args.rollout.max_new_tokens is None:
        errors.append("--rollout.max_new_tokens is unset: the methods need the rollout cap (LEAD B_max, truncation)")
    urls = args.reward.remote_url or []
    if not urls or urls == ["agent"]:
        errors.append("--reward.remote_url is unset: pass lead-recipes' reward function "
                      f"({_reward_func_path()}) or a `lead-recipes serve` URL; the seam reads extra_logs['correct']")
    elif len(urls) > 1:
        warnings.append("several --reward.remote_url values: OpenRLHF sends each one-sample request to the first "
                        "URL only; use one URL (or a load balancer)")
    if args.ckpt.disable_ds and (args.ckpt.load_enable or args.ckpt.save_steps not in (-1, float("inf"))):
        (errors if args.ckpt.load_enable else warnings).append(
            "--ckpt.disable_ds: the method's controller state lives in DeepSpeed checkpoints' client_states, so a "
            "resume would restart it; drop --ckpt.disable_ds")
    if args.reward.overlong_buffer_len is not None or args.reward.stop_properly_penalty_coef is not None:
        warnings.append("DAPO overlong / stop-properly penalty on: its per-sample reward change is added to the "
                        "method's advantage (un-normalised), logged as recipe/length_penalty_mean")
    b_max = getattr(getattr(args.recipe, "lead", None), "b_max", None)
    if args.recipe.method == "lead" and b_max and args.rollout.max_new_tokens and b_max != args.rollout.max_new_tokens:
        warnings.append(f"--recipe.lead.b_max {b_max} differs from --rollout.max_new_tokens "
                        f"{args.rollout.max_new_tokens}")
    return errors, warnings


def _reward_func_path() -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "reward_func.py")


def plain(x):
    """A nested namespace as JSON-able data (inf/nan as strings)."""
    if isinstance(x, (SimpleNamespace, argparse.Namespace)):
        return {k: plain(v) for k, v in sorted(vars(x).items())}
    if isinstance(x, dict):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set)):
        return [plain(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return x if isinstance(x, (str, int, float, bool)) or x is None else str(x)


def dry_run_text(openrlhf_argv: list[str], recipe, args, warnings: list[str]) -> str:
    command = ["lead-recipes", "train", *openrlhf_argv, *recipe_argv(recipe, only_changed=False)]
    lines = ["# resolved command", shlex.join(command), "",
             "# equivalent OpenRLHF entry point (the recipe rides along as args.recipe)",
             shlex.join([sys.executable, "-m", "openrlhf.cli.train_ppo_ray", *openrlhf_argv]), "",
             "# configuration after OpenRLHF's validation", json.dumps(plain(args), indent=2)]
    lines += [f"# warning: {w}" for w in warnings]
    return "\n".join(lines)


def _help(parser: argparse.ArgumentParser) -> str:
    text = parser.format_help()
    try:
        from launchers.recipe import openrlhf_parser
        text += "\nOpenRLHF train_ppo_ray flags (installed version):\n" + openrlhf_parser("train").format_help()
    except Exception as exc:  # noqa: BLE001 - help must still print without the training stack
        text += f"\n(OpenRLHF's flags could not be listed: {exc})\n"
    return text


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


def required_gpus(args) -> int:
    """GPUs this layout asks Ray for (train_ppo_ray's placement: colocated groups share the actor's GPUs)."""
    actor = args.actor.num_nodes * args.actor.num_gpus_per_node
    if args.train.colocate_all:
        return actor
    ref = 0 if args.train.colocate_actor_ref or args.algo.kl.init_coef <= 0 else args.ref.num_nodes * args.ref.num_gpus_per_node
    vllm = (args.vllm.num_engines or 0) * args.vllm.tensor_parallel_size
    return actor + ref + vllm


def _check_gpus(args) -> Check:
    import torch
    need = required_gpus(args)
    have = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if have >= need or (have and args.actor.num_nodes > 1):  # multi-node: Ray's count below is the real check
        return Check("gpu", True, f"{have} CUDA GPU(s) visible here, layout needs {need}")
    why = "no CUDA GPU visible (torch %s, cuda available: %s)" % (torch.__version__, torch.cuda.is_available())
    return Check("gpu", False, f"{why}; this layout needs {need} GPU(s) "
                 f"(actor {args.actor.num_nodes}x{args.actor.num_gpus_per_node}, colocate_all={args.train.colocate_all})")


def _check_flash_attn(args) -> Check:
    if "flash" not in (args.ds.attn_implementation or "") and not args.ds.packing_samples:
        return Check("flash-attn", True, f"not needed (--ds.attn_implementation {args.ds.attn_implementation})")
    import importlib.util
    spec = importlib.util.find_spec("flash_attn_2_cuda")
    if spec is None or spec.origin is None:
        return Check("flash-attn", False, "flash_attn_2_cuda is not installed (pip install flash-attn==2.8.3 on the GPU node)")
    if spec.origin.endswith(".py"):
        return Check("flash-attn", False, f"{spec.origin} is the CPU stub, not the CUDA build "
                     "(pip install flash-attn==2.8.3 on the GPU node, or --ds.attn_implementation sdpa without packing)")
    return Check("flash-attn", True, spec.origin)


def _check_data(flag: str, spec: str | None, input_key: str, label_key: str | None) -> Check:
    if not spec:
        return Check(flag, True, "not set")
    for item in spec.split(","):
        path = item.split("@")[0].strip()
        if not os.path.exists(path):
            hint = ""
            if flag == "data":
                hint = " (build it with `lead-recipes data build ...`)"
            looks_local = path.startswith((".", "/", "~")) or path.endswith((".json", ".jsonl", ".parquet"))
            what = "file does not exist" if looks_local else "not a local path; a hub dataset id is not resolvable offline"
            return Check(flag, False, f"{path}: {what}{hint}")
        if os.path.isfile(path) and path.endswith((".json", ".jsonl")):
            try:
                with open(path, encoding="utf-8") as f:
                    row = json.loads(f.readline())
            except (OSError, ValueError) as exc:
                return Check(flag, False, f"{path}: unreadable first row ({exc})")
            absent = [k for k in (input_key, label_key) if k and k not in row]
            if absent:
                return Check(flag, False, f"{path}: first row lacks key(s) {absent} (--data.input_key/--data.label_key)")
    return Check(flag, True, spec)


def _check_model(name: str | None) -> Check:
    if not name:
        return Check("model", False, "--actor.model_name_or_path is unset")
    if os.path.isdir(name):
        ok = os.path.exists(os.path.join(name, "config.json"))
        return Check("model", ok, f"{name}" + ("" if ok else ": directory has no config.json"))
    try:
        from huggingface_hub import try_to_load_from_cache
        cached = try_to_load_from_cache(name, "config.json")
    except Exception:  # noqa: BLE001 - an invalid repo id is reported below like a missing one
        cached = None
    if isinstance(cached, str):
        return Check("model", True, f"{name} (local Hugging Face cache)")
    return Check("model", False, f"{name}: not a local directory and not in the local Hugging Face cache; not "
                 "resolvable offline (download it first, e.g. `hf download {name}`, or pass a local path)".replace("{name}", name))


_PROBE = ("What is 1 + 1?", "Adding gives two. </think> The answer is $\\boxed{2}$.", "2")


def _check_reward(urls) -> Check:
    from lead_recipes.grading import REWARD_LOG_KEYS
    if not urls:
        return Check("reward", False, "--reward.remote_url is unset")
    url = urls[0]
    prompt, response, label = _PROBE
    try:
        if url.endswith(".py"):
            out = _probe_reward_file(url, prompt, response, label)
        else:
            out = _probe_reward_url(url, prompt, response, label)
    except Exception as exc:  # noqa: BLE001 - any failure here is what the user must see
        return Check("reward", False, f"{url}: probe failed: {type(exc).__name__}: {exc}")
    rewards = [float(r) for r in out.get("rewards", [])]
    keys = tuple((out.get("extra_logs") or {}).keys())
    if rewards != [1.0]:
        return Check("reward", False, f"{url}: a correct probe answer got rewards {rewards} (expected [1.0])")
    if keys != REWARD_LOG_KEYS:
        return Check("reward", False, f"{url}: extra_logs keys {list(keys)} differ from {list(REWARD_LOG_KEYS)}")
    return Check("reward", True, f"{url}: graded a probe correctly, extra_logs keys match")


def _probe_reward_file(path: str, prompt: str, response: str, label: str) -> dict:
    import concurrent.futures
    import importlib.util
    spec = importlib.util.spec_from_file_location("lead_recipes_reward_probe", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # OpenRLHF calls reward_func through asyncio.to_thread: probe it off the main thread too
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(module.reward_func, [prompt + response], [prompt], [label]).result(timeout=120)


def _probe_reward_url(url: str, prompt: str, response: str, label: str) -> dict:
    import urllib.request
    health = url.rsplit("/", 1)[0] + "/health" if url.count("/") > 2 else url + "/health"
    with urllib.request.urlopen(health, timeout=10) as r:  # noqa: S310 - the user's own reward server
        if r.status != 200:
            raise RuntimeError(f"GET {health} returned {r.status}")
    body = json.dumps({"query": [prompt + response], "prompts": [prompt], "labels": [label]}).encode()
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:  # noqa: S310
        return json.loads(r.read())


def _check_ckpt_dir(path: str) -> Check:
    probe = os.path.abspath(path)
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    ok = os.access(probe, os.W_OK)
    return Check("ckpt", ok, f"{path}" + ("" if ok else f": {probe} is not writable"))


def _check_ray(args) -> Check:
    import ray
    address = os.environ.get("RAY_ADDRESS")
    try:
        ray.init(address=address or None, include_dashboard=False, log_to_driver=False,
                 ignore_reinit_error=True)
        gpus = int(ray.cluster_resources().get("GPU", 0))
    except Exception as exc:  # noqa: BLE001
        return Check("ray", False, f"Ray did not start: {type(exc).__name__}: {exc}")
    finally:
        ray.shutdown()
    need = required_gpus(args)
    where = f"cluster at {address}" if address else "local Ray"
    if gpus < need:
        return Check("ray", False, f"{where} started but offers {gpus} GPU(s); the layout needs {need}")
    return Check("ray", True, f"{where} started, {gpus} GPU(s)")


def run_preflight(args) -> list[Check]:
    """Every check, cheap ones first; none stops the others, so the report names everything missing at once."""
    from lead_recipes import seam
    checks = []
    try:
        seam.check_openrlhf()
        checks.append(Check("openrlhf", True, f"openrlhf {seam.SUPPORTED_OPENRLHF}, patched signatures match"))
    except seam.OpenRLHFMismatch as exc:
        checks.append(Check("openrlhf", False, str(exc)))
    checks += [_check_gpus(args), _check_flash_attn(args),
               _check_data("data", args.data.prompt_dataset, args.data.input_key, args.data.label_key),
               _check_data("eval data", args.eval.dataset, args.data.input_key, args.data.label_key),
               _check_model(args.actor.model_name_or_path), _check_reward(args.reward.remote_url),
               _check_ckpt_dir(args.ckpt.path), _check_ray(args)]
    return checks


def report(checks: list[Check]) -> str:
    return "\n".join(f"[{'ok' if c.ok else 'MISSING':>7}] {c.name:<10} {c.detail}" for c in checks)


def main(argv: list[str]) -> int:
    try:
        ours, recipe, openrlhf_argv, used = parse_command_line(list(argv))
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    if ours.help:
        print(_help(_our_parser()))
        return 0

    from lead_recipes import seam  # imports OpenRLHF (several seconds); only after our own flags are valid
    try:
        args = seam.run_openrlhf(openrlhf_argv, recipe, resolve_only=True)
    except seam.OpenRLHFMismatch as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # OpenRLHF's argparse already printed the reason
        return int(exc.code or 2) if isinstance(exc.code, int) else 2
    except AssertionError as exc:
        print(f"{PROG}: error: OpenRLHF rejected the configuration: {exc}", file=sys.stderr)
        return 2
    errors, warnings = recipe_conflicts(args)
    if ours.dry_run:
        print(mask_secrets(dry_run_text(openrlhf_argv, recipe, args, warnings + [f"ERROR {e}" for e in errors]), args))
        if errors:  # still printed in full, but a dry run of an unrunnable configuration is not a success
            print(mask_secrets(f"{PROG}: error: " + "\n  ".join(errors), args), file=sys.stderr)
        return 2 if errors else 0
    for w in warnings:
        print(mask_secrets(f"{PROG}: warning: {w}", args), file=sys.stderr)
    if errors:
        print(mask_secrets(f"{PROG}: error: " + "\n  ".join(errors), args), file=sys.stderr)
        return 2

    with SaveOnSignal(args.recipe_save_request).installed():
        return _preflight_and_train(ours, recipe, openrlhf_argv, used, argv, args, seam)


def _dataset_paths(spec: str | None) -> list[str]:
    return [os.path.abspath(p.split("@")[0].strip()) for p in (spec or "").split(",") if p.strip()]


def _prepare_of(prompt_dataset: str | None, embedded: bool) -> tuple[str, list[str]] | None:
    """(recipe name, its `data.prepare` argv) that builds the prompt data: the embedded default recipe's, else that
    of the first recipe whose prompt dataset is this path."""
    from launchers.recipe import load_recipe, recipe_names
    wanted = set(_dataset_paths(prompt_dataset))
    for name in [DEFAULT_RECIPE] if embedded else recipe_names():
        try:
            recipe = load_recipe(name)
        except ValueError:  # a broken recipe file is the launcher's to report, not this hint's
            continue
        path = recipe.openrlhf.get("data.prompt_dataset")
        if recipe.data.get("prepare") and (embedded or (path and os.path.abspath(str(path)) in wanted)):
            return name, [str(a) for a in recipe.data["prepare"]]
    return None


def _flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv[:-1] else None


def prepare_hint(prompt_dataset: str | None, embedded: bool) -> str | None:
    """The `lead-recipes data ...` command that builds the missing prompt data, and where its source is expected
    when that is missing too (`${sources}` = $LEAD_RECIPES_SOURCES, default ./data/sources)."""
    found = _prepare_of(prompt_dataset, embedded)
    if found is None:
        return None
    name, prepare = found
    hint = f"{PROG}: build the prompt data (recipe {name}) with: {shlex.join(['lead-recipes', 'data', *prepare])}"
    source = _flag(prepare, "--source")
    if source and os.path.isabs(source) and not os.path.exists(source):
        hint += (f"\n{PROG}: its source file {os.path.basename(source)} is missing: expected at {source} (the "
                 "sources directory is $LEAD_RECIPES_SOURCES, default ./data/sources)")
    return hint


def build_missing_data(prompt_dataset: str | None, embedded: bool) -> bool:
    """A real run whose prompt dataset is missing builds it first, in-process (lead_recipes.data.main), when the
    recipe's `data.prepare` is a `build` that writes exactly that missing path from a source file that exists.
    True if it built it; on failure its partial output is removed and the preflight reports the data missing."""
    missing = [p for p in _dataset_paths(prompt_dataset) if not os.path.exists(p)]
    found = _prepare_of(prompt_dataset, embedded) if missing else None
    if found is None:
        return False
    name, prepare = found
    source, out = _flag(prepare, "--source"), _flag(prepare, "--out")
    if prepare[0] != "build" or not source or not os.path.isfile(source) or not out or os.path.abspath(out) not in missing:
        return False
    print(f"{PROG}: prompt data {out} is missing; building it (recipe {name}) from {source}: "
          f"{shlex.join(['lead-recipes', 'data', *prepare])}", flush=True)
    from lead_recipes import data
    try:
        rc = data.main(list(prepare))
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - reported; the preflight then names the missing data
        rc = f"{type(exc).__name__}: {exc}"
    sys.stdout.flush()
    if rc == 0 and os.path.exists(out):
        return True
    if os.path.exists(out):  # ours and incomplete: it did not exist before
        os.remove(out)
    print(f"{PROG}: building the prompt data failed ({rc})", file=sys.stderr, flush=True)
    return False


def _preflight_and_train(ours, recipe, openrlhf_argv, used, argv, args, seam) -> int:
    if not ours.preflight:  # a real run builds its missing prompt data when the source is there
        build_missing_data(args.data.prompt_dataset, embedded=len(used) != len(argv))
    checks = run_preflight(args)
    print(mask_secrets(report(checks), args), flush=True)
    if any(not c.ok for c in checks):
        missing = "; ".join(f"{c.name}: {c.detail}" for c in checks if not c.ok)
        print(mask_secrets(f"{PROG}: cannot start training, missing: {missing}", args), file=sys.stderr)
        if any(c.name == "data" and not c.ok for c in checks):
            hint = prepare_hint(args.data.prompt_dataset, embedded=len(used) != len(argv))
            if hint:
                print(hint, file=sys.stderr)
        return 1
    if ours.preflight:
        return 0
    try:
        seam.run_openrlhf(openrlhf_argv, recipe)
    except Exception as exc:  # Ray re-raises the trainer's SavedOnRequest as a RayTaskError subclass of it
        saved = saved_on_request(exc)
        if saved is None:
            raise
        print(f"{PROG}: checkpoint {saved.tag} saved on request at global_step {saved.step}; stopped. Resume with "
              "the same command plus --ckpt.load_enable", file=sys.stderr)
        return PREEMPTED_EXIT
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
