#!/usr/bin/env bash
# GPU smoke test for `lead-recipes train` (needs >= 1 CUDA GPU, except with --smoke.dry_run_enable).
#
# For every registered method (launchers/gpu_smoke.py methods): two training steps of a small model, actor,
# reference and vLLM colocated, a checkpoint every step, then a resume from the step-2 checkpoint for two more
# steps; `gpu_smoke.py check` then checks what each run wrote. One ok/FAIL line per check; non-zero on any failure.
#
# Usage: launchers/gpu_smoke.sh [--smoke.model ID_OR_PATH] [--smoke.gpus N] [--smoke.workdir DIR]
#                               [--smoke.methods "lead leash ..."] [--smoke.dry_run_enable]
#   --smoke.model           HF id or local path (default Qwen/Qwen2.5-0.5B-Instruct: small, and right often enough
#                           on sums for the correctness-gated length terms to move)
#   --smoke.gpus            GPUs on this node to use (default: all visible; 1 with --smoke.dry_run_enable)
#   --smoke.workdir         where data, checkpoints and logs go (default ./runs/gpu_smoke)
#   --smoke.methods         space-separated subset of the methods (default: every registered one)
#   --smoke.dry_run_enable  no GPU needed: each method's two train commands through `lead-recipes train
#                           --run.dry_run_enable` (OpenRLHF's own validation), nothing trained or downloaded
# Options take `--name VALUE` or `--name=VALUE`. Run from a checkout with the project installed
# (`launchers/bootstrap.sh setup` or `pip install -e .[train]`). See docs/training.md#on-gpu-nodes.
set -euo pipefail

MODEL="Qwen/Qwen2.5-0.5B-Instruct"
GPUS=""
WORK="runs/gpu_smoke"
METHODS=""
DRY_RUN=0
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="${PYTHON:-python}"

usage() { sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

while [[ $# -gt 0 ]]; do
  [[ $1 == --?*=* ]] && set -- "${1%%=*}" "${1#*=}" "${@:2}"   # --name=VALUE, as argparse takes it
  case "$1" in
    --smoke.model) MODEL="$2"; shift 2 ;;
    --smoke.gpus) GPUS="$2"; shift 2 ;;
    --smoke.workdir) WORK="$2"; shift 2 ;;
    --smoke.methods) METHODS="$2"; shift 2 ;;
    --smoke.dry_run_enable) DRY_RUN=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu_smoke.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

# the registry's methods, or the ones given, each checked against it before anything starts
read -r -a CHOSEN <<<"$METHODS"
METHODS="$("$PY" "$HERE/gpu_smoke.py" methods "${CHOSEN[@]}")" || exit 2
echo "gpu_smoke.sh: methods: $METHODS"

if [[ -z "$GPUS" && "$DRY_RUN" -eq 1 ]]; then
  GPUS=1
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
REWARD="$("$PY" -c 'import lead_recipes.reward.reward_func as m; print(m.__file__)')"
"$PY" "$HERE/gpu_smoke.py" data "$WORK/prompts.jsonl" --smoke.profile gpu

# $1 method, $2 episodes, remaining: extra flags. One episode = 2 steps. The command line itself comes from the
# driver shared with the CPU end-to-end tests (gpu_smoke.py train_argv, profile "gpu").
train() {
  local method="$1" episodes="$2"
  shift 2
  local dry=()
  [[ "$DRY_RUN" -eq 1 ]] && dry=(--run.dry_run_enable)
  "$PY" "$HERE/gpu_smoke.py" train --smoke.profile gpu --smoke.method "$method" --smoke.model "$MODEL" \
    --smoke.reward "$REWARD" --smoke.data "$WORK/prompts.jsonl" --smoke.run "$WORK/$method" \
    --smoke.episodes "$episodes" --smoke.gpus "$GPUS" -- "$@" "${dry[@]}"
}

failed=0
for method in $METHODS; do
  rm -rf "${WORK:?}/$method"
  mkdir -p "$WORK/$method"
  log="$WORK/$method/train.log"
  echo "== $method: 2 steps"
  if ! train "$method" 1 >"$log" 2>&1; then
    echo "FAIL $method: training exited non-zero (tail of $log):"; tail -n 30 "$log"; failed=1; continue
  fi
  if [[ "$DRY_RUN" -eq 1 ]]; then
    echo "ok $method: the train command passed OpenRLHF's validation (dry run, $log)"
  else
    "$PY" "$HERE/gpu_smoke.py" check "$WORK/$method" "$method" --smoke.steps 1,2 || failed=1
  fi
  echo "== $method: resume from global_step2, 2 more steps"
  if ! train "$method" 2 --ckpt.load_enable >"$log.resume" 2>&1; then
    echo "FAIL $method: resumed training exited non-zero (tail of $log.resume):"; tail -n 30 "$log.resume"
    failed=1; continue
  fi
  if [[ "$DRY_RUN" -eq 1 ]]; then
    echo "ok $method: the resume command passed OpenRLHF's validation (dry run, $log.resume)"; continue
  fi
  if ! grep -q "lead-recipes: restored $method state at global_step 2" "$log.resume"; then
    echo "FAIL $method: the resumed run did not report restoring the recipe state"; failed=1
  fi
  "$PY" "$HERE/gpu_smoke.py" check "$WORK/$method" "$method" --smoke.steps 3,4 --smoke.resumed_from 2 || failed=1
done

if [[ "$failed" -ne 0 ]]; then
  echo "gpu_smoke.sh: FAILED (logs under $WORK)"
  exit 1
fi
echo "gpu_smoke.sh: all methods passed$([[ "$DRY_RUN" -eq 1 ]] && echo ' (dry run)') (logs under $WORK)"
