"""``python -m gaca_openrlhf.bench.packing_record``: record the step-sample token lengths of a real rollout.

    python -m gaca_openrlhf.bench.packing_record --model DIR --env alfworld --panel train --data GAMES \\
        --episodes-per-task 4 --temperature 1.0 --max-tokens 512 --prompt-max-len 2048 --out lengths.json
    python -m gaca_openrlhf.bench.packing_record --model DIR --env webshop --panel train --num-tasks 4 \\
        --webshop-url http://127.0.0.1:3000 --episodes-per-task 4 --temperature 1.0 --max-tokens 512 \\
        --prompt-max-len 4096 --out lengths.json

Episodes run exactly as ``python -m gaca_openrlhf.eval`` runs them (the same options; vLLM offline, the training
rollout's step prompts, chat-template encoding, left-truncation to ``--prompt-max-len``, ``stop=["</action>"]``,
``--max-tokens`` response tokens, the environment adapters: :mod:`gaca_openrlhf.eval.runner`), with the generator
wrapped so that every ``generate`` request is recorded: one step sample = one request, its prompt length =
``len(prompt_ids)`` (what the training rollout stores as ``prompt_ids``) and its response length = the tokens vLLM
returned (``response_ids``). A training step sample is exactly these two token lists
(``gaca_openrlhf.trainer.samples.step_experience``), so the file holds the (prompt, response) lengths the trainer
would have seen from the same rollout.

``--out`` is the lengths file (JSON; small: two integer lists), read by ``python -m gaca_openrlhf.bench.packing
--lengths FILE`` (:func:`load_lengths`). It records how it was made: the command, the git commit, the date, the
model and its tokenizer's vocabulary, the rollout settings and the episode summary. The episode results themselves
(``python -m gaca_openrlhf.eval``'s JSON) are not written.
"""
from __future__ import annotations

import datetime
import json
import logging
import os
import platform
import shlex
import subprocess
import sys
import time
from typing import List, Sequence, Tuple

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: the recorded files committed with the benchmark (``python -m gaca_openrlhf.bench.packing`` reads them by default)
DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
FORMAT = "gaca-step-sample-lengths/1"


def default_lengths_file(env: str) -> str:
    return os.path.join(DATA_DIR, f"packing_lengths_{env}.json")


class RecordingGenerator:
    """A :class:`gaca_openrlhf.eval.runner.Generator` that records (prompt tokens, response tokens) of every request
    it answers, in the order answered; everything else is the wrapped generator's."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.prompt_len: List[int] = []
        self.response_len: List[int] = []
        self.max_tokens: List[int] = []
        self.calls = 0

    @property
    def settings(self):
        return getattr(self.inner, "settings", None)

    def generate(self, requests):
        results = self.inner.generate(requests)
        if len(results) != len(requests):
            raise RuntimeError(f"generator answered {len(results)} of {len(requests)} requests")
        self.calls += 1
        for req, res in zip(requests, results):
            self.prompt_len.append(len(req.prompt_ids))
            self.response_len.append(len(res.token_ids))
            self.max_tokens.append(int(req.max_tokens))
        return results


def summary(prompt_len: Sequence[int], response_len: Sequence[int]) -> dict:
    """Count, mean, min, median, max of prompt / response / total lengths (tokens)."""
    def stats(xs):
        xs = sorted(xs)
        n = len(xs)
        if not n:
            return {}
        return {"mean": round(sum(xs) / n, 1), "min": xs[0], "median": xs[n // 2], "max": xs[-1]}

    return {"samples": len(prompt_len), "prompt": stats(prompt_len), "response": stats(response_len),
            "total": stats([p + r for p, r in zip(prompt_len, response_len)])}


def load_lengths(path: str) -> Tuple[List[int], List[int], dict]:
    """(prompt lengths, response lengths, the file's other fields) of a lengths file written by this module."""
    with open(path) as f:
        data = json.load(f)
    if not isinstance(data, dict) or "prompt_len" not in data or "response_len" not in data:
        raise ValueError(f"{path}: not a step-sample lengths file (no prompt_len / response_len lists)")
    p, r = data["prompt_len"], data["response_len"]
    if len(p) != len(r) or not p:
        raise ValueError(f"{path}: prompt_len and response_len must be non-empty lists of the same length")
    if any(not isinstance(x, int) or x < 1 for x in p) or any(not isinstance(x, int) or x < 0 for x in r):
        raise ValueError(f"{path}: lengths must be integers (prompts >= 1, responses >= 0)")
    meta = {k: v for k, v in data.items() if k not in ("prompt_len", "response_len")}
    return list(p), list(r), meta


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "-C", REPO_ROOT, "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10)
        dirty = subprocess.run(["git", "-C", REPO_ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30)
        return out.stdout.strip() + ("+uncommitted changes" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def record_document(args, rec: RecordingGenerator, episodes: list, vocab: int, argv: Sequence[str],
                    seconds: float) -> dict:
    """The lengths file's contents."""
    done = [e for e in episodes if not e.get("failed")]
    return {
        "format": FORMAT,
        "env": args.env,
        "note": ("step samples of a real rollout (the environment, its observations and the training rollout's "
                 "step-prompt template, history and encoding are real); the response lengths are those of the model "
                 "named here: for the project's tiny model (~1M parameters, warm-started on generated text, never "
                 "RL-trained) they are not those of a trained Qwen2.5, and token counts are in the model's own "
                 "tokenizer"),
        "recorded": {
            "command": "python -m gaca_openrlhf.bench.packing_record " + " ".join(shlex.quote(a) for a in argv),
            "commit": git_commit(), "date": datetime.date.today().isoformat(), "host": platform.node(),
            "model": os.path.basename(os.path.normpath(args.model)), "tokenizer_vocab": vocab,
            "panel": args.panel, "num_tasks": args.num_tasks, "episodes_per_task": args.episodes_per_task,
            "temperature": args.temperature, "seed": args.seed, "max_steps": args.max_steps,
            "max_tokens": args.max_tokens, "prompt_max_len": args.prompt_max_len, "history_k": args.history_k,
            "generate_calls": rec.calls, "episodes": len(episodes), "failed_episodes": len(episodes) - len(done),
            "won_episodes": sum(bool(e.get("won")) for e in done),
            "responses_at_max_tokens": sum(r >= m for r, m in zip(rec.response_len, rec.max_tokens)),
            "seconds": round(seconds, 1),
        },
        "summary": summary(rec.prompt_len, rec.response_len),
        "prompt_len": rec.prompt_len,
        "response_len": rec.response_len,
    }


def write_compact(path: str, doc: dict) -> None:
    """JSON with the two length lists on one line each (a small, diffable file)."""
    head = {k: v for k, v in doc.items() if k not in ("prompt_len", "response_len")}
    text = json.dumps(head, indent=1)[:-2]
    text += ",\n \"prompt_len\": " + json.dumps(doc["prompt_len"], separators=(",", ":"))
    text += ",\n \"response_len\": " + json.dumps(doc["response_len"], separators=(",", ":")) + "\n}\n"
    json.loads(text)  # well-formed
    os.makedirs(os.path.dirname(os.path.abspath(path)) or ".", exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def build_parser():
    from gaca_openrlhf.eval.cli import build_parser as eval_parser

    p = eval_parser()
    p.prog = "python -m gaca_openrlhf.bench.packing_record"
    p.description = __doc__
    for action in p._actions:
        if action.dest == "out":
            action.help = "the lengths file (JSON) to write"
    return p


def main(argv=None) -> int:
    from gaca_openrlhf.eval.session import EvalSession, vllm_generator

    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    holder = {}

    def make_generator(model, **kwargs):
        holder["rec"] = RecordingGenerator(vllm_generator(model, **kwargs))
        return holder["rec"]

    t0 = time.time()
    with EvalSession(args) as session:
        panel = session.panel(args.panel, args.num_tasks)
        session.start(make_generator)
        episodes, _ = session.run(panel, args.seed, desc=f"record {args.env}/{panel.name}")
    from transformers import AutoTokenizer

    vocab = len(AutoTokenizer.from_pretrained(session.model, trust_remote_code=True))
    doc = record_document(args, holder["rec"], episodes, vocab, argv, time.time() - t0)
    write_compact(args.out, doc)
    print(f"wrote {args.out}: {json.dumps(doc['summary'])}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
