#!/usr/bin/env bash
# Mutation testing (mutmut 3, configured in pyproject.toml [tool.mutmut]): small code changes (flipped operators,
# changed constants, dropped arguments, ...) are applied one at a time to the training, rollout and evaluation
# packages, and the FAST tests are run against each; a mutant the tests do not notice "survives".
#   bash scripts/mutation.sh                 # trainer, rollout and eval, one package per mutmut run
#   bash scripts/mutation.sh eval            # one package (trainer | rollout | eval)
#   MUTMUT_JOBS=1 nice bash scripts/mutation.sh rollout   # on a shared machine
#   bash scripts/mutation.sh eval 'gaca_openrlhf.eval.runner.*'   # only the mutants matching a pattern
#   bash scripts/mutation.sh --survivors trainer   # re-test only the package's current survivors (after new tests)
# Prints "survivors: N" per package, and the surviving mutants (inspect one: `mutmut show NAME`, from the repo
# root). Every survivor is either killed by a new test or listed with the reason it is harmless in
# tests/MUTATION_SURVIVORS.md; the README quotes the counts. Results are kept in mutants/ (git-ignored); a package
# or pattern run re-tests all its mutants (mutmut re-runs the mutants it is given by name), --survivors only the
# survivors. For each mutant mutmut runs only the fast tests that execute the mutated function. Changing
# pytest_add_cli_args* in [tool.mutmut] makes mutmut discard every cached result.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="${VENV:-$ROOT/.venv}"
export PATH="$VENV/bin:$PATH" DS_ACCELERATOR=cpu TOKENIZERS_PARALLELISM=false RAY_USAGE_STATS_ENABLED=0 \
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
command -v mutmut >/dev/null || { echo "mutation.sh: mutmut is not installed (bash scripts/setup.sh)" >&2; exit 1; }
JOBS="${MUTMUT_JOBS:-$(nproc)}"
if [[ "${1:-}" == "--survivors" ]]; then
  pkg="${2:?usage: mutation.sh --survivors trainer|rollout|eval}"
  mapfile -t names < <(mutmut results | grep -E "^ +gaca_openrlhf\.$pkg\..*: (survived|no tests)$" | sed -E 's/^ +//; s/: [a-z ]+$//')
  [[ ${#names[@]} -gt 0 ]] || { echo "gaca_openrlhf/$pkg: no survivors to re-test"; exit 0; }
  mutmut run --max-children "$JOBS" "${names[@]}" >&2 || true
  left="$(mutmut results | grep -E "^ +gaca_openrlhf\.$pkg\..*: (survived|no tests)$" || true)"
  echo "gaca_openrlhf/$pkg: ${#names[@]} survivors re-tested, survivors: $(printf '%s' "$left" | grep -c . || true)"
  [[ -z "$left" ]] || printf '%s\n' "$left"
  exit 0
fi
if [[ $# -gt 0 ]]; then PACKAGES=("$@"); else PACKAGES=(trainer rollout eval); fi
total=0
PATTERN=""
if [[ $# -eq 2 && "$2" == gaca_openrlhf.* ]]; then PACKAGES=("$1"); PATTERN="$2"; fi
for pkg in "${PACKAGES[@]}"; do
  case "$pkg" in trainer|rollout|eval) ;; *) echo "mutation.sh: unknown package '$pkg' (trainer | rollout | eval)" >&2; exit 2 ;; esac
  echo "== mutmut: gaca_openrlhf/$pkg (fast tests) ==" >&2
  mutmut run --max-children "$JOBS" "${PATTERN:-gaca_openrlhf.$pkg.*}" >&2 || true
  all="$(mutmut results --all true | grep -E "^ +gaca_openrlhf\.$pkg\." || true)"
  checked="$(printf '%s\n' "$all" | grep -vc ": not checked$" || true)"
  killed="$(printf '%s\n' "$all" | grep -c ": killed$" || true)"
  survivors="$(printf '%s\n' "$all" | grep -E ": (survived|no tests)$" || true)"
  n="$(printf '%s' "$survivors" | grep -c . || true)"
  echo "gaca_openrlhf/$pkg: $checked mutants checked, $killed killed, survivors: $n"
  [[ -z "$survivors" ]] || printf '%s\n' "$survivors"
  total=$((total + n))
done
echo "survivors: $total"
