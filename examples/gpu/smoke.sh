#!/usr/bin/env bash
# The first thing to run on new hardware (README.md here, "Smoke test"): the shortest GACA run on ALFWorld that
# exercises every feature of the GPU launch on one node -- colocated actor/reference/vLLM engines in OpenRLHF's
# placement group, vLLM and DeepSpeed sleep/wake, ZeRO-3, the k3 KL loss against the reference model, the entropy
# bonus, env workers created from inside the engines, the weight sync and its log-prob probe, mini-batches in step
# samples, DeepSpeed + HF checkpoints -- for 2 iterations, then a PASS/FAIL summary (examples/gpu/smoke_check.py).
#   bash examples/gpu/smoke.sh                      # GPU node: Qwen2.5-0.5B-Instruct on N_GPUS (default 8) GPUs
#   REHEARSAL=1 bash examples/gpu/smoke.sh          # the same launch path on a CPU machine (tiny model, 2 ranks)
# Every setting of _common.sh can be overridden (MODEL, N_GPUS, VLLM_MEM, ...); SAVE_PATH default outputs/smoke.
# Exit status: 0 only when training finished and every check passed.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
CACHE="${GACA_CACHE:-${GACA_CACHE_DIR:-$HOME/.cache/gaca_openrlhf}}"
export SAVE_PATH="${SAVE_PATH:-outputs/smoke}"
if [[ "${REHEARSAL:-0}" != "1" ]]; then  # GPU sizes (the rehearsal's own defaults are in _common.sh)
  export MODEL="${MODEL:-Qwen/Qwen2.5-0.5B-Instruct}" N_GPUS="${N_GPUS:-8}"
  export ITERATIONS="${ITERATIONS:-2}" TASKS_PER_ITER="${TASKS_PER_ITER:-$N_GPUS}" ROLLOUTS="${ROLLOUTS:-4}"
  export MAX_STEPS="${MAX_STEPS:-5}" MAX_NEW_TOKENS="${MAX_NEW_TOKENS:-128}" SAVE_STEPS="${SAVE_STEPS:-1}"
  export MICRO_BATCH="${MICRO_BATCH:-2}"
  export MINI_BATCH_STEPS="${MINI_BATCH_STEPS:-$((MICRO_BATCH * N_GPUS))}"  # several updates per iteration
  export LR="${LR:-1e-5}"  # visible KL after the first update within 2 iterations
  export ALFWORLD_DATA="${ALFWORLD_DATA:-$CACHE/alfworld_smoke_games}"
  if [[ "${DRY_RUN:-0}" != "1" && ! -d "$ALFWORLD_DATA/json_2.1.1/train" ]]; then
    (cd "$ROOT" && "$PY" -m agents.alfworld generate --out "$ALFWORLD_DATA" --split train --num-games 8 --seed 0 \
      --no-progress >&2)
  fi
fi
rm -f "$SAVE_PATH/metrics.jsonl" "$SAVE_PATH/rehearsal.json" 2>/dev/null || true
status=0
bash "$HERE/_train_alfworld.sh" gaca "$@" || status=$?
[[ "${DRY_RUN:-0}" == "1" ]] && exit "$status"
(( status == 0 )) || echo "smoke: training exited with status $status" >&2
cd "$ROOT"
"$PY" "$HERE/smoke_check.py" "$SAVE_PATH" --iterations "${ITERATIONS:-2}" \
  --max-logprob-gap "${MAX_LOGPROB_GAP:-0.1}" || status=1  # mini-batch: read from $SAVE_PATH/command.sh
exit "$status"
