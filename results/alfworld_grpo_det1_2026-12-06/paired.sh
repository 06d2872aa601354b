#!/usr/bin/env bash
# The paired validation figures of this record (run from the repository root): each training seed's GRPO model against
# the detour warm start (SFT seed 0), 64 validation games x 4 episodes at T 0.4, the same request seeds.
set -euo pipefail
R=results/alfworld_grpo_det1_2026-12-06; D=results/alfworld_sft_detours_2026-12-05
WARM=$D/det1_sft0/val4_actions.json.gz
args=(--pair "s0=$WARM:$D/grpo_det1_sft0/paired_val4/val4_actions_grpo.json.gz")
for P in $R/s*/; do N=$(basename $P); args+=(--pair "$N=$WARM:$P/paired_val4/val4_actions_grpo.json.gz"); done
python examples/cpu/paired_over_seeds.py "${args[@]}" --json $R/paired_val4.json > $R/paired_val4.txt
# the interval over training seeds and games together (seeds resampled too), as the step-5 record reports it
zcat $WARM > /tmp/det1_val4_warm.json
files=(/tmp/det1_val4_warm.json); i=0
for F in $D/grpo_det1_sft0/paired_val4/val4_actions_grpo.json.gz $R/s*/paired_val4/val4_actions_grpo.json.gz; do
  zcat $F > /tmp/det1_val4_$i.json; files+=(/tmp/det1_val4_$i.json); i=$((i + 1)); done
python results/alfworld_seeds_2026-12-05/seeds_ci.py "${files[@]}" > $R/paired_val4_seeds_ci.txt
