"""The tiny model the project builds offline: architecture constraints, determinism, caching, chat template."""
import json

import pytest
import torch

from gaca_openrlhf.models.tiny import TinyModelSpec, build_tiny_model, ensure_tiny_model, generate_corpus

SMALL = TinyModelSpec(corpus_samples=200, train_steps=3, train_batch=4, train_seq_len=128, vocab_size=600)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("m") / "tiny", SMALL)


def test_corpus_is_deterministic_and_env_like():
    a, b = generate_corpus(10, 3), generate_corpus(10, 3)
    assert a == b and a != generate_corpus(10, 4)
    assert "Welcome to TextWorld, ALFRED!" in a[0][0] and "[SEP]" in a[1][0]
    assert all("<think>" in ans and "<action>" in ans for _, ans in a)


def test_corpus_is_pinned():
    """The corpus comes from the environments' samplers (EnvSpec.tiny_corpus_sample) and is what cached tiny models
    were built from: a change here must bump RECIPE_VERSION (then update the digest)."""
    import hashlib

    digest = hashlib.sha256(json.dumps(generate_corpus(10, 3)).encode()).hexdigest()
    assert digest == "a30f406e40f966a2f1778fb54ea71a2f011c3d5526d635f3b6570a4c966a7775"


def test_config_is_untied_qwen2_with_head_dim_32(model_dir):
    cfg = json.loads((model_dir / "config.json").read_text())
    assert cfg["model_type"] == "qwen2" and cfg["tie_word_embeddings"] is False
    assert cfg["hidden_size"] // cfg["num_attention_heads"] >= 32 and cfg["head_dim"] >= 32
    assert cfg["vocab_size"] % 64 == 0


def test_tokenizer_round_trips_and_has_chat_template(model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    text = "<think>go</think><action>take apple 1 from countertop 2</action>"
    assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text
    prompt = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert prompt.endswith("<|im_start|>assistant\n") and "<|im_start|>user\nhi<|im_end|>" in prompt
    assert tok.eos_token == "<|im_end|>" and tok.pad_token_id is not None


def test_model_loads_and_lm_head_is_separate(model_dir):
    from transformers import AutoModelForCausalLM

    m = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32)
    assert m.lm_head.weight.data_ptr() != m.model.embed_tokens.weight.data_ptr()
    out = m(input_ids=torch.tensor([[1, 2, 3]])).logits
    assert torch.isfinite(out).all()


def test_build_is_deterministic(model_dir, tmp_path):
    from safetensors.torch import load_file

    again = build_tiny_model(tmp_path / "again", SMALL)
    a, b = load_file(model_dir / "model.safetensors"), load_file(again / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_ensure_reuses_matching_model_and_rebuilds_on_spec_change(model_dir):
    stamp = (model_dir / "model.safetensors").stat().st_mtime_ns
    assert ensure_tiny_model(model_dir, SMALL) == model_dir
    assert (model_dir / "model.safetensors").stat().st_mtime_ns == stamp
    other = TinyModelSpec(**{**SMALL.__dict__, "seed": 1})
    ensure_tiny_model(model_dir, other)
    assert json.loads((model_dir / "gaca_tiny_model.json").read_text())["seed"] == 1
