#!/usr/bin/env bash
# The RL learning test (tests/gaca_openrlhf/test_rl_learns.py) against three one-line breaks of the pipeline, each in
# a clone of HEAD that shares this checkout's .venv: the test must FAIL on every one (issue 35; results in
# docs/learning_notebook.md). About 5-9 minutes per break on 2 cores.
#   bash scripts/learning_test_mutants.sh [adv_sign] [loss_sign] [alignment]     # default: all three
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="$ROOT/.venv/bin:$PATH" DS_ACCELERATOR=cpu TOKENIZERS_PARALLELISM=false RAY_USAGE_STATS_ENABLED=0 \
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
EXP=gaca_openrlhf/trainer/experience.py
ACT=gaca_openrlhf/trainer/actors.py
LINE='        per_row = result.advantage.float()\[row_pos\]'
for m in "${@:-adv_sign loss_sign alignment}"; do
  for m in $m; do
    d="$(mktemp -d)/mutant_$m"
    git clone -q "$ROOT" "$d" && git -C "$d" checkout -q "$(git -C "$ROOT" rev-parse HEAD)"
    ln -s "$ROOT/.venv" "$d/.venv"
    case $m in
      adv_sign) sed -i "s|$LINE|        per_row = -result.advantage.float()[row_pos]|" "$d/$EXP" ;;
      alignment) sed -i "s|$LINE|        per_row = result.advantage.float()[row_pos][torch.randperm(len(row_pos), generator=torch.Generator().manual_seed(0))]|" "$d/$EXP" ;;
      loss_sign) sed -i 's|        self._update_grad_norms = \[\]|        self._update_grad_norms = []; trainer.actor_loss_fn = (lambda f: lambda *a, **k: (lambda o: (-o[0],) + tuple(o[1:]))(f(*a, **k)))(trainer.actor_loss_fn) if not getattr(trainer, "_mut", False) and not setattr(trainer, "_mut", True) else trainer.actor_loss_fn|' "$d/$ACT" ;;
      *) echo "unknown break '$m' (adv_sign, loss_sign, alignment)" >&2; exit 2 ;;
    esac
    [ -n "$(git -C "$d" diff --stat)" ] || { echo "$m: the line to break was not found (code moved?)" >&2; exit 1; }
    echo "== $m: $(git -C "$d" diff --stat | tail -1)"
    if (cd "$d" && PYTHONPATH="$d" python -m pytest -p no:cacheprovider -q --slow -s tests/gaca_openrlhf/test_rl_learns.py \
          > "$d.log" 2>&1); then
      echo "$m: the learning test PASSED on a broken pipeline (log: $d.log)"; exit 1
    fi
    grep -E "^\[learns\]" "$d.log" || true
    echo "$m: the learning test failed, as it must (log: $d.log)"
  done
done
