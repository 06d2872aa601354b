#!/usr/bin/env bash
# WebShop training for one method (grpo | gigpo | gaca): bash _train_webshop.sh METHOD [extra train_ppo options]
# Starts the local WebShop server (python -m webshop_server) unless WEBSHOP_URL is set, and stops it on exit; with
# NUM_NODES > 1 it listens on WEBSHOP_HOST (0.0.0.0) and is advertised to every node as http://<this node>:PORT
# (_common.sh webshop_server; README "Many nodes").
# Env: MODEL, SAVE_PATH (default <repo>/outputs/<method>_webshop), WEBSHOP_URL, WEBSHOP_DATA (WebShop's real data files;
# else a generated catalog of WEBSHOP_PRODUCTS products), WEBSHOP_TRAIN_GOALS (train goals used, default all of
# split train = goals 1500+) + everything in _common.sh.
METHOD="${1:?method: grpo | gigpo | gaca}"
shift
# 7B on WebShop: micro batch 2 by default. It matters only for fixed micro-batches (PACKING=0 or TOKEN_BUDGET=0; the
# default token budget sets the micro-batches): with full logits at 4 the training pass needs ~77 GB of an 80 GB GPU,
# 4096+512-token sequences x 152k-vocabulary fp32 logits/entropy; at 2, ~49 GB
# (python -m gaca_openrlhf.memory_plan --model 7b --env webshop --token-budget 0 --micro-batch 4)
if [[ -z "${MICRO_BATCH:-}" && "${MODEL:-}" == *7[Bb]* ]]; then MICRO_BATCH=2; fi
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"
SAVE_PATH="${SAVE_PATH:-$ROOT/outputs/${METHOD}_webshop}"  # relative paths: made absolute by _common.sh
TASKS="${TASKS:-$SAVE_PATH/tasks.jsonl}"
VAL_TASKS="${VAL_TASKS:-$(dirname "$TASKS")/val_tasks.jsonl}"  # the validation panel, written with TASKS (_common.sh)
# REHEARSAL=1: a generated 1000-product catalog (opted in explicitly), 4 train goals, a free port (README "Rehearsal")
if [[ "$REHEARSAL" == "1" && -z "${WEBSHOP_URL:-}" ]]; then
  rehearse WEBSHOP_GENERATED=1 WEBSHOP_PRODUCTS=1000 WEBSHOP_TRAIN_GOALS=5 \
    WEBSHOP_PORT="$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  export WEBSHOP_GENERATED
fi
MAX_STEPS="${MAX_STEPS:-15}" MAX_NEW_TOKENS="${MAX_NEW_TOKENS:-512}" PROMPT_MAX_LEN="${PROMPT_MAX_LEN:-4096}"
webshop_server "$SAVE_PATH/webshop_server.log"
if [[ "$DRY_RUN" != "1" ]]; then
  NUM_TRAIN=$((WEBSHOP_GOALS - 1500))
  (( NUM_TRAIN > 0 )) || { echo "the WebShop server has $WEBSHOP_GOALS goals: no train split (goals 1500+)" >&2; exit 1; }
  NUM_TRAIN="${WEBSHOP_TRAIN_GOALS:-$NUM_TRAIN}"
  mkdir -p "$SAVE_PATH"
  holdout_args
  [[ -f "$TASKS" ]] || "$PY" -m gaca_openrlhf.rollout.tasks webshop --start 1500 --num "$NUM_TRAIN" --out "$TASKS" \
      "${HOLDOUT_ARGS[@]}"
  check_tasks "$TASKS"
fi
MINI_BATCH_STEPS="${MINI_BATCH_STEPS:-64}"  # verl-agent: 64 step samples per optimizer update
# Packed token-budget micro-batches, the fastest path (docs/packing.md; equal to the padded path:
# tests/gaca_openrlhf/trainer/test_packing_equality.py). PACKING=0: padded fixed micro-batches of MICRO_BATCH (no token
# budget either); TOKEN_BUDGET=0: packed micro-batches of MICRO_BATCH samples. Chunked log-probs by default:
# LOGPROB_CHUNK=C, the policy's log-probs and entropy in chunks of C tokens (--run.logprob_chunk_size; 4096), which
# lets TOKEN_BUDGET (--train/--rollout.max_tokens_per_gpu) per GPU be 32768 for 1.5B and 7B, the memory plan's choice
# with chunks of 4096 (python -m gaca_openrlhf.memory_plan --recipes, README "Memory plan"). LOGPROB_CHUNK=0: full
# logits, with the plan's full-logits budget (20480 for 1.5B, 16384 for 7B) unless TOKEN_BUDGET is set (_common.sh
# set_packing_args).
# REHEARSAL=1: a budget scaled to its <= 1056-token samples, so that micro-batches pack several samples, and chunks of
# 256 tokens, smaller than the budget, so that the chunked path (several chunks, ZeRO-3's agreed chunk count over the
# ranks) is rehearsed.
rehearse TOKEN_BUDGET=2048 LOGPROB_CHUNK=256
set_packing_args  # PACKING_ARGS from PACKING / TOKEN_BUDGET / LOGPROB_CHUNK (_common.sh)
method_args "$METHOD"
val_args  # VAL_ARGS: the validation panel (_common.sh)
plan_vllm_mem webshop  # VLLM_MEM from the memory plan unless given
common_args
# Ray CPUs/GPUs, disk for the checkpoints, the server answers /health from every node (as this run's server)
run_preflight --url "$WEBSHOP_URL" ${WEBSHOP_RUN_TOKEN:+--run-token "$WEBSHOP_RUN_TOKEN"}
run_train "${COMMON_ARGS[@]}" "${METHOD_ARGS[@]}" "${VAL_ARGS[@]}" \
  --data.prompt_dataset "$TASKS" \
  --data.max_len $((PROMPT_MAX_LEN + MAX_NEW_TOKENS)) --env.prompt_max_len "$PROMPT_MAX_LEN" \
  --rollout.max_new_tokens "$MAX_NEW_TOKENS" \
  --run.mini_batch_steps "$MINI_BATCH_STEPS" "${PACKING_ARGS[@]}" --gaca.mode mean_norm \
  --env.name webshop --env.kwargs "{\"base_url\": \"$WEBSHOP_URL\"}" --env.max_steps "$MAX_STEPS" \
  "$@"
