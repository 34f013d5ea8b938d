#!/usr/bin/env bash
# GPU smoke test for `lead-recipes train` (needs >= 1 CUDA GPU, except with --smoke.dry_run_enable).
#
# 1. Every registered method (launchers/gpu_smoke.py methods): two training steps of a small model, actor,
#    reference and vLLM colocated, a checkpoint every step, then a resume from the step-2 checkpoint for two more.
# 2. Every GPU path of the shipped recipes (gpu_smoke.py PATHS): lead for four steps on that path, then the
#    weight-sync check: |train/vllm_kl| < smoke_check.py's VLLM_KL_BOUND after every step that followed a real
#    gradient. tp2, non-colocated and async need >= 2 GPUs and are skipped, with a line, on one.
# `smoke_check.py check` checks what each run wrote. One ok/FAIL/skip line per check, then a summary (versions,
# GPUs, every line) to paste into a bug report; non-zero on any failure.
#
# Usage: launchers/gpu_smoke.sh [--smoke.model ID_OR_PATH] [--smoke.gpus N] [--smoke.workdir DIR]
#                               [--smoke.methods "lead leash ..."] [--smoke.paths "plain packing ..."]
#                               [--smoke.dry_run_enable]
#   --smoke.model           HF id or local path (default Qwen/Qwen2.5-0.5B-Instruct: small, and right often enough
#                           on sums for the correctness-gated length terms to move)
#   --smoke.gpus            GPUs on this node to use (default: all visible; 2 with --smoke.dry_run_enable)
#   --smoke.workdir         where data, checkpoints and logs go (default ./runs/gpu_smoke)
#   --smoke.methods         space-separated subset of the methods (default: every registered one; "" for none)
#   --smoke.paths           space-separated subset of the paths (default: all; "" for none)
#   --smoke.dry_run_enable  no GPU needed: every train command through `lead-recipes train --run.dry_run_enable`
#                           (OpenRLHF's own validation) and every run's data through the preflight's data check,
#                           nothing trained or downloaded
# Options take `--name VALUE` or `--name=VALUE`. Run from a checkout installed on this node with
# `bash launchers/bootstrap.sh setup` (or `LEAD_RECIPES_REUSE_GPU_STACK=1 bash launchers/bootstrap.sh setup`; a plain
# pip install builds flash-attn wrongly: README.md#on-a-gpu-node). See docs/training.md#on-gpu-nodes.
set -euo pipefail

MODEL="Qwen/Qwen2.5-0.5B-Instruct"
GPUS=""
WORK="runs/gpu_smoke"
METHODS="all"
PATHS_GIVEN="all"
DRY_RUN=0
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="${PYTHON:-python}"

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; }  # the header

while [[ $# -gt 0 ]]; do
  [[ $1 == --?*=* ]] && set -- "${1%%=*}" "${1#*=}" "${@:2}"   # --name=VALUE, as argparse takes it
  case "$1" in
    --smoke.model) MODEL="$2"; shift 2 ;;
    --smoke.gpus) GPUS="$2"; shift 2 ;;
    --smoke.workdir) WORK="$2"; shift 2 ;;
    --smoke.methods) METHODS="$2"; shift 2 ;;
    --smoke.paths) PATHS_GIVEN="$2"; shift 2 ;;
    --smoke.dry_run_enable) DRY_RUN=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu_smoke.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

# the registry's methods and PATHS, or the ones given, each checked before anything starts ("" runs none)
names() {  # $1 methods|paths, $2 the names given ("all": every one)
  local given=()
  [[ "$2" != all ]] && read -r -a given <<<"$2"
  # ${a[@]+"${a[@]}"}: an empty array is "unbound" under set -u in bash < 4.4
  if [[ "$2" == all || ${#given[@]} -gt 0 ]]; then "$PY" "$HERE/gpu_smoke.py" "$1" ${given[@]+"${given[@]}"}; fi
}
METHODS="$(names methods "$METHODS")" || exit 2
PATH_NEEDS="$(names paths "$PATHS_GIVEN")" || exit 2
echo "gpu_smoke.sh: methods: $METHODS"
echo "gpu_smoke.sh: paths: $(for p in $PATH_NEEDS; do printf '%s ' "${p%%:*}"; done)"

if [[ -z "$GPUS" && "$DRY_RUN" -eq 1 ]]; then
  GPUS=2
elif [[ -z "$GPUS" ]]; then
  GPUS="$("$PY" -c 'import torch; print(torch.cuda.device_count())')"
fi
if [[ "$GPUS" -lt 1 ]]; then
  echo "gpu_smoke.sh: no CUDA GPU visible; this smoke test needs at least one" >&2
  exit 1
fi

# the preflight accepts a local path or a model already in the Hugging Face cache (it never goes online)
if [[ ! -d "$MODEL" && "$DRY_RUN" -eq 0 ]]; then
  "$PY" -c 'import sys; from huggingface_hub import snapshot_download; snapshot_download(sys.argv[1])' "$MODEL"
fi

mkdir -p "$WORK"
WORK="$(cd "$WORK" && pwd)"
RESULTS="$WORK/results.txt"
: >"$RESULTS"
REWARD="$("$PY" -c 'import lead_recipes.reward.reward_func as m; print(m.__file__)')"
failed=0
say() { echo "$1" | tee -a "$RESULTS"; [[ "$1" != FAIL* ]] || failed=1; }
says() { local line; while IFS= read -r line; do say "$line"; done <<<"$1"; }

# $1 method, $2 path, $3 episodes (one episode = 2 steps), remaining: extra flags. The command line itself comes
# from the driver shared with the CPU end-to-end tests (gpu_smoke.py train_argv, profile "gpu").
train() {
  local method="$1" path="$2" episodes="$3" run="$WORK/$2/$1"
  shift 3
  local dry=()
  [[ "$DRY_RUN" -eq 1 ]] && dry=(--run.dry_run_enable)
  "$PY" "$HERE/gpu_smoke.py" train --smoke.profile gpu --smoke.method "$method" --smoke.model "$MODEL" \
    --smoke.reward "$REWARD" --smoke.data "$run/prompts.jsonl" --smoke.run "$run" --smoke.path "$path" \
    --smoke.episodes "$episodes" --smoke.gpus "$GPUS" -- "$@" ${dry[@]+"${dry[@]}"}
}

# $1 label, remaining: a command whose stdout is ok/FAIL lines; a non-zero exit without a FAIL line is one too
lines() {
  local label="$1" out rc=0
  shift
  out="$("$@")" || rc=$?
  [[ -z "$out" ]] || says "$out"
  [[ "$rc" -eq 0 || "$out" == *FAIL* ]] || say "FAIL $label: $(basename "$2") exited $rc (its error is above)"
  return "$rc"
}

# $1 method, $2 path: a fresh run directory with its prompts, which must pass the preflight's data check
prepare() {
  local run="$WORK/$2/$1"
  rm -rf "$run"
  mkdir -p "$run"
  lines "$1 data" "$PY" "$HERE/gpu_smoke.py" data "$run/prompts.jsonl" --smoke.method "$1" --smoke.path "$2" \
    --smoke.gpus "$GPUS"
}

# $1 label, $2 log, remaining: train's arguments. Whether the command ran (or, dry, passed validation).
run_ok() {
  local label="$1" log="$2"
  shift 2
  if ! train "$@" >"$log" 2>&1; then
    say "FAIL $label: training exited non-zero (tail of $log):"; tail -n 30 "$log"; return 1
  fi
  [[ "$DRY_RUN" -eq 0 ]] || say "ok $label: the command passed OpenRLHF's validation (dry run, $log)"
}

for method in $METHODS; do
  run="$WORK/plain/$method"
  echo "== $method: 2 steps"
  prepare "$method" plain || continue
  run_ok "$method" "$run/train.log" "$method" plain 1 || continue
  if [[ "$DRY_RUN" -eq 0 ]]; then
    lines "$method" "$PY" "$HERE/smoke_check.py" check "$run" "$method" --smoke.steps 1,2 || true
  fi
  echo "== $method: resume from global_step2, 2 more steps"
  run_ok "$method resume" "$run/train.log.resume" "$method" plain 2 --ckpt.load_enable || continue
  [[ "$DRY_RUN" -eq 0 ]] || continue
  if ! grep -q "lead-recipes: restored $method state at global_step 2" "$run/train.log.resume"; then
    say "FAIL $method resume: the resumed run did not report restoring the recipe state"
  fi
  lines "$method resume" "$PY" "$HERE/smoke_check.py" check "$run" "$method" --smoke.steps 3,4 \
    --smoke.resumed_from 2 || true
done

for item in $PATH_NEEDS; do
  path="${item%%:*}" need="${item#*:}"
  if [[ "$GPUS" -lt "$need" ]]; then
    say "skip $path: needs >= $need GPUs (vLLM tensor parallel 2, or vLLM on GPUs of its own), $GPUS used"
    continue
  fi
  echo "== path $path: lead, 4 steps"
  prepare lead "$path" || continue
  run_ok "$path (lead)" "$WORK/$path/lead/train.log" lead "$path" 2 || continue
  if [[ "$DRY_RUN" -eq 0 ]]; then
    lines "$path (lead)" "$PY" "$HERE/smoke_check.py" check "$WORK/$path/lead" lead --smoke.steps 1,2,3,4 \
      --smoke.path "$path" || true
  fi
done

"$PY" "$HERE/smoke_check.py" summary "$RESULTS" --smoke.model "$MODEL" || true
if [[ "$failed" -ne 0 ]]; then
  echo "gpu_smoke.sh: FAILED (logs under $WORK)"
  exit 1
fi
echo "gpu_smoke.sh: all checks passed$([[ "$DRY_RUN" -eq 1 ]] && echo ' (dry run)') (logs under $WORK)"
