"""166 SFT steps (100 batches before upsampling) of the quickstart's recipe from the quickstart's base model, on the
demonstrations of its warm start; prints MKL_CBWR, steps, final loss and the saved weights' sha256 (16 hex digits).

    python results/alfworld_cpu_family_2026-12-05/short_sft.py OUT_DIR                 # this CPU's default kernels
    MKL_CBWR=AVX2 python results/alfworld_cpu_family_2026-12-05/short_sft.py OUT_DIR   # MKL's AVX2 code path
"""
import hashlib, sys, os
from gaca_openrlhf.sft.demos import load_demos
from gaca_openrlhf.sft.train import SFTConfig, train_sft
W = "/root/.cache/gaca_openrlhf/quickstart/warm-alfworld-small"
demos = load_demos(W + "/demos.jsonl")
pairs = [(d.prompt, d.response) for d in demos]
cfg = SFTConfig(epochs=100 * 8 / len(pairs), batch_size=8, lr=0.002, prompt_loss_weight=0.3, upsample="take=3,move=3",
                cycles=1, seed=0)
out = sys.argv[1]
st = train_sft("/root/.cache/gaca_openrlhf/agent-qwen2-v1-fb1b63d46d9a", pairs, out, cfg, log=lambda m: None)
print(os.environ.get("MKL_CBWR", "-"), st["steps"], st["loss_last10pct"],
      hashlib.sha256(open(out + "/model.safetensors", "rb").read()).hexdigest()[:16])
