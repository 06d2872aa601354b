#!/usr/bin/env bash
# ALFWorld training for one method (grpo | gigpo | gaca): bash _train_alfworld.sh METHOD [extra train_ppo options]
# Env: MODEL, SAVE_PATH (default <repo>/outputs/<method>_alfworld), ALFWORLD_DATA (real data: `alfworld-download`,
# default ~/.cache/alfworld; or generated games, see agents/alfworld/README.md) + everything in _common.sh.
METHOD="${1:?method: grpo | gigpo | gaca}"
shift
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"
SAVE_PATH="${SAVE_PATH:-$ROOT/outputs/${METHOD}_alfworld}"  # relative paths: made absolute by _common.sh
# REHEARSAL=1: games generated offline (cached), ALFWORLD_GAMES of them (README "Rehearsal")
rehearse ALFWORLD_DATA="$CACHE/alfworld_rehearsal_games" ALFWORLD_GAMES=4
ALFWORLD_DATA="${ALFWORLD_DATA:-$HOME/.cache/alfworld}"
TASKS="${TASKS:-$SAVE_PATH/tasks.jsonl}"
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
  [[ -f "$TASKS" ]] || "$PY" -m gaca_openrlhf.rollout.tasks alfworld --data "$ALFWORLD_DATA" --split train \
      --seed "$SEED" --out "$TASKS"
  check_tasks "$TASKS"
fi
MINI_BATCH_STEPS="${MINI_BATCH_STEPS:-256}"  # verl-agent: 256 step samples per optimizer update
method_args "$METHOD"
common_args
# Ray CPUs/GPUs (one env worker of ENV_WORKER_CPUS per episode of an iteration, README "Env worker CPUs"), disk
run_preflight --env-workers $((TASKS_PER_ITER * ROLLOUTS)) --env-worker-cpus "$ENV_WORKER_CPUS"
run_train "${COMMON_ARGS[@]}" "${METHOD_ARGS[@]}" \
  --data.prompt_dataset "$TASKS" \
  --data.max_len $((PROMPT_MAX_LEN + MAX_NEW_TOKENS)) --env.prompt_max_len "$PROMPT_MAX_LEN" \
  --rollout.max_new_tokens "$MAX_NEW_TOKENS" \
  --gaca.mini_batch_steps "$MINI_BATCH_STEPS" --gaca.mode mean_std_norm \
  --env.name alfworld --env.max_steps "$MAX_STEPS" \
  --env.kwargs "{\"backend\": \"ray\", \"data_dir\": \"$ALFWORLD_DATA\", \"num_cpus\": $ENV_WORKER_CPUS}" \
  "$@"
