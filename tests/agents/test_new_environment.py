"""A new environment is one folder and one registry line (issue 26): ``scratch_env`` (``scratch_env_source.py``)
lives in a temporary package outside the repository, is registered by the one line ``GACA_ENVIRONMENTS=
scratch=scratch_env.spec`` (why a variable: see that module) and runs through every command that takes an
environment with no other file changed: the prompt-case CLI, the task-file CLI, the eval CLI (a fake generator in
place of vLLM), the SFT demonstrations and CLI, the diagnostics' and the quickstart's option parsers; and, as slow
tests, ``train_ppo`` on CPU and ``quickstart --env scratch --smoke``."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from scratch_env_source import NAME, install  # same folder (rootdir import mode)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    (tmp_path / "pkg").mkdir()
    return install(tmp_path / "pkg", monkeypatch)


def test_one_line_registers_it(scratch):
    from agents import registry

    assert NAME in registry.names() and NAME not in registry.ENVIRONMENTS  # not in the repository's table
    spec = registry.spec(NAME)
    assert spec.name == NAME and spec.title == "Scratch" and registry.prompt_template(NAME) is spec.prompt
    env = registry.make_env(NAME, max_steps=3)
    task, step = env.reset(1)
    assert "2 time(s)" in task and step.admissible_actions == ["press", "stop"]
    assert [env.step(a).won for a in ("press", "press", "stop")] == [False, False, True]


def test_unregistered_without_the_line(tmp_path, monkeypatch):
    from agents import registry

    monkeypatch.delenv("GACA_ENVIRONMENTS", raising=False)
    assert NAME not in registry.names()
    with pytest.raises(KeyError, match="unknown environment"):
        registry.spec(NAME)


def test_every_parser_offers_it(scratch):
    from gaca_openrlhf.bench.quickstart.cli import build_parser as quickstart_parser
    from gaca_openrlhf.diagnostics.cli import build_parser as diagnostics_parser
    from gaca_openrlhf.eval.cli import build_parser as eval_parser

    assert eval_parser().parse_args(["--model", "m", "--env", NAME, "--panel", "p", "--out", "o"]).env == NAME
    assert diagnostics_parser().parse_args(["--run", "r", "--out", "o", "--env", NAME]).env == NAME
    assert quickstart_parser().parse_args(["--env", NAME, "--smoke"]).env == NAME


def test_prompt_case_cli(scratch, tmp_path):
    from agents.prompt_cases import main

    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps({"cases": [
        {"name": "first", "env": NAME, "task": "press twice", "observation": "The counter shows 0.",
         "admissible_actions": ["press", "stop"], "history": [], "history_length": 2},
        {"name": "later", "env": NAME, "task": "press twice", "observation": "The counter shows 1.",
         "admissible_actions": ["press", "stop"], "history": [{"observation": "The counter shows 0.",
                                                               "action": "press"}], "history_length": 2},
        {"name": "projection", "env": NAME, "response": "<think>x</think><action>press</action>"}]}))
    out = tmp_path / "out.json"
    assert main(["--cases", str(cases), "--out", str(out)]) == 0
    first, later, proj = json.loads(out.read_text())["cases"]
    assert first["prompt"].startswith("Task: press twice\nObservation: The counter shows 0.")
    assert "You took 1 step(s)" in later["prompt"] and "Step 2, observation: The counter shows 1." in later["prompt"]
    assert (proj["action"], proj["valid"]) == ("press", 1)


def test_task_file_cli(scratch, tmp_path, capsys):
    from gaca_openrlhf.rollout.tasks import main

    main([NAME, "--num", "3", "--out", str(tmp_path / "tasks.jsonl")])
    assert [json.loads(x)["input"] for x in (tmp_path / "tasks.jsonl").read_text().splitlines()] == ["0", "1", "2"]
    assert f"wrote 3 {NAME} tasks" in capsys.readouterr().out


def _tokenizer_dir(path: Path) -> None:
    """A small byte-level BPE tokenizer with the tiny model's chat template (no model weights: the generator is fake)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from gaca_openrlhf.models.tiny import CHAT_TEMPLATE, SPECIAL_TOKENS

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(["Task: press the button. The counter shows 0. Admissible actions: press, stop"],
                            trainer=trainer)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    hf.chat_template = CHAT_TEMPLATE
    path.mkdir(parents=True)
    hf.save_pretrained(str(path))
    (path / "config.json").write_text("{}")


class AlwaysPress:
    """The eval CLI's generator, faked: always presses (never stops, so every episode runs to the step limit)."""

    def __init__(self, model, **kw):
        self.settings = {"fake": True}

    def generate(self, requests):
        from gaca_openrlhf.eval.runner import GenResult

        return [GenResult("<action>press</action>", [1, 2], "stop") for _ in requests]


def test_eval_cli_with_a_fake_generator(scratch, tmp_path, monkeypatch, capsys):
    import gaca_openrlhf.eval.session as session
    import gaca_openrlhf.eval.vllm_generator as vg
    from gaca_openrlhf.eval.cli import main

    _tokenizer_dir(tmp_path / "model")
    monkeypatch.setattr(vg, "VLLMGenerator", AlwaysPress)
    monkeypatch.setattr(session, "init_ray", lambda n: pytest.fail("Ray started for an env without Ray workers"))
    out = tmp_path / "r.json"
    assert main(["--model", str(tmp_path / "model"), "--env", NAME, "--panel", "test", "--num-tasks", "3",
                 "--max-steps", "3", "--out", str(out), "--no-progress"]) == 0
    result = json.loads(out.read_text())
    cfg = result["config"]
    assert cfg["env"] == NAME and cfg["panel"] == f"{NAME}[:3]" and cfg["num_tasks"] == 3
    assert cfg["prompt_max_len"] == 512 and cfg["num_envs"] == 2  # the spec's evaluation defaults
    assert cfg["generated_data"] is None and cfg["env_kwargs"] == {}
    assert result["num_episodes"] == 3 and result["num_failed"] == 0
    assert all(e["steps"] == 3 and not e["won"] for e in result["episodes"])  # only presses: never stopped


def test_sft_demonstrations(scratch):
    import argparse

    from agents.registry import spec

    steps, stats = spec(NAME).sft_demos(argparse.Namespace(num=3, history_k=2), None)
    assert stats == {"episodes": 3, "won": 3}
    assert len(steps) == (2 + 1) + (3 + 1) + (1 + 1)  # task n: 1 + n % 3 presses and a stop
    assert steps[0].prompt.startswith("Task: press the button 1 time(s)")
    assert steps[0].response.endswith("<action>press</action>") and steps[1].response.endswith("<action>stop</action>")


def test_sft_cli_offers_it_and_not_envs_without_a_demonstrator(scratch, capsys):
    from gaca_openrlhf.sft.__main__ import main

    with pytest.raises(SystemExit) as e:
        main([NAME, "--help"])
    assert e.value.code == 0 and "--num" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        main(["toy", "--out", "x"])  # the toy corridor has no demonstrator: no subcommand
    assert e.value.code == 2


# ------------------------------------------------------------------------------------------------------- slow
def _run(cmd, env, timeout):
    res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    return res


@pytest.mark.slow
def test_sft_cli_trains_a_warm_start(scratch, tmp_path):
    env = dict(os.environ, GACA_CACHE=str(tmp_path / "cache"))
    res = _run([sys.executable, "-m", "gaca_openrlhf.sft", NAME, "--num", "3", "--out", str(tmp_path / "warm"),
                "--model-size", "smoke", "--epochs", "1", "--no-progress"], env, 1200)
    stats = json.loads(res.stdout.strip().splitlines()[-1])
    assert stats["demos"] == {"episodes": 3, "won": 3} and (tmp_path / "warm" / "config.json").is_file()


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_quickstart_smoke(scratch):
    """``python -m gaca_openrlhf.bench --env scratch --smoke``: data, SFT, evaluation, RL and report, private caches.
    Its RL phase is ``train_ppo`` on CPU on the scratch env (checked below), so no separate train_ppo test: CI time."""
    work = Path(tempfile.mkdtemp(prefix="gaca-scratch-quickstart-"))
    out = work / "out"
    env = dict(os.environ, GACA_CACHE=str(work / "cache"), DS_ACCELERATOR="cpu")
    env.pop("GACA_CACHE_DIR", None)
    res = _run([sys.executable, "-m", "gaca_openrlhf.bench", "--env", NAME, "--smoke", "--out", str(out)], env, 2000)
    assert sum(" ... done in " in ln for ln in res.stdout.splitlines()) == 6, res.stdout
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "ok" and run["config"]["env"] == NAME
    assert "Scratch counter tasks" in (out / "report.md").read_text()
    for label in ("warm_start", "after_rl"):
        eps = json.loads((out / "eval" / label / "seed0.json").read_text())["episodes"]
        assert len(eps) == 3 and all(e["steps"] > 0 for e in eps)
    (run_dir,) = (out / "runs").iterdir()  # train_ppo's own record: every iteration, no failed episode
    recs = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    assert len(recs) == run["config"]["rl_iterations"] and all(r["rollout/failed_episodes"] == 0 for r in recs)
    assert "--env.name scratch" in (run_dir / "command.txt").read_text()
