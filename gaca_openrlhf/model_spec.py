"""What size a model is, without loading it: its architecture (:class:`ModelSpec`) from a config.json, a model
folder, the locally cached config of a Hugging Face name, or the built-in Qwen2.5-1.5B/7B-Instruct shapes; its
parameter count from the same or from the size in its name. Read by the memory plan
(:mod:`gaca_openrlhf.memory_plan`) and the preflight (:mod:`gaca_openrlhf.preflight`)."""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Callable, Dict, Optional, Tuple

ATTN_BIAS_MODEL_TYPES = ("qwen2",)  # q/k/v projections with bias (Qwen2 has no attention_bias field)


@dataclass(frozen=True)
class ModelSpec:
    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    tied: bool
    attention_bias: bool = True
    head_dim: Optional[int] = None

    def __post_init__(self):
        for f in ("hidden", "layers", "heads", "kv_heads", "intermediate", "vocab"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"model {self.name!r}: {f} must be a positive integer, got {v!r}")
        if self.head_dim is None and self.hidden % self.heads:
            raise ValueError(f"model {self.name!r}: hidden {self.hidden} is not a multiple of heads {self.heads}")

    @property
    def hd(self) -> int:
        return self.head_dim if self.head_dim is not None else self.hidden // self.heads

    @property
    def q_dim(self) -> int:
        return self.heads * self.hd

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.hd

    @property
    def layer_params(self) -> int:
        """One decoder layer: q, k, v (+ biases), o, gate/up/down, two RMSNorm weights."""
        h, b = self.hidden, int(self.attention_bias)
        attn = h * self.q_dim + 2 * h * self.kv_dim + b * (self.q_dim + 2 * self.kv_dim) + self.q_dim * h
        return attn + 3 * h * self.intermediate + 2 * h

    @property
    def params(self) -> int:
        emb = self.vocab * self.hidden
        return emb * (1 if self.tied else 2) + self.layers * self.layer_params + self.hidden


# Qwen/Qwen2.5-1.5B-Instruct and Qwen/Qwen2.5-7B-Instruct config.json (hidden_size, num_hidden_layers,
# num_attention_heads, num_key_value_heads, intermediate_size, vocab_size, tie_word_embeddings).
BUILTIN: Dict[str, ModelSpec] = {
    "1.5b": ModelSpec("Qwen2.5-1.5B-Instruct", hidden=1536, layers=28, heads=12, kv_heads=2, intermediate=8960,
                      vocab=151936, tied=True),
    "7b": ModelSpec("Qwen2.5-7B-Instruct", hidden=3584, layers=28, heads=28, kv_heads=4, intermediate=18944,
                    vocab=152064, tied=False),
}


def spec_from_config(cfg: dict, name: str = "config") -> ModelSpec:
    """A ModelSpec from a Hugging Face config.json's fields (missing num_key_value_heads = heads; missing
    tie_word_embeddings = True, transformers' PretrainedConfig default; q/k/v biases: attention_bias, else True for
    model_type qwen2)."""
    need = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")
    missing = [k for k in need if k not in cfg]
    if missing:
        raise ValueError(f"{name}: config has no {', '.join(missing)} (a decoder-only causal LM config.json?)")
    bias = cfg.get("attention_bias")
    if bias is None:
        bias = cfg.get("model_type") in ATTN_BIAS_MODEL_TYPES
    return ModelSpec(name, hidden=cfg["hidden_size"], layers=cfg["num_hidden_layers"],
                     heads=cfg["num_attention_heads"],
                     kv_heads=cfg.get("num_key_value_heads") or cfg["num_attention_heads"],
                     intermediate=cfg["intermediate_size"], vocab=cfg["vocab_size"],
                     tied=bool(cfg.get("tie_word_embeddings", True)), attention_bias=bool(bias),
                     head_dim=cfg.get("head_dim"))


def load_spec(model: str) -> ModelSpec:
    """'1.5b' | '7b' | a config.json path | a model folder holding config.json."""
    key = model.strip().lower()
    if key in BUILTIN:
        return BUILTIN[key]
    path = os.path.join(model, "config.json") if os.path.isdir(model) else model
    if not os.path.isfile(path):
        raise ValueError(f"unknown model {model!r}: use 1.5b, 7b, a config.json path or a model folder holding one")
    try:
        with open(path) as f:
            cfg = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"cannot read model config {path}: {e}") from e
    if not isinstance(cfg, dict):
        raise ValueError(f"{path}: not a JSON object")
    return spec_from_config(cfg, name=os.path.basename(os.path.dirname(os.path.abspath(path))) or path)


def resolve_spec(model: str) -> ModelSpec:
    """:func:`load_spec`, and for a Hugging Face name its config.json in the local cache (no download), else the
    built-in model of the size in its name (``Qwen/Qwen2.5-7B-Instruct``: 7b); ValueError when none applies."""
    try:
        return load_spec(model)
    except ValueError as first:
        path = cached_config(model)
        if path:
            return load_spec(path)
        params, _ = model_params(model, lambda m: None)
        for spec in BUILTIN.values():
            if params and abs(spec.params - params) / params < 0.25:
                return spec
        raise ValueError(f"{first}; no cached config.json and no built-in model of its size") from None


def cached_config(model: str) -> Optional[str]:
    """config.json of a Hugging Face model name in the local HF cache (no download), else None."""
    try:
        from huggingface_hub import try_to_load_from_cache

        path = try_to_load_from_cache(model, "config.json")
    except Exception:  # noqa: BLE001 - not a repo id, no huggingface_hub: no cached config
        return None
    return path if isinstance(path, str) and os.path.isfile(path) else None


_SIZE_IN_NAME = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)([bm])(?![a-z])", re.IGNORECASE)


def model_params(model: str, config_lookup: Callable[[str], Optional[str]] = cached_config
                 ) -> Tuple[Optional[int], str]:
    """(parameter count, where it came from) of a local model folder / config.json, a Hugging Face name whose
    config.json is cached, or a name with its size in it (``Qwen2.5-7B-Instruct``: 7e9); (None, why) otherwise."""
    path = model if os.path.exists(model) else config_lookup(model)
    why = f"no local folder and no cached config.json for {model!r}"
    if path:
        try:
            return load_spec(path).params, f"config.json of {model}"
        except ValueError as e:
            why = str(e)
    sizes = _SIZE_IN_NAME.findall(os.path.basename(model.rstrip("/")))
    if sizes:
        num, unit = sizes[-1]
        return int(float(num) * (1e9 if unit.lower() == "b" else 1e6)), f"the size in the name {model!r}"
    return None, why
