# Shared by examples/cpu/_common.sh and examples/gpu/_common.sh (sourced; needs PY). Callers set their defaults in
# WEBSHOP_DEFAULT_PORT (number or "free"), WEBSHOP_DEFAULT_PRODUCTS and WEBSHOP_DEFAULT_THREADS.
# start_webshop_server LOG: start `python -m webshop_server` under its supervisor (webshop_server.supervise restarts
# it when it dies; the episodes in flight then fail with the reason "server_restarted", new ones run on) on
# $WEBSHOP_PORT (default: WEBSHOP_DEFAULT_PORT, a number or "free") unless WEBSHOP_URL is set; sets WEBSHOP_URL, WEBSHOP_GOALS (number of goals) and
# WEBSHOP_CATALOG_GENERATED (true/false: the server's /health "generated"); stopped when the calling script exits.
# A server it starts gets a per-run token (WEBSHOP_RUN_TOKEN, exported) that its /health must echo: a leftover server
# answering on the port is refused, never taken for this run's (a WEBSHOP_URL given is used as it is).
# Catalog: WEBSHOP_DATA = WebShop's data folder (WEBSHOP_CATALOG=small|full|auto: the 1000-product or the full
# files). A generated stand-in catalog of WEBSHOP_PRODUCTS products is used only when asked with WEBSHOP_GENERATED=1
# (numbers measured on it are not comparable with published WebShop results); otherwise the script refuses.
start_webshop_server() {
  local log="$1"
  # a server given by WEBSHOP_URL is used as it is: no token of an earlier start may be asked of it
  [[ -z "${WEBSHOP_URL:-}" ]] || unset WEBSHOP_RUN_TOKEN
  if [[ -z "${WEBSHOP_URL:-}" ]]; then
    if [[ -z "${WEBSHOP_PORT:-}" && "${WEBSHOP_DEFAULT_PORT:-3000}" == free ]]; then
      WEBSHOP_PORT="$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    fi
    WEBSHOP_PORT="${WEBSHOP_PORT:-${WEBSHOP_DEFAULT_PORT:-3000}}"
    # bound to WEBSHOP_BIND_HOST, reached at WEBSHOP_URL_HOST (both 127.0.0.1 unless a caller sets them: several
    # nodes, examples/gpu/_common.sh)
    WEBSHOP_URL="http://${WEBSHOP_URL_HOST:-127.0.0.1}:$WEBSHOP_PORT"
    local data_args
    if [[ -n "${WEBSHOP_DATA:-}" ]]; then
      data_args=(--data-dir "$WEBSHOP_DATA" --catalog "${WEBSHOP_CATALOG:-auto}")
    elif [[ "${WEBSHOP_GENERATED:-0}" == "1" ]]; then
      data_args=(--num-products "${WEBSHOP_PRODUCTS:-${WEBSHOP_DEFAULT_PRODUCTS:-20000}}" --seed 0)
    elif [[ "${DRY_RUN:-0}" == "1" ]]; then
      data_args=(--data-dir '<WEBSHOP_DATA>')
    else
      echo "error: WebShop needs its data: set WEBSHOP_DATA to WebShop's data folder (items_shuffle*.json," \
           "items_ins_v2*.json, items_human_ins.json; WEBSHOP_CATALOG=small for the 1000-product files), or" \
           "WEBSHOP_GENERATED=1 to train on a generated stand-in catalog (not comparable with published numbers)" >&2
      exit 2
    fi
    # a token of this run, echoed by the server's /health: a leftover server already answering on the port (of an
    # earlier run, perhaps of another catalog) is told from ours instead of being taken for it
    WEBSHOP_RUN_TOKEN="run-$(date +%s)-$$-$RANDOM"
    export WEBSHOP_RUN_TOKEN
    local cmd=("$PY" -m webshop_server.supervise --pid-file "$(dirname "$log")/webshop_server.pid" --
               --host "${WEBSHOP_BIND_HOST:-127.0.0.1}" --port "$WEBSHOP_PORT" "${data_args[@]}" --production
               --threads "${WEBSHOP_THREADS:-${WEBSHOP_DEFAULT_THREADS:-32}}" --run-token "$WEBSHOP_RUN_TOKEN")
    if [[ "${DRY_RUN:-0}" == "1" ]]; then
      { printf '[dry-run] webshop server: '; printf '%q ' "${cmd[@]}"; printf '\n'; } >&2
      return 0
    fi
    mkdir -p "$(dirname "$log")"
    "${cmd[@]}" > "$log" 2>&1 &
    WEBSHOP_SERVER_PID=$!
    trap 'kill $WEBSHOP_SERVER_PID 2>/dev/null || true' EXIT
  fi
  [[ "${DRY_RUN:-0}" == "1" ]] && return 0
  local health=""
  for _ in $(seq 1 1800); do  # first start on WebShop's full files builds the catalog cache (minutes)
    health="$("$PY" -c "import json,urllib.request; h=json.load(urllib.request.urlopen('$WEBSHOP_URL/health', timeout=2)); print(h['goals'], str(h.get('generated', 'unknown')).lower(), h.get('run_token') or '-')" 2>/dev/null)" && break
    if [[ -n "${WEBSHOP_SERVER_PID:-}" ]] && ! kill -0 "$WEBSHOP_SERVER_PID" 2>/dev/null; then
      echo "webshop server died, see $log" >&2; exit 1
    fi
    sleep 1
  done
  [[ -n "$health" ]] || { echo "WebShop server $WEBSHOP_URL not healthy" >&2; exit 1; }
  local token
  read -r WEBSHOP_GOALS WEBSHOP_CATALOG_GENERATED token <<< "$health"
  if [[ -n "${WEBSHOP_SERVER_PID:-}" && "$token" != "${WEBSHOP_RUN_TOKEN:-}" ]]; then
    echo "error: $WEBSHOP_URL/health is answered by another WebShop server (run token '$token', not this run's):" \
         "a leftover server holds port $WEBSHOP_PORT. Stop it (find it: ss -ltnp 'sport = :$WEBSHOP_PORT'), or" \
         "choose another WEBSHOP_PORT, or set WEBSHOP_URL to use a running server on purpose" >&2
    exit 1
  fi
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
