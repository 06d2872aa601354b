# The run's size in nodes and GPUs (sourced by _common.sh and, before it, by smoke.sh; sourcing it twice is
# harmless). NUM_NODES (default 1) x GPUS_PER_NODE (default 8) GPUs = TOTAL_GPUS; README.md here, "Many nodes".
# N_GPUS is the deprecated name of GPUS_PER_NODE: accepted (with a notice) when NUM_NODES=1; with more nodes it is
# ambiguous (per node or in total?) and refused unless it equals GPUS_PER_NODE.
NUM_NODES="${NUM_NODES:-1}"
if [[ -n "${N_GPUS:-}" && -z "${GPUS_PER_NODE:-}" ]]; then
  if [[ "$NUM_NODES" != "1" ]]; then
    echo "error: N_GPUS=$N_GPUS is ambiguous with NUM_NODES=$NUM_NODES: set GPUS_PER_NODE (GPUs on each node)" >&2
    exit 2
  fi
  echo "[examples/gpu] N_GPUS is deprecated: use GPUS_PER_NODE (N_GPUS=$N_GPUS taken as GPUS_PER_NODE)" >&2
  GPUS_PER_NODE="$N_GPUS"
elif [[ -n "${N_GPUS:-}" && "$N_GPUS" != "$GPUS_PER_NODE" ]]; then
  echo "error: N_GPUS=$N_GPUS (deprecated) and GPUS_PER_NODE=$GPUS_PER_NODE disagree: unset N_GPUS" >&2; exit 2
fi
GPUS_PER_NODE="${GPUS_PER_NODE:-8}"
for _v in NUM_NODES GPUS_PER_NODE; do
  [[ "${!_v}" =~ ^[1-9][0-9]*$ ]] || { echo "error: $_v=${!_v} must be a positive integer" >&2; exit 2; }
done
unset _v
TOTAL_GPUS=$((NUM_NODES * GPUS_PER_NODE))  # actor / reference ranks (data-parallel size) and vLLM engines x TP
export NUM_NODES GPUS_PER_NODE                 # the scripts this one calls see the same sizes (no second notice)
