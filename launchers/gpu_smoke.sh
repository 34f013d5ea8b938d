#!/usr/bin/env bash
# GPU smoke test for `lead-recipes train` (needs >= 1 CUDA GPU; cannot run on a CPU-only machine).
#
# For every method: two training steps of a small model with --train.colocate_all (actor, reference and vLLM share
# the GPUs), checkpoints every step, then a resume from the step-2 checkpoint for two more steps. After each run
# launchers/gpu_smoke.py checks what the run wrote: recipe stats in TensorBoard at every step, the method's state in
# each DeepSpeed checkpoint's client_states["recipe"], a stateful controller (LEAD, Leash) that moved, and a resume
# that continued the controller instead of restarting it. Prints one ok/FAIL line per check; exits non-zero on any
# failure.
#
# Usage: launchers/gpu_smoke.sh [--model ID_OR_PATH] [--gpus N] [--workdir DIR] [--methods "lead leash ..."]
#   --model    HF id or local path (default Qwen/Qwen2.5-0.5B-Instruct: small, and right often enough on sums
#              for the correctness-gated length terms to move)
#   --gpus     GPUs on this node to use (default: all visible)
#   --workdir  where data, checkpoints and logs go (default ./runs/gpu_smoke)
#   --methods  space-separated subset of the methods (default: all seven)
# Run from a checkout with the project installed (`launchers/bootstrap.sh setup` or `pip install -e .[train]`).
set -euo pipefail

MODEL="Qwen/Qwen2.5-0.5B-Instruct"
GPUS=""
WORK="runs/gpu_smoke"
METHODS="grpo grpo-scalarized gdpo lead grpo-lead leash shorter-better"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="${PYTHON:-python}"

usage() { sed -n '2,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) MODEL="$2"; shift 2 ;;
    --gpus) GPUS="$2"; shift 2 ;;
    --workdir) WORK="$2"; shift 2 ;;
    --methods) METHODS="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu_smoke.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

if [[ -z "$GPUS" ]]; then
  GPUS="$("$PY" -c 'import torch; print(torch.cuda.device_count())')"
fi
if [[ "$GPUS" -lt 1 ]]; then
  echo "gpu_smoke.sh: no CUDA GPU visible; this smoke test needs at least one" >&2
  exit 1
fi

# the preflight accepts a local path or a model already in the Hugging Face cache (it never goes online)
if [[ ! -d "$MODEL" ]]; then
  "$PY" -c 'import sys; from huggingface_hub import snapshot_download; snapshot_download(sys.argv[1])' "$MODEL"
fi

mkdir -p "$WORK"
WORK="$(cd "$WORK" && pwd)"
REWARD="$("$PY" -c 'import lead_recipes.grading.reward_func as m; print(m.__file__)')"
"$PY" "$HERE/gpu_smoke.py" data "$WORK/prompts.jsonl" --profile gpu

# $1 method, $2 episodes, remaining: extra flags. One episode = 2 steps. The command line itself comes from the
# driver shared with the CPU end-to-end tests (gpu_smoke.py train_argv, profile "gpu").
train() {
  local method="$1" episodes="$2"
  shift 2
  "$PY" "$HERE/gpu_smoke.py" train --profile gpu --method "$method" --model "$MODEL" --reward "$REWARD" \
    --data "$WORK/prompts.jsonl" --run "$WORK/$method" --episodes "$episodes" --gpus "$GPUS" -- "$@"
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
  "$PY" "$HERE/gpu_smoke.py" check "$WORK/$method" "$method" --steps 1,2 || failed=1
  echo "== $method: resume from global_step2, 2 more steps"
  if ! train "$method" 2 --ckpt.load_enable >"$log.resume" 2>&1; then
    echo "FAIL $method: resumed training exited non-zero (tail of $log.resume):"; tail -n 30 "$log.resume"
    failed=1; continue
  fi
  if ! grep -q "lead-recipes: restored $method state at global_step 2" "$log.resume"; then
    echo "FAIL $method: the resumed run did not report restoring the recipe state"; failed=1
  fi
  "$PY" "$HERE/gpu_smoke.py" check "$WORK/$method" "$method" --steps 3,4 --resumed-from 2 || failed=1
done

if [[ "$failed" -ne 0 ]]; then
  echo "gpu_smoke.sh: FAILED (logs under $WORK)"
  exit 1
fi
echo "gpu_smoke.sh: all methods passed (logs under $WORK)"
