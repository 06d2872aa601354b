#!/usr/bin/env bash
# The first thing to run on new hardware (README.md here, "Smoke test"): the shortest GACA run on ALFWorld that
# exercises every feature of the GPU launch on one node -- colocated actor/reference/vLLM engines in OpenRLHF's
# placement group, vLLM and DeepSpeed sleep/wake, ZeRO-3, the k3 KL loss against the reference model, the entropy
# bonus, env workers created from inside the engines, the weight sync and its log-prob probe, mini-batches in step
# samples, DeepSpeed + HF checkpoints -- for 2 iterations, then a PASS/FAIL summary (examples/gpu/smoke_check.py).
#   bash examples/gpu/smoke.sh                      # GPU node: Qwen2.5-0.5B-Instruct on GPUS_PER_NODE (8) GPUs
#   REHEARSAL=1 bash examples/gpu/smoke.sh          # the same launch path on a CPU machine (tiny model, 2 ranks)
# Every setting of _common.sh can be overridden (MODEL, GPUS_PER_NODE, NUM_NODES, VLLM_MEM, ...); SAVE_PATH default
# <repo>/outputs/smoke. With NUM_NODES > 1 the sizes below scale with all GPUs (TOTAL_GPUS = NUM_NODES x GPUS_PER_NODE).
# Every smoke starts from an empty SAVE_PATH: an existing, non-empty one is moved aside to SAVE_PATH.old-<timestamp>
# (checkpoints or metrics of an earlier run must not pass the checks), so tasks.jsonl is regenerated from ALFWORLD_DATA.
# The generated games (default ALFWORLD_DATA) number ITERATIONS x TASKS_PER_ITER: every iteration has its own tasks.
# Exit status: 0 only when training finished and every check passed.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CACHE="${GACA_CACHE:-${GACA_CACHE_DIR:-$HOME/.cache/gaca_openrlhf}}"
if [[ "${REHEARSAL:-0}" != "1" ]]; then  # GPU sizes (the rehearsal's own defaults are in _common.sh)
  source "$HERE/_nodes.sh"  # NUM_NODES, GPUS_PER_NODE (N_GPUS: deprecated), TOTAL_GPUS
  export MODEL="${MODEL:-Qwen/Qwen2.5-0.5B-Instruct}"
  export ITERATIONS="${ITERATIONS:-2}" TASKS_PER_ITER="${TASKS_PER_ITER:-$TOTAL_GPUS}" ROLLOUTS="${ROLLOUTS:-4}"
  export MAX_STEPS="${MAX_STEPS:-5}" MAX_NEW_TOKENS="${MAX_NEW_TOKENS:-128}" SAVE_STEPS="${SAVE_STEPS:-1}"
  export MICRO_BATCH="${MICRO_BATCH:-2}"
  export MINI_BATCH_STEPS="${MINI_BATCH_STEPS:-$((MICRO_BATCH * TOTAL_GPUS))}"  # several updates per iteration
  export LR="${LR:-1e-5}"  # visible KL after the first update within 2 iterations
  # one generated game per task of the run: --train.num_episodes 1 ends training when the task file is used up
  SMOKE_GAMES="${SMOKE_GAMES:-$((ITERATIONS * TASKS_PER_ITER))}"
  [[ -n "${ALFWORLD_DATA:-}" ]] || SMOKE_GENERATE=1
  export ALFWORLD_DATA="${ALFWORLD_DATA:-$CACHE/alfworld_smoke_games_$SMOKE_GAMES}"
fi
# the smoke keeps the strict weight-sync limit (the long recipes use 0.5: README "Weight-sync check")
export MAX_LOGPROB_GAP="${MAX_LOGPROB_GAP:-0.1}"
export REQUIRE_ALL_ITERATIONS=1  # _train_alfworld.sh: too few tasks for ITERATIONS iterations is an error
# shared settings and helpers (cd to the repo root, relative paths made absolute, the GPU preflight, GACA_BACKEND)
source "$HERE/_common.sh"
export SAVE_PATH="${SAVE_PATH:-$ROOT/outputs/smoke}"
export TASKS="$SAVE_PATH/tasks.jsonl"  # always the run's own, regenerated from ALFWORLD_DATA
export ALFWORLD_DATA MODEL  # absolute; REHEARSAL=1: the tiny model built once by _common.sh

# an empty output folder: an earlier run's checkpoints, metrics or tasks.jsonl must not satisfy this run's checks.
# Only a training output folder is moved (never e.g. a SAVE_PATH set to $HOME by mistake).
if [[ -e "$SAVE_PATH" && ! -d "$SAVE_PATH" ]]; then
  echo "error: smoke: SAVE_PATH=$SAVE_PATH exists and is not a folder" >&2; exit 2
fi
if [[ -d "$SAVE_PATH" && -n "$(ls -A "$SAVE_PATH" 2>/dev/null)" ]]; then
  looks_like_run=0
  for f in metrics.jsonl command.sh train.log tasks.jsonl ckpt config.json rehearsal.json; do
    [[ -e "$SAVE_PATH/$f" ]] && looks_like_run=1
  done
  if [[ "$looks_like_run" != "1" || "$SAVE_PATH" == "$HOME" || "$SAVE_PATH" == "$ROOT" || "$SAVE_PATH" == / ]]; then
    echo "error: smoke: SAVE_PATH=$SAVE_PATH is not empty and not an earlier run's output folder: choose an" \
         "empty or new SAVE_PATH" >&2
    exit 2
  fi
  old="$SAVE_PATH.old-$(date +%Y%m%d-%H%M%S)"
  [[ ! -e "$old" ]] || old="$old-$$"
  echo "smoke: moving the earlier run's $SAVE_PATH aside to $old (the smoke starts from an empty folder)" >&2
  run_cmd mv -- "$SAVE_PATH" "$old"
fi

# the generated games (DRY_RUN prints the command, so that its --num-games shows)
if [[ "${SMOKE_GENERATE:-0}" == "1" ]]; then
  gen=("$PY" -m agents.alfworld generate --out "$ALFWORLD_DATA" --split train --num-games "$SMOKE_GAMES" --seed 0
       --no-progress)
  if [[ "$DRY_RUN" == "1" ]]; then run_cmd "${gen[@]}"
  elif [[ ! -d "$ALFWORLD_DATA/json_2.1.1/train" ]]; then "${gen[@]}" >&2
  fi
fi
status=0
bash "$HERE/_train_alfworld.sh" gaca "$@" || status=$?
[[ "$DRY_RUN" == "1" ]] && exit "$status"
(( status == 0 )) || echo "smoke: training exited with status $status" >&2
"$PY" "$HERE/smoke_check.py" "$SAVE_PATH" --iterations "$ITERATIONS" \
  --max-logprob-gap "$MAX_LOGPROB_GAP" || status=1  # mini-batch: read from $SAVE_PATH/command.sh
exit "$status"
