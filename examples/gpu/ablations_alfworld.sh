#!/usr/bin/env bash
# The GACA paper's ablations on ALFWorld (not yet run on GPUs: see README.md), each a full training run with the
# GACA script's defaults plus one change, then an evaluation on the eval_id panel:
#   lambda0 / lambda05 / lambda1   fixed lambda 0 (episode only), 0.5, 1 (step only)      -- fixed_mixture
#   alpha025 / alpha05 / alpha1    gate slope alpha 0.25, 0.5 (= GACA), 1
#   permuted                       criticality permuted at random within each trajectory (seeded) -- gaca_permuted
#   alphac<v>                      NLL share alpha_c = v (c' = alpha_c c + 1 - alpha_c), for v in $ALPHA_C_VALUES
#
# Each ablation is trained once per training seed of SEEDS (default: SEED, 42; --train.seed s) in
# OUT_ROOT/<ablation>_seed<s>. EVAL_CKPTS=1 also evaluates every HF checkpoint (kept in <run>/hf/ apart from the
# --ckpt.max_num rotation); the DeepSpeed checkpoints of a finished run are pruned unless KEEP_DS_CKPT=1; the
# evaluations run one per GPU of this node (EVAL_GPUS, EVAL_TP) -- as in run_comparison.sh.
#
#   OUT_ROOT=outputs/ablations ABLATIONS="lambda0 lambda1 permuted" bash examples/gpu/ablations_alfworld.sh
#   DRY_RUN=1 bash examples/gpu/ablations_alfworld.sh     # print the commands only
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"
HERE="$ROOT/examples/gpu"
OUT_ROOT="${OUT_ROOT:-$ROOT/outputs/ablations_alfworld}"  # a relative OUT_ROOT was made absolute by _common.sh
ALFWORLD_DATA="${ALFWORLD_DATA:-$HOME/.cache/alfworld}"
ALPHA_C_VALUES="${ALPHA_C_VALUES:-0.5}"
ABLATIONS="${ABLATIONS:-lambda0 lambda05 lambda1 alpha025 alpha05 alpha1 permuted $(for v in $ALPHA_C_VALUES; do printf 'alphac%s ' "$v"; done)}"
EVAL_SEEDS="${EVAL_SEEDS:-0 1 2}"  # evaluation seeds of each trained model
SEEDS="${SEEDS:-${SEED:-42}}"      # training seeds: one training run per ablation and seed
export ALFWORLD_DATA DRY_RUN

ablation_args() {
  case "$1" in
    lambda0)  ABL_ARGS=(--algo.advantage.estimator fixed_mixture --gaca.fixed_lambda 0.0) ;;
    lambda05) ABL_ARGS=(--algo.advantage.estimator fixed_mixture --gaca.fixed_lambda 0.5) ;;
    lambda1)  ABL_ARGS=(--algo.advantage.estimator fixed_mixture --gaca.fixed_lambda 1.0) ;;
    alpha025) ABL_ARGS=(--algo.advantage.estimator gaca --gaca.alpha 0.25) ;;
    alpha05)  ABL_ARGS=(--algo.advantage.estimator gaca --gaca.alpha 0.5) ;;
    alpha1)   ABL_ARGS=(--algo.advantage.estimator gaca --gaca.alpha 1.0) ;;
    permuted) ABL_ARGS=(--algo.advantage.estimator gaca_permuted --gaca.permutation_seed "${PERMUTATION_SEED:-0}") ;;
    alphac*)  ABL_ARGS=(--algo.advantage.estimator gaca --gaca.alpha_c "${1#alphac}") ;;
    *) echo "unknown ablation '$1'" >&2; exit 2 ;;
  esac
}

PANELS="$OUT_ROOT/panels"
[[ "$DRY_RUN" == "1" ]] || mkdir -p "$OUT_ROOT"
run_cmd "$PY" -m agents.alfworld panels --data "$ALFWORLD_DATA" --out "$PANELS"
REPORT_ARGS=()
for abl in $ABLATIONS; do
  ablation_args "$abl"
  for s in $SEEDS; do
    save="$OUT_ROOT/${abl}_seed$s"
    # the later options win: the ablation's estimator settings override the GACA defaults
    train_run "$save" env SEED="$s" SAVE_PATH="$save" bash "$HERE/_train_alfworld.sh" gaca "${ABL_ARGS[@]}"
    queue_run_evals "$save" alfworld "$PANELS/eval_id.json" "$EVAL_SEEDS"
    REPORT_ARGS+=(--run "${abl}_seed$s=$save")
  done
done
run_eval_queue  # one evaluation per GPU of this node at a time
run_cmd "$PY" -m gaca_openrlhf.report "${REPORT_ARGS[@]}" --out "$OUT_ROOT/report"
