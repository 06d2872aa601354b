# The multi-node rehearsal's local Ray cluster (sourced by _common.sh; README.md here, "Rehearsal on CPU").
# With REHEARSAL=1 and NUM_NODES > 1, rehearsal_cluster_up starts NUM_NODES raylets on this machine, each with
# GPUS_PER_NODE logical GPUs (python -m gaca_openrlhf.cpu.local_cluster: `ray start --head` + `ray start --address`,
# a private temp dir and free ports, never `ray stop`) and exports RAY_ADDRESS, so that training attaches to it with
# the GPU path's plain ray.init() and the start-up preflight checks it, as on real nodes. The cluster is stopped
# when the script exits (EXIT trap, chained with any earlier one) and, if the script is killed without running its
# trap, by the cluster's guard process (it watches this script's pid). Nothing happens with NUM_NODES=1, DRY_RUN=1,
# without REHEARSAL=1, or when RAY_ADDRESS is already set (a cluster of your own is used as it is).
# Env: REHEARSAL_NODE_CPUS (logical CPUs per node, default 4 x GPUS_PER_NODE + 1), REHEARSAL_OBJECT_STORE_MB
# (object store per node, default 1024), REHEARSAL_NODE_ENV (whitespace-separated INDEX:KEY=VALUE items set in that
# node's environment: on one machine the nodes share everything else, so this is how a rehearsal makes one node
# differ, e.g. `1:PATH=/tmp/busy-gpu-stub:/usr/bin:/bin` to give node 1 a stand-in nvidia-smi; see
# REHEARSAL_GPU_CHECK in _common.sh).

# rehearsal_multinode: true when this run is a multi-node rehearsal
rehearsal_multinode() { [[ "${REHEARSAL:-0}" == "1" && "${NUM_NODES:-1}" != "1" ]]; }

# rehearsal_cluster_up: start the local cluster once (idempotent; the scripts call it before the preflight and
# before training)
rehearsal_cluster_up() {
  rehearsal_multinode || return 0
  [[ "${DRY_RUN:-0}" == "1" || -n "${GACA_REHEARSAL_CLUSTER:-}" ]] && return 0
  if [[ -n "${RAY_ADDRESS:-}" ]]; then
    echo "[rehearsal] NUM_NODES=$NUM_NODES: using the Ray cluster at RAY_ADDRESS=$RAY_ADDRESS (not starting one)" >&2
    return 0
  fi
  local dir address
  dir="$(mktemp -d /tmp/gaca-rc.XXXXXX)"  # short: Ray's socket paths live under it
  GACA_REHEARSAL_CLUSTER="$dir"
  # chain the cluster's stop in front of an earlier EXIT trap (e.g. the WebShop server's); set before starting, so
  # that a failed start is cleaned up too (stop is a no-op on an empty dir)
  local prev=""
  eval "local -a _t=($(trap -p EXIT))"
  [[ ${#_t[@]} -ge 3 ]] && prev="${_t[2]}"
  trap "rehearsal_cluster_down; ${prev}" EXIT
  echo "[rehearsal] starting a local Ray cluster: $NUM_NODES nodes x $GPUS_PER_NODE logical GPUs (state $dir)" >&2
  local -a node_env=()
  local item
  for item in ${REHEARSAL_NODE_ENV:-}; do node_env+=(--node-env "$item"); done
  if ! address="$("$PY" -m gaca_openrlhf.cpu.local_cluster start --num-nodes "$NUM_NODES" \
      --gpus-per-node "$GPUS_PER_NODE" --cpus-per-node "${REHEARSAL_NODE_CPUS:-$((4 * GPUS_PER_NODE + 1))}" \
      --object-store-mb "${REHEARSAL_OBJECT_STORE_MB:-1024}" --state-dir "$dir" --owner-pid $$ "${node_env[@]}")"; then
    echo "error: could not start the rehearsal's local Ray cluster (see above)" >&2
    exit 1
  fi
  export RAY_ADDRESS="$address" GACA_REHEARSAL_CLUSTER
  echo "[rehearsal] local Ray cluster of $NUM_NODES nodes at RAY_ADDRESS=$RAY_ADDRESS" >&2
}

# rehearsal_cluster_down: stop the cluster this script started (its own processes only); never fails the script
rehearsal_cluster_down() {
  [[ -n "${GACA_REHEARSAL_CLUSTER:-}" && -d "$GACA_REHEARSAL_CLUSTER" ]] || return 0
  "$PY" -m gaca_openrlhf.cpu.local_cluster stop --state-dir "$GACA_REHEARSAL_CLUSTER" >&2 \
    || echo "warning: stopping the local Ray cluster $GACA_REHEARSAL_CLUSTER failed (see above)" >&2
  return 0
}

# rehearsal_cluster_check: after training, fail the run unless every node was used (policy and reference ranks,
# vLLM engines), no episode failed and all ITERATIONS ran (python -m gaca_openrlhf.cpu.rehearsal_check)
rehearsal_cluster_check() {
  rehearsal_multinode || return 0
  [[ "${DRY_RUN:-0}" == "1" ]] && return 0
  "$PY" -m gaca_openrlhf.cpu.rehearsal_check "$SAVE_PATH" --num-nodes "$NUM_NODES" --iterations "$ITERATIONS" \
    || { echo "error: the $NUM_NODES-node rehearsal failed its checks (see above)" >&2; exit 1; }
}
