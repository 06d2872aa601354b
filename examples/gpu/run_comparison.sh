#!/usr/bin/env bash
# GRPO vs GiGPO vs GACA on one environment (not yet run on GPUs: see README.md): train the three methods with the
# paper defaults, evaluate each final model on fixed panels with fixed seeds, build the comparison report.
#   ENV_NAME=alfworld|webshop  METHODS="grpo gigpo gaca"  OUT_ROOT=<repo>/outputs/comparison_<env>
#   SEEDS="0 1 2" (training seeds: one training run per method and seed, OUT_ROOT/<method>_seed<s>, --train.seed s)
#   EVAL_SEEDS="0 1 2" (one eval of each trained model per eval seed)  EVAL_EPISODES=1 (episodes per task)
#   EVAL_CKPTS=1 (also evaluate the HF checkpoints saved every SAVE_STEPS iterations; the trainer has no in-loop
#   environment evaluation)  SKIP_TRAINED=1 (skip a training run whose OUT_ROOT/<method>_seed<s>/config.json exists)
#   DRY_RUN=1 bash examples/gpu/run_comparison.sh    # print every command only
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"
HERE="$ROOT/examples/gpu"
ENV_NAME="${ENV_NAME:-alfworld}"
METHODS="${METHODS:-grpo gigpo gaca}"
OUT_ROOT="${OUT_ROOT:-$ROOT/outputs/comparison_$ENV_NAME}"  # a relative OUT_ROOT was made absolute by _common.sh
SEEDS="${SEEDS:-0 1 2}"
EVAL_SEEDS="${EVAL_SEEDS:-0 1 2}"
ALFWORLD_DATA="${ALFWORLD_DATA:-$HOME/.cache/alfworld}"
export ALFWORLD_DATA DRY_RUN
case "$ENV_NAME" in
  alfworld) PANEL_ARGS=("$OUT_ROOT/panels/eval_id.json" "$OUT_ROOT/panels/eval_ood.json") ;;
  webshop)  PANEL_ARGS=(test) ;;
  *) echo "ENV_NAME must be alfworld or webshop" >&2; exit 2 ;;
esac

# 1. train each method once per training seed (each training script manages its own WebShop server)
RUNS=()  # "<method>_seed<s>" run names = folder names under OUT_ROOT
for m in $METHODS; do
  for s in $SEEDS; do
    RUNS+=("${m}_seed$s")
    save="$OUT_ROOT/${m}_seed$s"
    if [[ "${SKIP_TRAINED:-0}" == "1" && -f "$save/config.json" ]]; then
      echo "skip training $m (seed $s): $save exists" >&2; continue
    fi
    SEED="$s" SAVE_PATH="$save" bash "$HERE/train_${m}_${ENV_NAME}.sh"
  done
done

# 2. evaluate on fixed panels with fixed seeds
[[ "$DRY_RUN" == "1" ]] || mkdir -p "$OUT_ROOT"
if [[ "$ENV_NAME" == alfworld ]]; then
  run_cmd "$PY" -m agents.alfworld panels --data "$ALFWORLD_DATA" --out "$OUT_ROOT/panels"
else
  webshop_server "$OUT_ROOT/webshop_server_eval.log"
fi
REPORT_ARGS=()
for run in "${RUNS[@]}"; do
  save="$OUT_ROOT/$run"
  models=("$save")
  if [[ "${EVAL_CKPTS:-0}" == "1" && "$DRY_RUN" != "1" ]]; then
    for ck in "$save"/ckpt/*_hf; do [[ -d "$ck" ]] && models+=("$ck"); done
  fi
  for model in "${models[@]}"; do
    tag=""; [[ "$model" == "$save" ]] || tag="_$(basename "$model")"
    for panel in "${PANEL_ARGS[@]}"; do
      pname="$(basename "$panel" .json)"
      for seed in $EVAL_SEEDS; do
        eval_model "$model" "$ENV_NAME" "$panel" "$seed" "$save/eval_${pname}${tag}_seed${seed}.json"
      done
    done
  done
  REPORT_ARGS+=(--run "$run=$save")
done

# 3. report
run_cmd "$PY" -m gaca_openrlhf.report "${REPORT_ARGS[@]}" --out "$OUT_ROOT/report"
echo "report: $OUT_ROOT/report/report.md" >&2
