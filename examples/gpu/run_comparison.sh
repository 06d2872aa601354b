#!/usr/bin/env bash
# GRPO vs GiGPO vs GACA on one environment (not yet run on GPUs: see README.md): train the three methods with the
# paper defaults, evaluate each final model on fixed panels with fixed seeds, build the comparison report.
#   ENV_NAME=alfworld|webshop  METHODS="grpo gigpo gaca"  OUT_ROOT=<repo>/outputs/comparison_<env>
#   SEEDS="0 1 2" (training seeds: one training run per method and seed, OUT_ROOT/<method>_seed<s>, --train.seed s)
#   EVAL_SEEDS="0 1 2" (one eval of each trained model per eval seed)  EVAL_EPISODES=1 (episodes per task)
#   EVAL_CKPTS=1 (also evaluate every HF checkpoint saved every SAVE_STEPS iterations, kept in <run>/hf/ apart from
#   the --ckpt.max_num rotation; the trainer has no in-loop environment evaluation)
#   KEEP_DS_CKPT=1 (keep the DeepSpeed checkpoints of finished runs; by default pruned once the final model is saved)
#   SKIP_TRAINED=1 (skip a training run whose OUT_ROOT/<method>_seed<s>/config.json exists)
#   EVAL_GPUS="0 1 ..." (evaluations run one per GPU of this node, default all; EVAL_TP GPUs each)
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

# 1. train each method once per training seed (each training script manages its own WebShop server); train_run
#    keeps the HF checkpoints to evaluate (EVAL_CKPTS=1) and prunes the finished run's DeepSpeed checkpoints
RUNS=()  # "<method>_seed<s>" run names = folder names under OUT_ROOT
for m in $METHODS; do
  for s in $SEEDS; do
    RUNS+=("${m}_seed$s")
    save="$OUT_ROOT/${m}_seed$s"
    if [[ "${SKIP_TRAINED:-0}" == "1" && -f "$save/config.json" ]]; then
      echo "skip training $m (seed $s): $save exists" >&2
      [[ "${EVAL_CKPTS:-0}" != "1" || "$DRY_RUN" == "1" ]] || keep_hf_checkpoints "$save" all
      prune_ds_checkpoints "$save"
      continue
    fi
    train_run "$save" env SEED="$s" SAVE_PATH="$save" bash "$HERE/train_${m}_${ENV_NAME}.sh"
  done
done

# 2. evaluate on fixed panels with fixed seeds, one evaluation per GPU of this node at a time
[[ "$DRY_RUN" == "1" ]] || mkdir -p "$OUT_ROOT"
if [[ "$ENV_NAME" == alfworld ]]; then
  run_cmd "$PY" -m agents.alfworld panels --data "$ALFWORLD_DATA" --out "$OUT_ROOT/panels"
else
  webshop_server "$OUT_ROOT/webshop_server_eval.log"
fi
REPORT_ARGS=()
for run in "${RUNS[@]}"; do
  for panel in "${PANEL_ARGS[@]}"; do queue_run_evals "$OUT_ROOT/$run" "$ENV_NAME" "$panel" "$EVAL_SEEDS"; done
  REPORT_ARGS+=(--run "$run=$OUT_ROOT/$run")
done
run_eval_queue

# 3. report
run_cmd "$PY" -m gaca_openrlhf.report "${REPORT_ARGS[@]}" --out "$OUT_ROOT/report"
echo "report: $OUT_ROOT/report/report.md" >&2
