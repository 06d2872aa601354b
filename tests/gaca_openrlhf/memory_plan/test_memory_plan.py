"""gaca_openrlhf/memory_plan/: each formula against a hand computation on made-up shapes, scaling, chunking,
config.json parity, the CLI (tables, exit status, bad input)."""
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from gaca_openrlhf import memory_plan as mp
from gaca_openrlhf.memory_plan import GIB, ModelSpec, Plan

ROOT = Path(__file__).resolve().parents[3]

# hidden 8, 2 layers, 2 heads (head dim 4), 1 KV head (kv dim 4), MLP 16, vocab 32, tied, q/k/v biases
TINY = ModelSpec("tiny", hidden=8, layers=2, heads=2, kv_heads=1, intermediate=16, vocab=32, tied=True)
# layer: q 8*8 + k, v 2*8*4 + biases 8+4+4 + o 8*8 + MLP 3*8*16 + norms 2*8 = 64+64+16+64+384+16 = 608
# params: embedding 32*8 (tied: once) + 2*608 + final norm 8 = 1480
TINY_PLAN = Plan(TINY, gpus=4, tp=2, micro_batch=2, train_micro_batch=1, prompt_len=6, response_len=2,
                 vllm_mem=0.5, gpu_mem_gb=1.0, zero=3)   # seq 8: experience T = 16, training T = 8
CTX = 1.5 * GIB
ASLEEP = 1.0 * GIB  # what a sleeping vLLM worker keeps (experience and training phases; issue 37)


def _bytes(phase):
    return {k: v * GIB for k, v in phase.components.items()}


def test_tiny_shapes_by_hand():
    assert TINY.layer_params == 608
    assert TINY.params == 1480
    untied = replace(TINY, tied=False)
    assert untied.params == 1480 + 256
    assert replace(TINY, attention_bias=False).layer_params == 608 - 16


def test_builtin_models_match_their_cards():
    s15, s7 = mp.BUILTIN["1.5b"], mp.BUILTIN["7b"]
    assert (s15.hidden, s15.layers, s15.heads, s15.kv_heads, s15.intermediate, s15.vocab, s15.tied) == \
        (1536, 28, 12, 2, 8960, 151936, True)
    assert (s7.hidden, s7.layers, s7.heads, s7.kv_heads, s7.intermediate, s7.vocab, s7.tied) == \
        (3584, 28, 28, 4, 18944, 152064, False)
    assert round(s15.params / 1e9, 2) == 1.54 and round(s7.params / 1e9, 2) == 7.62
    assert s15.params == 1_543_714_304 and s7.params == 7_615_616_512


def test_rollout_by_hand():
    p = mp.rollout_phase(TINY_PLAN)
    b = _bytes(p)
    assert b["vllm"] == pytest.approx(0.5 * GIB)
    assert b["states"] == pytest.approx(2 * (2 * 1480 / 4))   # actor + reference bf16 shards
    assert b["ctx"] == pytest.approx(CTX)
    assert b["layer"] == b["logits"] == b["acts"] == b["zero3"] == 0
    assert p.total * GIB == pytest.approx(0.5 * GIB + 1480 + CTX)
    # vLLM weights 2P/TP = 1480 bytes; KV per token and GPU 2 (K, V) x 2 layers x kv 4 x 2 bytes / min(TP, kv heads 1)
    assert mp.vllm_weight_bytes(TINY, 2) == 1480
    assert mp.kv_bytes_per_token(TINY, 2) == 32
    assert p.ok


def test_experience_by_hand():
    b = _bytes(mp.experience_phase(TINY_PLAN))
    assert b["states"] == pytest.approx(1480)                  # 2 x 2P/N
    assert b["zero3"] == pytest.approx(2 * 608)                # max(layer 608, V x h 256) in bf16
    assert b["layer"] == pytest.approx(16 * (4 * 8 + 8 * 16))  # T x (4h + 8I) = 2560
    assert b["logits"] == pytest.approx(6 * 16 * 32)           # bf16 + fp32 logits over T x V = 3072
    assert b["vllm"] == pytest.approx(ASLEEP)                  # vLLM asleep, not nothing
    assert mp.experience_phase(TINY_PLAN).total * GIB == pytest.approx(1480 + 1216 + 3072 + ASLEEP + CTX)
    ent = _bytes(mp.experience_phase(replace(TINY_PLAN, experience_entropy=True)))
    assert ent["logits"] == pytest.approx(12 * 16 * 32)


def test_training_by_hand():
    p = mp.training_phase(TINY_PLAN)
    b = _bytes(p)
    assert b["states"] == pytest.approx((2 + 4 + 12 + 2) * 1480 / 4)   # 7400
    assert b["zero3"] == pytest.approx(2 * 2 * 608)
    assert b["acts"] == pytest.approx(2 * 8 * 8 * 2)                   # L x T x h x 2 = 256
    assert b["layer"] == pytest.approx(8 * (22 * 8 + 6 * 4 + 12 * 16))  # 3136
    assert b["logits"] == pytest.approx(20 * 8 * 32)                   # 5120
    assert b["vllm"] == pytest.approx(ASLEEP)
    assert p.total * GIB == pytest.approx(7400 + 2432 + 256 + 5120 + ASLEEP + CTX)
    no_ent = _bytes(mp.training_phase(replace(TINY_PLAN, entropy=False)))
    assert no_ent["logits"] == pytest.approx(8 * 8 * 32)


def test_layer_wins_the_max_when_larger_than_logits():
    plan = replace(TINY_PLAN, logits_chunk=1)                          # logits 20 x 1 x 32 = 640 < layer 3136
    p = mp.training_phase(plan)
    assert p.total * GIB == pytest.approx(7400 + 2432 + 256 + 3136 + ASLEEP + CTX)


def test_zero_stages_by_hand():
    p = 1480
    assert mp.train_state_bytes(TINY, 4, 3) == pytest.approx(18 * p / 4)
    assert mp.train_state_bytes(TINY, 4, 2) == pytest.approx(2 * p + 16 * p / 4)
    assert mp.train_state_bytes(TINY, 4, 1) == pytest.approx(6 * p + 12 * p / 4)
    assert mp.train_state_bytes(TINY, 4, 0) == pytest.approx(18 * p)
    assert mp.gathered_module_bytes(TINY, 2) == 0
    assert mp.bf16_shard_bytes(TINY, 4, 2) == 2 * p


def test_fits_uses_ten_percent_margin():
    ph = mp.Phase("x", {}, total=90.0, gpu_mem_gb=100.0)
    assert ph.fits
    assert not mp.Phase("x", {}, total=90.01, gpu_mem_gb=100.0).fits
    assert not mp.Phase("x", {}, total=1.0, gpu_mem_gb=100.0, ok=False).fits


def test_rollout_does_not_fit_when_vllm_weights_exceed_pool():
    plan = replace(Plan(mp.BUILTIN["7b"]), vllm_mem=0.1, gpu_mem_gb=80.0)   # 8 GB pool < 14.2 GB of weights
    p = mp.rollout_phase(plan)
    assert not p.ok and not p.fits and "do not fit" in p.note
    assert mp.rollout_phase(replace(plan, tp=2)).ok                          # 7.1 GB per GPU at TP 2


@pytest.mark.parametrize("phase", [mp.experience_phase, mp.training_phase])
def test_peak_linear_in_micro_batch_and_sequence(phase):
    base = Plan(mp.BUILTIN["1.5b"], prompt_len=2048, response_len=512)
    tot = [phase(replace(base, micro_batch=m, train_micro_batch=m)).total for m in (1, 2, 3, 4)]
    d = [b - a for a, b in zip(tot, tot[1:])]
    assert d[0] > 0 and d == pytest.approx([d[0]] * 3)
    tot = [phase(replace(base, prompt_len=512 * k, response_len=512)).total for k in (1, 3, 5, 7)]
    d = [b - a for a, b in zip(tot, tot[1:])]
    assert d[0] > 0 and d == pytest.approx([d[0]] * 3)


@pytest.mark.parametrize("chunks", [2, 4, 9])
def test_chunking_divides_logits_by_number_of_chunks(chunks):
    base = Plan(mp.BUILTIN["1.5b"], micro_batch=4, train_micro_batch=4, prompt_len=4096, response_len=512)
    tokens = 4 * 4608
    assert tokens % chunks == 0
    full = mp.training_phase(base).components["logits"]
    chunked = mp.training_phase(replace(base, logits_chunk=tokens // chunks)).components["logits"]
    assert chunked == pytest.approx(full / chunks)
    # experience: the policy's forward is chunked, the reference model's (OpenRLHF's forward) is not: its bf16 +
    # fp32 logits (6 bytes per entry) stay; with EMPG's experience entropy (12) the policy's share shrinks to it
    for entropy in (False, True):
        plan = replace(base, experience_entropy=entropy)
        exp = mp.experience_phase(replace(plan, logits_chunk=tokens // chunks)).components["logits"] * GIB
        policy = (12 if entropy else 6) * tokens // chunks * 151936
        assert exp == pytest.approx(max(policy, 6 * tokens * 151936))
    # a chunk longer than the micro batch changes nothing
    assert mp.training_phase(replace(base, logits_chunk=10 ** 6)).components["logits"] == \
        pytest.approx(mp.training_phase(base).components["logits"])


QWEN15_CONFIG = {
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 1536, "intermediate_size": 8960,
    "num_hidden_layers": 28, "num_attention_heads": 12, "num_key_value_heads": 2, "vocab_size": 151936,
    "tie_word_embeddings": True, "torch_dtype": "bfloat16", "max_position_embeddings": 32768,
}
QWEN7_CONFIG = dict(QWEN15_CONFIG, hidden_size=3584, intermediate_size=18944, num_attention_heads=28,
                    num_key_value_heads=4, vocab_size=152064, tie_word_embeddings=False)


@pytest.mark.parametrize("key,cfg", [("1.5b", QWEN15_CONFIG), ("7b", QWEN7_CONFIG)])
def test_config_json_matches_builtin(tmp_path, key, cfg):
    folder = tmp_path / key
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    builtin = mp.BUILTIN[key]
    for arg in (str(folder / "config.json"), str(folder)):
        spec = mp.load_spec(arg)
        assert replace(spec, name=builtin.name) == builtin
        a = [p.components for p in mp.estimate(Plan(spec, tp=2))]
        b = [p.components for p in mp.estimate(Plan(builtin, tp=2))]
        assert a == b


def test_config_json_bad(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"hidden_size": 8}))
    with pytest.raises(ValueError, match="num_hidden_layers"):
        mp.load_spec(str(bad))
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="cannot read"):
        mp.load_spec(str(bad))
    with pytest.raises(ValueError, match="unknown model 'gpt5'"):
        mp.load_spec("gpt5")


def test_train_micro_mirrors_common_sh():
    assert mp.train_micro(4, 64, 8) == 4
    assert mp.train_micro(16, 64, 8) == 8
    assert mp.train_micro(3, 64, 8) == 2
    assert mp.train_micro(5, 256, 8) == 4
    with pytest.raises(ValueError, match="multiple of gpus"):
        mp.train_micro(4, 60, 8)


@pytest.mark.parametrize("kw,msg", [
    (dict(gpus=8, tp=3), "tp 3 does not divide gpus 8"), (dict(micro_batch=-1), "micro-batch"),
    (dict(prompt_len=0), "prompt-len"), (dict(vllm_mem=1.2), "vllm-mem"), (dict(gpu_mem_gb=-80), "gpu-mem-gb"),
    (dict(zero=4), "zero"), (dict(logits_chunk=-1), "logits-chunk"), (dict(token_budget=-1), "token-budget")])
def test_plan_rejects_bad_values(kw, msg):
    with pytest.raises(ValueError, match=msg):
        Plan(mp.BUILTIN["1.5b"], **kw)


def test_spec_rejects_bad_values():
    with pytest.raises(ValueError, match="hidden"):
        ModelSpec("x", hidden=-8, layers=2, heads=2, kv_heads=1, intermediate=16, vocab=32, tied=True)


def test_suggestion_is_the_largest_that_fits():
    plan = mp.recipe_plan("7b", "webshop", 2)
    assert not mp.fits(plan)
    lines = mp.suggest(plan, 64)
    assert lines[0].startswith("MICRO_BATCH=3 (training micro batch 2)")
    assert mp.fits(replace(plan, micro_batch=3, train_micro_batch=2))
    assert lines[1].startswith("--logits-chunk 8192 ")  # 16384 before vLLM's asleep memory was counted (issue 37)
    assert mp.fits(replace(plan, logits_chunk=8192)) and not mp.fits(replace(plan, logits_chunk=8192 * 2))
    assert mp.suggest(mp.recipe_plan("1.5b", "alfworld", 1), 256) == []


def run_cli(capsys, *args):
    rc = mp.main(list(args))
    return rc, capsys.readouterr().out


def test_cli_recipes_today(capsys):
    rc, out = run_cli(capsys, "--recipes")
    for label in ("1.5b alfworld", "1.5b webshop", "7b alfworld", "7b webshop"):
        assert sum(line.startswith(f"| {label} ") for line in out.splitlines()) == 3
        assert f"{label}: token budget 32768; the largest that fits" in out and "logits chunk 4096): 32768" in out
        assert "packed micro batches of <= 32768 tokens (token budget), logits chunk 4096" in out
    # the four recipes at their defaults (packed micro-batches of <= 32768 tokens, chunked log-probs of 4096 tokens)
    # fit with the 10 % margin (every 7B engine TP 1)
    assert rc == 0 and "DOES NOT FIT" not in out and "all fit" in out
    assert "7b webshop: Qwen2.5-7B-Instruct (7.62B params), 8 GPUs x 80 GB, vLLM TP 1" in out
    # LOGPROB_CHUNK=0: full logits, at the budgets the scripts then use (20480 / 16384), fit too
    rc, out = run_cli(capsys, "--recipes", "--logits-chunk", "0")
    for label, budget in (("1.5b alfworld", 20480), ("1.5b webshop", 20480), ("7b alfworld", 16384),
                          ("7b webshop", 16384)):
        assert f"{label}: token budget {budget}; the largest that fits" in out
        assert f"packed micro batches of <= {budget} tokens (token budget), logits chunk none" in out
    assert rc == 0 and "DOES NOT FIT" not in out and "all fit" in out
    # PACKING=0 LOGPROB_CHUNK=0: fixed padded micro-batches, full logits (7B WebShop at micro batch 2) fit too
    rc, out = run_cli(capsys, "--recipes", "--token-budget", "0", "--logits-chunk", "0")
    assert rc == 0 and "all fit" in out and "token budget" not in out
    assert "micro batch 2 (log-prob) / 2 (training), logits chunk none" in out


def test_cli_recipes_exit_status(capsys):
    rc, out = run_cli(capsys, "--recipes", "--gpu-mem-gb", "20")
    assert rc == 1 and out.count("DOES NOT FIT") == 4
    rc, out = run_cli(capsys, "--recipes", "--gpu-mem-gb", "141")
    assert rc == 0 and "DOES NOT FIT" not in out and "all fit" in out
    rc, out = run_cli(capsys, "--recipes", "--logits-chunk", "4096")
    assert rc == 0
    rc, out = run_cli(capsys, "--recipes", "--logits-chunk", "0", "--token-budget", "32768")  # full logits: no
    assert rc == 1 and out.count("DOES NOT FIT") == 4


def test_cli_single(capsys):
    rc, out = run_cli(capsys, "--model", "1.5b", "--env", "alfworld")
    assert rc == 0
    rows = [l for l in out.splitlines() if l.startswith("| 1.5b alfworld")]
    assert [r.split("|")[2].strip() for r in rows] == ["rollout", "experience", "training"]
    assert "seq 2048+512" in out
    assert "packed micro batches of <= 32768 tokens (token budget), logits chunk 4096" in out  # the scripts' defaults
    rc, out = run_cli(capsys, "--model", "7b", "--env", "webshop", "--tp", "2", "--micro-batch", "2", "--token-budget",
                      "0", "--logits-chunk", "0")
    assert rc == 0 and "micro batch 2 (log-prob) / 2 (training), logits chunk none" in out
    rc, out = run_cli(capsys, "--model", "7b", "--env", "webshop", "--tp", "2", "--micro-batch", "2", "--token-budget",
                      "0")  # PACKING=0 keeps the scripts' chunk
    assert rc == 0 and "micro batch 2 (log-prob) / 2 (training), logits chunk 4096" in out
    rc, out = run_cli(capsys, "--model", "7b", "--env", "webshop", "--logits-chunk", "4096")  # budget: the recipe's
    assert rc == 0 and "packed micro batches of <= 32768 tokens (token budget), logits chunk 4096" in out
    rc, out = run_cli(capsys, "--model", "7b", "--env", "webshop", "--logits-chunk", "0")  # the full-logits budget
    assert rc == 0 and "packed micro batches of <= 16384 tokens (token budget), logits chunk none" in out


def test_cli_module_entry_point():
    r = subprocess.run([sys.executable, "-m", "gaca_openrlhf.memory_plan", "--model", "7b", "--env", "webshop",
                        "--tp", "2", "--gpu-mem-gb", "40"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 1, r.stderr
    assert "DOES NOT FIT: 7b webshop" in r.stdout


@pytest.mark.parametrize("args,msg", [
    (["--model", "13b", "--env", "alfworld"], "unknown model '13b'"),
    (["--model", "7b", "--env", "alfworld", "--gpus", "8", "--tp", "3"], "--tp 3 does not divide --gpus 8"),
    (["--model", "7b", "--env", "alfworld", "--micro-batch", "-2"], "must be a positive integer"),
    (["--model", "7b", "--env", "alfworld", "--response-len", "0"], "must be a positive integer"),
    (["--model", "7b", "--env", "alfworld", "--gpu-mem-gb", "-80"], "must be a positive number"),
    (["--model", "7b", "--env", "alfworld", "--vllm-mem", "1.5"], "must be in (0, 1)"),
    (["--model", "7b", "--env", "alfworld", "--logits-chunk", "-1"], "must be >= 0"),
    (["--model", "7b", "--env", "alfworld", "--mini-batch-steps", "60"], "multiple of gpus"),
    (["--model", "7b", "--env", "mars"], "invalid choice"),
    (["--model", "7b"], "give --model and --env"),
    (["--recipes", "--model", "7b"], "only --gpu-mem-gb, --token-budget and --logits-chunk apply"),
    (["--model", "7b", "--env", "alfworld", "--token-budget", "-1"], "must be >= 0"),
])
def test_cli_bad_input(capsys, args, msg):
    with pytest.raises(SystemExit) as e:
        mp.main(args)
    assert e.value.code == 2
    assert msg in capsys.readouterr().err


def _script_default(path, var):
    import re
    m = re.search(r'\b' + var + r'="\$\{' + var + r':-([^}]*)\}"', (ROOT / "examples/gpu" / path).read_text())
    assert m, f"{var} default not found in {path}"
    return m.group(1)


def _set_packing_args(**env):
    """_common.sh's ``set_packing_args`` run alone in bash (its text cut out of the file, under _common.sh's ``set
    -euo pipefail``) with ``env``'s variables: (PACKING, TOKEN_BUDGET, LOGPROB_CHUNK) it leaves, and PACKING_ARGS."""
    import os
    import re

    text = (ROOT / "examples/gpu/_common.sh").read_text()
    m = re.search(r"^set_packing_args\(\) \{\n.*?^\}\n", text, re.S | re.M)
    assert m, "set_packing_args not found in _common.sh"
    script = ("set -euo pipefail\n" + m.group(0) + "set_packing_args\n"
              'echo "$PACKING $TOKEN_BUDGET $LOGPROB_CHUNK"\necho "${PACKING_ARGS[*]}"\n')
    r = subprocess.run(["bash", "-c", script], env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env},
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    values, args = r.stdout.splitlines()
    packing, budget, chunk = values.split()
    return (packing, int(budget), int(chunk)), args.split()


def test_recipe_defaults_match_the_scripts():
    assert int(_script_default("_nodes.sh", "GPUS_PER_NODE")) == 8
    assert int(_script_default("_common.sh", "MICRO_BATCH")) == 4
    # VLLM_MEM: no constant default; each _train_<env>.sh asks the plan (tests/examples/test_gpu_scripts.py)
    for env in ("alfworld", "webshop"):
        assert f"plan_vllm_mem {env}" in (ROOT / f"examples/gpu/_train_{env}.sh").read_text()
    assert int(_script_default("_common.sh", "ZERO_STAGE")) == 3
    for env in ("alfworld", "webshop"):
        d = mp.ENV_DEFAULTS[env]
        assert int(_script_default(f"_train_{env}.sh", "PROMPT_MAX_LEN")) == d["prompt_len"]
        assert int(_script_default(f"_train_{env}.sh", "MAX_NEW_TOKENS")) == d["response_len"]
        assert int(_script_default(f"_train_{env}.sh", "MINI_BATCH_STEPS")) == d["mini_batch_steps"]
    assert "--actor.entropy_coef 0.001" in (ROOT / "examples/gpu/_common.sh").read_text()
    assert int(_script_default("_common.sh", "VLLM_TP")) == 1
    # 7B WebShop's micro batch: the recipe table says 2, the script lowers MICRO_BATCH to 2 for a 7B model
    assert [mb for m, e, _, mb in mp.RECIPES if (m, e) == ("7b", "webshop")] == [2]
    assert 'MICRO_BATCH=2; fi' in (ROOT / "examples/gpu/_train_webshop.sh").read_text()


@pytest.mark.parametrize("model, name", [("1.5b", "Qwen/Qwen2.5-1.5B-Instruct"), ("7b", "Qwen/Qwen2.5-7B-Instruct")])
def test_script_packing_defaults_are_the_recipes(model, name):
    """_common.sh's set_packing_args (every train script's PACKING_ARGS) defaults to the plan's RECIPE_LOGITS_CHUNK
    and RECIPE_TOKEN_BUDGET (the same for both environments: the function does not know the environment), and with
    LOGPROB_CHUNK=0 to RECIPE_TOKEN_BUDGET_FULL_LOGITS; a given TOKEN_BUDGET is kept either way."""
    for env in ("alfworld", "webshop"):
        (packing, budget, chunk), args = _set_packing_args(MODEL=name)
        assert (packing, budget, chunk) == ("1", mp.RECIPE_TOKEN_BUDGET[(model, env)], mp.RECIPE_LOGITS_CHUNK)
        assert args == ["--run.logprob_chunk_size", str(chunk), "--ds.packing_samples", "--train.dynamic_batch_enable",
                        "--train.max_tokens_per_gpu", str(budget), "--rollout.max_tokens_per_gpu", str(budget)]
        (_, budget, chunk), args = _set_packing_args(MODEL=name, LOGPROB_CHUNK="0")
        assert (budget, chunk) == (mp.RECIPE_TOKEN_BUDGET_FULL_LOGITS[(model, env)], 0)
        assert "--run.logprob_chunk_size" not in args
        assert mp.recipe_token_budget(model, env, 0) == budget
        assert mp.recipe_token_budget(model, env, mp.RECIPE_LOGITS_CHUNK) == mp.RECIPE_TOKEN_BUDGET[(model, env)]
    assert _set_packing_args(MODEL=name, LOGPROB_CHUNK="0", TOKEN_BUDGET="8192")[0][1:] == (8192, 0)
    assert _set_packing_args(MODEL=name, TOKEN_BUDGET="1024", LOGPROB_CHUNK="256")[0][1:] == (1024, 256)  # rehearsal
    assert _set_packing_args(MODEL=name, PACKING="0")[1] == ["--run.logprob_chunk_size", "4096"]


def test_token_budget_micro_batches_by_hand():
    """T = max(B, prompt + response) tokens for both passes, whatever MICRO_BATCH (module docstring)."""
    plan = replace(TINY_PLAN, token_budget=20)                        # seq 8: T = 20 in both passes
    assert (plan.experience_tokens, plan.train_tokens) == (20, 20)
    b = _bytes(mp.training_phase(plan))
    assert b["acts"] == pytest.approx(2 * 20 * 8 * 2) and b["logits"] == pytest.approx(20 * 20 * 32)
    assert b["layer"] == pytest.approx(20 * (22 * 8 + 6 * 4 + 12 * 16))
    e = _bytes(mp.experience_phase(plan))
    assert e["layer"] == pytest.approx(20 * (4 * 8 + 8 * 16)) and e["logits"] == pytest.approx(6 * 20 * 32)
    assert mp.training_phase(replace(plan, micro_batch=7, train_micro_batch=5)).total == \
        pytest.approx(mp.training_phase(plan).total)
    short = replace(TINY_PLAN, token_budget=3)                        # a sample longer than the budget: alone
    assert (short.experience_tokens, short.train_tokens) == (8, 8)
    assert (TINY_PLAN.experience_tokens, TINY_PLAN.train_tokens) == (16, 8)  # no budget: micro batch x seq


def test_recipe_token_budgets_are_the_plans_choice():
    """RECIPE_TOKEN_BUDGET (what the scripts pass, with chunked log-probs of RECIPE_LOGITS_CHUNK tokens) is what
    recommended_token_budget picks for each recipe with that chunk: the 32768 ceiling, where every phase fits.
    RECIPE_TOKEN_BUDGET_FULL_LOGITS (the scripts' budget with LOGPROB_CHUNK=0) is its pick with full logits: below
    the ceiling, the next step of 4096 does not fit."""
    for plan, (m, e, _, _) in zip(mp.default_recipe_plans(), mp.RECIPES):
        mbs = mp.ENV_DEFAULTS[e]["mini_batch_steps"]
        assert plan.logits_chunk == mp.RECIPE_LOGITS_CHUNK == 4096 and mp.fits(plan)
        assert plan.token_budget == mp.RECIPE_TOKEN_BUDGET[(m, e)] == mp.recommended_token_budget(plan, mbs) == \
            mp.TOKEN_BUDGET_CEILING
        assert plan.logits_chunk < plan.token_budget  # several chunks per micro-batch
    for plan, (m, e, _, _) in zip(mp.default_recipe_plans(logits_chunk=0), mp.RECIPES):
        mbs = mp.ENV_DEFAULTS[e]["mini_batch_steps"]
        assert plan.token_budget == mp.RECIPE_TOKEN_BUDGET_FULL_LOGITS[(m, e)] == mp.recommended_token_budget(plan, mbs)
        assert plan.logits_chunk == 0 and mp.fits(plan)
        assert plan.token_budget < mp.TOKEN_BUDGET_CEILING and plan.token_budget % mp.TOKEN_BUDGET_STEP == 0
        assert not mp.fits(replace(plan, token_budget=plan.token_budget + mp.TOKEN_BUDGET_STEP))
        assert not mp.fits(replace(plan, token_budget=mp.RECIPE_TOKEN_BUDGET[(m, e)]))  # chunking is what allows it
    # one GPU's share of a mini batch caps it: 64 step samples of 4608 tokens on 64 GPUs: 4608 -> 8192 (step 4096)
    plan = mp.recipe_plan("1.5b", "webshop", 1, gpus=64, token_budget=4096, logits_chunk=4096)
    assert mp.recommended_token_budget(plan, 64) == 8192
    # a GPU too small for the ceiling: the largest multiple of 4096 that fits
    # 7B WebShop, full logits (42 GB: since vLLM's asleep GB is counted, a 40 GB GPU fits no budget at all)
    small = replace(mp.default_recipe_plans(logits_chunk=0)[3], gpu_mem_gb=42.0)
    got = mp.recommended_token_budget(small, 64)
    assert got and got < 16384 and mp.fits(replace(small, token_budget=got))
    assert not mp.fits(replace(small, token_budget=got + 4096))
    assert mp.largest_token_budget(replace(small, gpu_mem_gb=10.0)) is None


def test_suggestions_for_a_token_budget_plan():
    plan = replace(mp.default_recipe_plans(logits_chunk=0)[3], gpu_mem_gb=42.0)  # 7B WebShop at 16384, 42 GB GPU
    assert not mp.fits(plan)
    lines = mp.suggest(plan, 64)
    assert lines[0].startswith("--token-budget ") and "MICRO_BATCH" not in " ".join(lines)
    budget = int(lines[0].split()[1])
    assert budget % 1024 == 0 and mp.fits(replace(plan, token_budget=budget))
    assert not mp.fits(replace(plan, token_budget=budget + 1024))
    assert lines[1].startswith("--logits-chunk ") and "at token budget 16384" in lines[1]
    plan = replace(mp.default_recipe_plans(logits_chunk=0)[3], token_budget=32768)  # full logits, 32768: 93 GB
    assert not mp.fits(plan)
    lines = mp.suggest(plan, 64)
    assert lines[0].startswith("--token-budget ") and lines[1].startswith("--logits-chunk ")
    assert "at token budget 32768" in lines[1]
    chunk = int(lines[1].split()[1])
    assert mp.fits(replace(plan, logits_chunk=chunk)) and not mp.fits(replace(plan, logits_chunk=2 * chunk))


def test_readme_table_is_the_current_output(capsys):
    mp.main(["--recipes"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    section = (ROOT / "examples/gpu/README.md").read_text().split("## Memory plan", 1)[1].split("\n## ", 1)[0]
    assert len(rows) == 13 and all(row in section for row in rows)


# ---- issue 37: VLLM_MEM from the plan; vLLM asleep ----

def test_vllm_share_by_hand():
    # TINY at TP 2 on a 1 GiB GPU: weights 2P/TP = 1480 B, KV 32 B/token x 3 seqs x 8 tokens x 1.25 = 960 B, plus
    # the non-KV 2 GiB: 2 GiB + 2440 B of 1 GiB -> 2.0000023 -> rounded up to 0.05 steps: capped at 0.95
    share, detail = mp.vllm_share(TINY, 1.0, 2, 3, 8)
    assert share == 0.95 and "KV cache 0.0 GiB (3 sequences x 8 tokens x 1.25)" in detail
    # 7B WebShop recipe: 14.18 GiB weights + 2 + KV 57344 B/token x 16 x 4608 x 1.25 = 4.92 GiB -> 21.1 of 80 -> 0.3
    s7 = mp.BUILTIN["7b"]
    assert mp.kv_bytes_per_token(s7, 1) == 2 * 28 * 512 * 2
    share, _ = mp.vllm_share(s7, 80.0, 1, 16, 4608)
    need = 2 * s7.params + 2 * GIB + 1.25 * 16 * 4608 * 57344
    assert share == 0.3 and 0.25 < need / (80 * GIB) <= 0.3
    # the floor: 1.5B needs 7.3 GiB (9 %): 0.1
    assert mp.vllm_share(mp.BUILTIN["1.5b"], 80.0, 1, 16, 4608)[0] == 0.1
    with pytest.raises(ValueError, match="must be positive"):
        mp.vllm_share(s7, 80.0, 1, 0, 4608)


def test_recipes_take_the_planned_share_far_below_the_old_constant():
    # Guards: the constant 0.6 (48 GB per GPU reserved for a KV cache of ~1-5 GB) coming back.
    shares = {p.label: p.vllm_share for p in mp.default_recipe_plans()}
    assert shares == {"1.5b alfworld": 0.1, "1.5b webshop": 0.1, "7b alfworld": 0.25, "7b webshop": 0.3}
    plan = mp.default_recipe_plans()[3]
    assert replace(plan, gpu_mem_gb=40.0).vllm_share == 0.55  # re-planned for a smaller GPU, not kept at 0.3
    assert replace(plan, vllm_mem=0.6).vllm_share == 0.6      # a share given is kept
    assert mp.rollout_phase(plan).components["vllm"] == pytest.approx(0.3 * 80)


def test_vllm_asleep_counts_in_experience_and_training_only():
    # Guards: a sleeping vLLM taken as using nothing (the plan's training peak too low by its resident memory).
    plan = mp.default_recipe_plans()[0]
    assert mp.experience_phase(plan).components["vllm"] == mp.training_phase(plan).components["vllm"] == \
        mp.VLLM_ASLEEP_GB == 1.0
    assert mp.rollout_phase(plan).components["vllm"] == pytest.approx(plan.vllm_share * 80)


def test_cli_vllm_share(capsys):
    assert mp.main(["--vllm-share", "--model", "Qwen/Qwen2.5-7B-Instruct", "--env", "webshop"]) == 0
    out, err = capsys.readouterr()
    assert out == "0.3\n" and "memory plan: VLLM_MEM Qwen2.5-7B-Instruct: weights 14.2" in err
    assert mp.main(["--vllm-share", "--model", "7b", "--env", "alfworld", "--rollout-seqs", "64",
                    "--gpu-mem-gb", "141"]) == 0
    assert capsys.readouterr().out == "0.2\n"  # 14.2 + 2 + 64 x 2560 x 57344 x 1.25 B = 27.9 GiB of 141
    assert mp.main(["--vllm-share", "--model", "no/such-model", "--env", "alfworld"]) == 2
    assert "error: memory plan: unknown model 'no/such-model'" in capsys.readouterr().err
