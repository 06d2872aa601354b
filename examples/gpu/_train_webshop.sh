#!/usr/bin/env bash
# WebShop training for one method (grpo | gigpo | gaca): bash _train_webshop.sh METHOD [extra train_ppo options]
# Starts the local WebShop server (python -m webshop_server) unless WEBSHOP_URL is set, and stops it on exit.
# Env: MODEL, SAVE_PATH (default outputs/<method>_webshop), WEBSHOP_URL, WEBSHOP_DATA (WebShop's real data files;
# else a generated catalog of WEBSHOP_PRODUCTS products), WEBSHOP_TRAIN_GOALS (train goals used, default all of
# split train = goals 1500+) + everything in _common.sh.
METHOD="${1:?method: grpo | gigpo | gaca}"
shift
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"
SAVE_PATH="${SAVE_PATH:-outputs/${METHOD}_webshop}"
TASKS="${TASKS:-$SAVE_PATH/tasks.jsonl}"
start_webshop_server "$SAVE_PATH/webshop_server.log"
if [[ "$DRY_RUN" != "1" ]]; then
  NUM_TRAIN=$((WEBSHOP_GOALS - 1500))
  (( NUM_TRAIN > 0 )) || { echo "the WebShop server has $WEBSHOP_GOALS goals: no train split (goals 1500+)" >&2; exit 1; }
  NUM_TRAIN="${WEBSHOP_TRAIN_GOALS:-$NUM_TRAIN}"
  mkdir -p "$SAVE_PATH"
  [[ -f "$TASKS" ]] || "$PY" -m gaca_openrlhf.rollout.tasks webshop --start 1500 --num "$NUM_TRAIN" --out "$TASKS"
fi
method_args "$METHOD"
common_args
run_train "${COMMON_ARGS[@]}" "${METHOD_ARGS[@]}" \
  --data.prompt_dataset "$TASKS" \
  --data.max_len 4608 --env.prompt_max_len 4096 --rollout.max_new_tokens 512 \
  --gaca.mini_batch_steps "${MINI_BATCH_STEPS:-64}" --gaca.mode mean_norm \
  --env.name webshop --env.kwargs "{\"base_url\": \"$WEBSHOP_URL\"}" --env.max_steps 15 \
  "$@"
