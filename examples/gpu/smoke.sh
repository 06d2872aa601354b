#!/usr/bin/env bash
# The first thing to run on new hardware (README.md here, "Smoke test"): the shortest GACA run on ALFWorld that
# exercises every feature of the GPU launch on one node -- colocated actor/reference/vLLM engines in OpenRLHF's
# placement group, vLLM and DeepSpeed sleep/wake, ZeRO-3, the k3 KL loss against the reference model, the entropy
# bonus, env workers created from inside the engines, the weight sync and its log-prob probe, mini-batches in step
# samples, DeepSpeed + HF checkpoints -- for 2 iterations, then in three legs:
#   alfworld  the 2 iterations (ITERATIONS)
#   resume    RESUME=1 with one more iteration: training continues from the checkpoint of iteration 2 (SMOKE_RESUME=0: skip)
#   webshop   1 iteration of the WebShop GACA script at the same sizes, in SAVE_PATH/webshop (SMOKE_WEBSHOP=0: skip)
# and a summary: one PASS/FAIL line per check (examples/gpu/smoke_check.py) and the peak memory of each GPU of this
# node in each leg and in each iteration phase (rollout, experience, training, sync, other: nvidia-smi every second
# into SAVE_PATH/gpu_memory_<leg>.csv, mapped onto the phase windows of metrics.jsonl).
#   bash examples/gpu/smoke.sh                      # GPU node: Qwen2.5-0.5B-Instruct on GPUS_PER_NODE (8) GPUs
#   REHEARSAL=1 bash examples/gpu/smoke.sh          # the same launch path on a CPU machine (tiny model, 2 ranks)
# Every setting of _common.sh can be overridden (MODEL, GPUS_PER_NODE, NUM_NODES, VLLM_MEM, ...); SAVE_PATH default
# <repo>/outputs/smoke. With NUM_NODES > 1 the sizes below scale with all GPUs (TOTAL_GPUS = NUM_NODES x GPUS_PER_NODE).
# Every smoke starts from an empty SAVE_PATH: an existing, non-empty one is moved aside to SAVE_PATH.old-<timestamp>
# (checkpoints or metrics of an earlier run must not pass the checks), so tasks.jsonl is regenerated from ALFWORLD_DATA.
# The generated games (default ALFWORLD_DATA) number (ITERATIONS + 1) x TASKS_PER_ITER: every iteration of the
# alfworld and resume legs has its own tasks (--train.num_episodes 1 ends training when the task file is used up).
# The summary names what each leg checks and how long it took. Exit status: 0 only when every leg's training
# finished and every check passed.
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
fi
# the weight sync: training stops only on a grossly broken one (MAX_LOGPROB_GAP, _common.sh's 0.5; the rehearsal's
# 0.1); smoke_check.py then judges each sync against its rollout-time baseline (README "Smoke test")
export REQUIRE_ALL_ITERATIONS=1  # _train_alfworld.sh: too few tasks for ITERATIONS iterations is an error
# shared settings and helpers (cd to the repo root, relative paths made absolute, the GPU preflight, GACA_BACKEND)
export VAL_GAMES="${VAL_GAMES:-1}"  # a one-task validation panel (val/* lines; _common.sh's default is 32)
source "$HERE/_common.sh"
export SAVE_PATH="${SAVE_PATH:-$ROOT/outputs/smoke}"
export TASKS="$SAVE_PATH/tasks.jsonl"  # always the run's own, regenerated from ALFWORLD_DATA
export VAL_TASKS="$SAVE_PATH/val_tasks.jsonl"  # the one-task validation panel (VAL_GAMES above), written with TASKS
SMOKE_RESUME="${SMOKE_RESUME:-1}" SMOKE_WEBSHOP="${SMOKE_WEBSHOP:-1}"
for _v in SMOKE_RESUME SMOKE_WEBSHOP; do
  [[ "${!_v}" == 0 || "${!_v}" == 1 ]] || { echo "error: smoke: $_v=${!_v} must be 0 or 1" >&2; exit 2; }
done
# one generated game per task of the alfworld and resume legs (unless ALFWORLD_DATA is given)
SMOKE_GAMES="${SMOKE_GAMES:-$(( (ITERATIONS + SMOKE_RESUME) * TASKS_PER_ITER + VAL_GAMES ))}"
if [[ -z "${ALFWORLD_DATA:-}" ]]; then
  SMOKE_GENERATE=1 ALFWORLD_DATA="$CACHE/alfworld_smoke_games_$SMOKE_GAMES"
fi
export ALFWORLD_DATA MODEL  # absolute; REHEARSAL=1: the tiny model built once by _common.sh

# an empty output folder: an earlier run's checkpoints, metrics or tasks.jsonl must not satisfy this run's checks.
# Only a training output folder is moved (never e.g. a SAVE_PATH set to $HOME by mistake).
if [[ -e "$SAVE_PATH" && ! -d "$SAVE_PATH" ]]; then
  echo "error: smoke: SAVE_PATH=$SAVE_PATH exists and is not a folder" >&2; exit 2
fi
if [[ -d "$SAVE_PATH" && -n "$(ls -A "$SAVE_PATH" 2>/dev/null)" ]]; then
  looks_like_run=0
  for f in metrics.jsonl command.sh train.log tasks.jsonl val_tasks.jsonl ckpt config.json rehearsal.json \
           smoke_summary.txt; do
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

# ---- per-GPU memory while each leg runs: nvidia-smi every second, this node's GPUs ----
# mem_unavailable: why memory cannot be sampled here (nothing when it can)
mem_unavailable() {
  if ! command -v nvidia-smi > /dev/null; then echo "no nvidia-smi"
  elif [[ "$REHEARSAL" == "1" ]]; then echo "REHEARSAL=1: logical GPUs"
  fi
}
MEM_PID="" MEM_LEGS=()
mem_start() {  # LEG: sample into SAVE_PATH/gpu_memory_LEG.csv until mem_stop
  [[ "$DRY_RUN" != "1" && -z "$(mem_unavailable)" ]] || return 0
  mkdir -p "$SAVE_PATH"
  nvidia-smi --query-gpu=timestamp,index,memory.used,memory.total --format=csv,noheader,nounits -l 1 \
    > "$SAVE_PATH/gpu_memory_$1.csv" 2>> "$SAVE_PATH/gpu_memory.err" &
  MEM_PID=$!
  MEM_LEGS+=("$1=$SAVE_PATH/gpu_memory_$1.csv")
}
mem_stop() {
  [[ -n "$MEM_PID" ]] || return 0
  kill "$MEM_PID" 2> /dev/null || true
  wait "$MEM_PID" 2> /dev/null || true
  MEM_PID=""
}
trap mem_stop EXIT  # never leave the sampler running (an interrupted or failed leg)

# ---- the summary: one PASS/FAIL line per check of every leg, printed at the end ----
SUMMARY="$SAVE_PATH/smoke_summary.txt"
verdict() {  # OK(0|1) TEXT
  mkdir -p "$SAVE_PATH"
  if [[ "$1" == 1 ]]; then echo "[PASS] $2"; else echo "[FAIL] $2"; fi >> "$SUMMARY"
}
leg_trained() {  # LEG STATUS: the leg's training exit status as a check
  if (( $2 == 0 )); then verdict 1 "$1: training finished"; else verdict 0 "$1: training exited with status $2"; fi
}
duration() {  # SECONDS -> 1h02m03s / 4m05s / 9s
  local s="$1"
  if (( s >= 3600 )); then printf '%dh%02dm%02ds' $((s / 3600)) $((s % 3600 / 60)) $((s % 60))
  elif (( s >= 60 )); then printf '%dm%02ds' $((s / 60)) $((s % 60))
  else printf '%ds' "$s"; fi
}
leg_header() {  # LEG SECONDS WHAT: the leg's line in the summary: what it checks and how long it took
  mkdir -p "$SAVE_PATH"
  echo "== leg $1 ($(duration "$2")): $(tr -s ' \n' ' ' <<< "$3" | sed 's/ $//')" >> "$SUMMARY"
  LEG_TIMES+=("$1 $(duration "$2")")
}
LEG_TIMES=()
check_run() {  # LEG SAVE [smoke_check.py options]: the leg's checks (a checker that fails without a FAIL line is one)
  local leg="$1" save="$2" out st=0
  shift 2
  out="$("$PY" "$HERE/smoke_check.py" "$save" --max-logprob-gap "$MAX_LOGPROB_GAP" --label "$leg" "$@")" || st=$?
  [[ -z "$out" ]] || printf '%s\n' "$out" >> "$SUMMARY"
  (( st == 0 )) || grep -q '^\[FAIL\]' <<< "$out" || verdict 0 "$leg: smoke_check.py exited with status $st"
}

# ---- leg 1, alfworld: ITERATIONS (2) iterations ----
mem_start alfworld
alf=0 t0=$SECONDS
bash "$HERE/_train_alfworld.sh" gaca "$@" || alf=$?
mem_stop
if [[ "$DRY_RUN" != "1" ]]; then
  leg_header alfworld $((SECONDS - t0)) "$ITERATIONS GACA iterations on ALFWorld with every launch feature (colocated
   policy/reference/vLLM engines, sleep/wake, ZeRO-3, KL, env workers in the engines, weight sync, mini-batches,
   checkpoints)"
  leg_trained alfworld "$alf"
  check_run alfworld "$SAVE_PATH" --iterations "$ITERATIONS"  # mini-batch: read from $SAVE_PATH/command.sh
fi

# ---- leg 2, resume: RESUME=1 and one more iteration, from the checkpoint of the last iteration ----
if [[ "$SMOKE_RESUME" == 1 ]]; then
  if (( alf != 0 )); then
    verdict 0 "resume: not run (the alfworld leg failed: no checkpoint to resume from)"
  else
    # the first run's records, to compare with after the resume (none: the alfworld checks have failed already)
    [[ "$DRY_RUN" == "1" ]] || cp "$SAVE_PATH/metrics.jsonl" "$SAVE_PATH/metrics.before_resume.jsonl" 2> /dev/null || true
    mem_start resume
    st=0 t0=$SECONDS
    RESUME=1 ITERATIONS=$((ITERATIONS + 1)) bash "$HERE/_train_alfworld.sh" gaca "$@" || st=$?
    mem_stop
    if [[ "$DRY_RUN" != "1" ]]; then
      leg_header resume $((SECONDS - t0)) "RESUME=1: training continues from the checkpoint of iteration $ITERATIONS
   (iteration, optimizer, data position) and trains iteration $((ITERATIONS + 1))"
      leg_trained resume "$st"
      check_run resume "$SAVE_PATH" --iterations $((ITERATIONS + 1)) --resumed-from "$ITERATIONS" \
        --before "$SAVE_PATH/metrics.before_resume.jsonl"
    fi
  fi
fi

# ---- leg 3, webshop: 1 iteration of the WebShop GACA script at the smoke's sizes, in SAVE_PATH/webshop ----
if [[ "$SMOKE_WEBSHOP" == 1 ]]; then
  ws=(SAVE_PATH="$SAVE_PATH/webshop" TASKS="$SAVE_PATH/webshop/tasks.jsonl" ITERATIONS=1
      VAL_TASKS="$SAVE_PATH/webshop/val_tasks.jsonl"
      WEBSHOP_TRAIN_GOALS="${WEBSHOP_TRAIN_GOALS:-$((TASKS_PER_ITER + VAL_GAMES))}")
  if [[ "$REHEARSAL" != "1" && -z "${WEBSHOP_URL:-}" && -z "${WEBSHOP_DATA:-}" ]]; then
    ws+=(WEBSHOP_GENERATED=1 WEBSHOP_PRODUCTS="${WEBSHOP_PRODUCTS:-1000}")  # a small generated catalog: fast start
  fi
  mem_start webshop
  st=0 t0=$SECONDS
  env "${ws[@]}" bash "$HERE/_train_webshop.sh" gaca "$@" || st=$?
  mem_stop
  if [[ "$DRY_RUN" != "1" ]]; then
    leg_header webshop $((SECONDS - t0)) "1 GACA iteration on the WebShop server (started, health-checked and
   stopped by the script), at the smoke's sizes"
    leg_trained webshop "$st"
    check_run webshop "$SAVE_PATH/webshop" --iterations 1
  fi
fi

[[ "$DRY_RUN" == "1" ]] && exit "$alf"

# ---- summary ----
echo "== smoke summary ($SAVE_PATH) =="
cat "$SUMMARY"
why="$(mem_unavailable)"
if [[ -n "$why" ]]; then
  echo "memory sampling: n/a ($why)"
else
  mem_args=()
  for m in "${MEM_LEGS[@]}"; do mem_args+=(--memory "$m"); done
  for run in "$SAVE_PATH" "$SAVE_PATH/webshop"; do  # their metrics.jsonl hold each iteration's phase windows
    [[ ! -f "$run/metrics.jsonl" ]] || mem_args+=(--phases "$run")
  done
  "$PY" "$HERE/smoke_check.py" "${mem_args[@]}" || echo "memory sampling: no summary (smoke_check.py failed)"
fi
echo "legs: ${LEG_TIMES[*]:-none} (whole smoke: $(duration "$SECONDS"))"
total="$(grep -c '^\[\(PASS\|FAIL\)\]' "$SUMMARY" || true)"
failed="$(grep -c '^\[FAIL\]' "$SUMMARY" || true)"
if (( failed == 0 && total > 0 )); then
  echo "SMOKE PASS: $total/$total checks"
  exit 0
fi
echo "SMOKE FAIL: $failed of $total checks failed"
exit 1
