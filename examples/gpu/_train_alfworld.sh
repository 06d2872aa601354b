#!/usr/bin/env bash
# ALFWorld training for one method (grpo | gigpo | gaca): bash _train_alfworld.sh METHOD [extra train_ppo options]
# Env: MODEL, SAVE_PATH (default <repo>/outputs/<method>_alfworld), ALFWORLD_DATA (real data: `alfworld-download`,
# default ~/.cache/alfworld; or generated games, see agents/alfworld/README.md) + everything in _common.sh.
METHOD="${1:?method: grpo | gigpo | gaca}"
shift
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"
SAVE_PATH="${SAVE_PATH:-$ROOT/outputs/${METHOD}_alfworld}"  # relative paths: made absolute by _common.sh
# REHEARSAL=1: games generated offline (cached), ALFWORLD_GAMES of them (README "Rehearsal")
rehearse ALFWORLD_DATA="$CACHE/alfworld_rehearsal_games" ALFWORLD_GAMES=5  # 4 to train on, 1 to validate
ALFWORLD_DATA="${ALFWORLD_DATA:-$HOME/.cache/alfworld}"
TASKS="${TASKS:-$SAVE_PATH/tasks.jsonl}"
VAL_TASKS="${VAL_TASKS:-$(dirname "$TASKS")/val_tasks.jsonl}"  # the validation panel, written with TASKS (_common.sh)
MAX_STEPS="${MAX_STEPS:-50}" MAX_NEW_TOKENS="${MAX_NEW_TOKENS:-512}" PROMPT_MAX_LEN="${PROMPT_MAX_LEN:-2048}"
if [[ "$REHEARSAL" == "1" && "$DRY_RUN" != "1" && ! -d "$ALFWORLD_DATA/json_2.1.1/train" ]]; then
  "$PY" -m agents.alfworld generate --out "$ALFWORLD_DATA" --split train --num-games "$ALFWORLD_GAMES" --seed 0 \
    --no-progress >&2
fi
if [[ "$DRY_RUN" != "1" ]]; then
  [[ -d "$ALFWORLD_DATA/json_2.1.1/train" ]] || {
    echo "no ALFWorld train games under ALFWORLD_DATA=$ALFWORLD_DATA (run alfworld-download, or generate games: " \
         "python -m agents.alfworld generate --out DIR --split train --num-games 3553)" >&2; exit 1; }
  mkdir -p "$SAVE_PATH"
  holdout_args
  [[ -f "$TASKS" ]] || "$PY" -m gaca_openrlhf.rollout.tasks alfworld --data "$ALFWORLD_DATA" --split train \
      --seed "$SEED" --out "$TASKS" "${HOLDOUT_ARGS[@]}"
  check_tasks "$TASKS"
fi
MINI_BATCH_STEPS="${MINI_BATCH_STEPS:-256}"  # verl-agent: 256 step samples per optimizer update
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
rehearse TOKEN_BUDGET=1024 LOGPROB_CHUNK=256
set_packing_args  # PACKING_ARGS from PACKING / TOKEN_BUDGET / LOGPROB_CHUNK (_common.sh)
method_args "$METHOD"
val_args  # VAL_ARGS: the validation panel (_common.sh)
plan_vllm_mem alfworld  # VLLM_MEM from the memory plan unless given
common_args
# Ray CPUs/GPUs (one env worker of ENV_WORKER_CPUS per episode of an iteration, README "Env worker CPUs"), disk
run_preflight --env-workers $((TASKS_PER_ITER * ROLLOUTS)) --env-worker-cpus "$ENV_WORKER_CPUS" \
  --path "ALFWORLD_DATA=$ALFWORLD_DATA"  # the env workers of every node read the games there
run_train "${COMMON_ARGS[@]}" "${METHOD_ARGS[@]}" "${VAL_ARGS[@]}" \
  --data.prompt_dataset "$TASKS" \
  --data.max_len $((PROMPT_MAX_LEN + MAX_NEW_TOKENS)) --env.prompt_max_len "$PROMPT_MAX_LEN" \
  --rollout.max_new_tokens "$MAX_NEW_TOKENS" \
  --run.mini_batch_steps "$MINI_BATCH_STEPS" "${PACKING_ARGS[@]}" --gaca.mode mean_std_norm \
  --env.name alfworld --env.max_steps "$MAX_STEPS" \
  --env.kwargs "{\"backend\": \"ray\", \"data_dir\": \"$ALFWORLD_DATA\", \"num_cpus\": $ENV_WORKER_CPUS}" \
  "$@"
