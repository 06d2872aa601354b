"""gaca_openrlhf/bench/packing_record.py (recording step-sample lengths of a real rollout) and the recorded files the
packing benchmark reads by default: the recording generator, the file format and its checks, the command on the toy
environment with the real tokenizer, runner and session (vLLM replaced: no engine in a unit test)."""
from __future__ import annotations

import json
import subprocess

import pytest

from gaca_openrlhf.bench import packing_record as R
from gaca_openrlhf.eval.runner import GenRequest, GenResult

ENVS = ("alfworld", "webshop")


class ScriptedGenerator:
    """Answers request i of the run with i % 5 + 1 tokens (so the recorded response lengths are known)."""

    made: list = []

    def __init__(self, model=None, **kw):
        self.kw, self.settings, self.n = kw, {"stub": True}, 0
        ScriptedGenerator.made.append(self)

    def generate(self, requests):
        out = []
        for _ in requests:
            k = self.n % 5 + 1
            self.n += 1
            out.append(GenResult("<think>t</think><action>go forward</action>", list(range(k)), "stop"))
        return out


def test_recording_generator_records_each_request_in_order():
    rec = R.RecordingGenerator(ScriptedGenerator())
    res = rec.generate([GenRequest([1] * 7, 16, 0), GenRequest([2] * 3, 2, 1)])
    assert [len(r.token_ids) for r in res] == [1, 2]  # the inner generator's answers, unchanged
    rec.generate([GenRequest([3] * 11, 4, 2)])
    assert (rec.prompt_len, rec.response_len, rec.max_tokens, rec.calls) == ([7, 3, 11], [1, 2, 3], [16, 2, 4], 2)
    assert rec.settings == {"stub": True}

    class Short:
        def generate(self, requests):
            return []

    with pytest.raises(RuntimeError, match="answered 0 of 1"):
        R.RecordingGenerator(Short()).generate([GenRequest([1], 1, 0)])


def test_file_round_trip_and_checks(tmp_path):
    doc = {"format": R.FORMAT, "env": "x", "recorded": {"command": "c"}, "summary": R.summary([5, 3], [0, 9]),
           "prompt_len": [5, 3], "response_len": [0, 9]}
    assert doc["summary"]["total"] == {"mean": 8.5, "min": 5, "median": 12, "max": 12}
    path = tmp_path / "l.json"
    R.write_compact(str(path), doc)
    text = path.read_text()
    assert '"prompt_len": [5,3]' in text and json.loads(text) == doc
    p, r, meta = R.load_lengths(str(path))
    assert (p, r, meta["env"], meta["recorded"]) == ([5, 3], [0, 9], "x", {"command": "c"})
    for bad, msg in (({"prompt_len": [1]}, "not a step-sample lengths file"),
                     ({"prompt_len": [1, 2], "response_len": [1]}, "same length"),
                     ({"prompt_len": [], "response_len": []}, "non-empty"),
                     ({"prompt_len": [0], "response_len": [1]}, "integers"),
                     ({"prompt_len": [1.5], "response_len": [1]}, "integers")):
        path.write_text(json.dumps(bad))
        with pytest.raises(ValueError, match=msg):
            R.load_lengths(str(path))


def _tokenizer_dir(path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from gaca_openrlhf.models.tiny import CHAT_TEMPLATE, SPECIAL_TOKENS

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(["go to room 1. You are in room 0. go forward"], trainer=trainer)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    hf.chat_template = CHAT_TEMPLATE
    hf.save_pretrained(str(path))
    (path / "config.json").write_text("{}")
    return hf


def test_command_records_every_step_of_a_rollout(tmp_path, monkeypatch):
    """Catches: a step (request) not recorded, prompt lengths that are not the encoded step prompts the runner sent,
    response lengths not the generator's tokens, the provenance (command, commit, date, settings) missing."""
    import gaca_openrlhf.eval.session as session

    model = tmp_path / "model"
    model.mkdir()
    hf = _tokenizer_dir(model)
    sent = []

    def make(model_dir, **kw):
        gen = ScriptedGenerator(model_dir, **kw)
        inner = gen.generate
        gen.generate = lambda reqs: (sent.extend(reqs), inner(reqs))[1]
        return gen

    monkeypatch.setattr(session, "vllm_generator", make)
    out = tmp_path / "lengths.json"
    argv = ["--model", str(model), "--env", "toy", "--panel", "toy", "--num-tasks", "2", "--episodes-per-task", "2",
            "--max-steps", "3", "--max-tokens", "64", "--temperature", "1.0", "--out", str(out), "--no-progress"]
    assert R.main(argv) == 0
    p, r, meta = R.load_lengths(str(out))
    assert sent and p == [len(q.prompt_ids) for q in sent] and all(x > 10 for x in p)
    assert r == [i % 5 + 1 for i in range(len(sent))]
    assert meta["env"] == "toy" and meta["format"] == R.FORMAT
    rec = meta["recorded"]
    assert rec["command"] == "python -m gaca_openrlhf.bench.packing_record " + " ".join(argv)
    assert rec["commit"] and rec["date"] and rec["tokenizer_vocab"] == len(hf)
    assert (rec["episodes"], rec["episodes_per_task"], rec["max_tokens"], rec["temperature"]) == (4, 2, 64, 1.0)
    assert rec["generate_calls"] >= 1 and len(sent) >= 4 and rec["responses_at_max_tokens"] == 0
    assert meta["summary"]["samples"] == len(sent)
    assert ScriptedGenerator.made[-1].kw["temperature"] == 1.0


@pytest.mark.parametrize("env", ENVS)
def test_committed_recordings(env):
    """The recorded files the benchmark reads by default: present, well-formed, of the right environment, made by
    this module on a real rollout (its command recorded, with the recipe's step and token limits)."""
    p, r, meta = R.load_lengths(R.default_lengths_file(env))
    assert meta["env"] == env and meta["format"] == R.FORMAT
    rec = meta["recorded"]
    assert rec["command"].startswith("python -m gaca_openrlhf.bench.packing_record ")
    assert f"--env {env}" in rec["command"] and rec["commit"] and rec["date"]
    assert rec["failed_episodes"] == 0 and rec["max_tokens"] == 512
    assert rec["prompt_max_len"] == {"alfworld": 2048, "webshop": 4096}[env]
    assert len(p) >= 64 and max(p) <= rec["prompt_max_len"] and max(r) <= rec["max_tokens"]
    assert meta["summary"] == R.summary(p, r)
    assert "tiny" in meta["note"] or "model" in meta["note"]


def test_cli_help_names_the_lengths_file():
    from gaca_openrlhf.bench.packing_record import build_parser

    text = build_parser().format_help()
    assert "the lengths file" in text and "--episodes-per-task" in text  # the eval CLI's options
    r = subprocess.run(["git", "-C", R.REPO_ROOT, "rev-parse", "HEAD"], capture_output=True, text=True)
    assert R.git_commit().startswith(r.stdout.strip())
