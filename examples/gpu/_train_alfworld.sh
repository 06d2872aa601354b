#!/usr/bin/env bash
# ALFWorld training for one method (grpo | gigpo | gaca): bash _train_alfworld.sh METHOD [extra train_ppo options]
# Env: MODEL, SAVE_PATH (default outputs/<method>_alfworld), ALFWORLD_DATA (real data: `alfworld-download`,
# default ~/.cache/alfworld; or generated games, see agents/alfworld/README.md) + everything in _common.sh.
METHOD="${1:?method: grpo | gigpo | gaca}"
shift
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"
SAVE_PATH="${SAVE_PATH:-outputs/${METHOD}_alfworld}"
ALFWORLD_DATA="${ALFWORLD_DATA:-$HOME/.cache/alfworld}"
TASKS="${TASKS:-$SAVE_PATH/tasks.jsonl}"
if [[ "$DRY_RUN" != "1" ]]; then
  [[ -d "$ALFWORLD_DATA/json_2.1.1/train" ]] || {
    echo "no ALFWorld train games under ALFWORLD_DATA=$ALFWORLD_DATA (run alfworld-download, or generate games: " \
         "python -m agents.alfworld generate --out DIR --split train --num-games 3553)" >&2; exit 1; }
  mkdir -p "$SAVE_PATH"
  [[ -f "$TASKS" ]] || "$PY" -m gaca_openrlhf.rollout.tasks alfworld --data "$ALFWORLD_DATA" --split train \
      --seed "$SEED" --out "$TASKS"
fi
method_args "$METHOD"
common_args
run_train "${COMMON_ARGS[@]}" "${METHOD_ARGS[@]}" \
  --data.prompt_dataset "$TASKS" \
  --data.max_len 2560 --env.prompt_max_len 2048 --rollout.max_new_tokens 512 \
  --gaca.mini_batch_steps "${MINI_BATCH_STEPS:-256}" --gaca.mode mean_std_norm \
  --env.name alfworld --env.kwargs "{\"backend\": \"ray\", \"data_dir\": \"$ALFWORLD_DATA\"}" --env.max_steps 50 \
  "$@"
