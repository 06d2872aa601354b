#!/usr/bin/env bash
# The paired figures of this record (run from the repository root): each SFT seed's warm start with recovery
# demonstrations against the same seed's gated warm start, on the paired validation (4 episodes/game) and the test panels.
set -euo pipefail
R=results/alfworld_sft_detours_2026-12-05; G=results/alfworld_sft_gate_2026-12-05
old_val4() { case $1 in 0) echo results/alfworld_minibatch_2026-12-05/val4_warm.json;;
  2) echo results/alfworld_sft_seeds_2026-12-05/sft2/paired_val4/val4_sft2.json;; *) echo $G/sft$1/paired_val4/val4_sft$1.json;; esac; }
old_eps() { case $1 in 0) echo results/alfworld_minibatch_2026-12-05/episodes/warm_start;;
  2) echo results/alfworld_sft_seeds_2026-12-05/sft2/episodes/warm_start;; *) echo $G/sft$1/episodes/warm_start;; esac; }
args=(); for N in 0 1 2 3 4; do args+=(--pair "s$N=$(old_val4 $N):$R/det1_sft$N/val4_actions.json.gz"); done
python examples/cpu/paired_over_seeds.py "${args[@]}" --json $R/paired_val4.json > $R/paired_val4.txt
for P in test test_unseen; do
  args=(); for N in 0 1 2 3 4; do args+=(--pair "s$N=$(old_eps $N)/$P.jsonl:$R/det1_sft$N/episodes/warm_start/$P.jsonl"); done
  python examples/cpu/paired_over_seeds.py "${args[@]}" --json $R/paired_$P.json > $R/paired_$P.txt
done
{ for N in 0 1 2 3; do python examples/cpu/stuck_steps.py $G/actions/val4_actions_sft$N.json.gz; done
  for N in 0 1 2 3 4; do python examples/cpu/stuck_steps.py $R/det1_sft$N/val4_actions.json.gz; done; } > $R/stuck_steps.jsonl
