"""The evaluation session (``gaca_openrlhf/eval/session.py``) and its three users: the eval CLI, the benchmark's
multi-seed evaluation and the diagnostics' disagreement test all start evaluation through it, and Ray, once started,
is shut down even when an episode raises. vLLM is replaced through the session's generator seam, the episode loop
and Ray through the module's ``run_episodes`` / ``init_ray``; the tokenizer, panels and JSON are real."""
from __future__ import annotations

import argparse
import ast
import json
import os

import pytest

import gaca_openrlhf.eval.session as session
import gaca_openrlhf.eval.vllm_generator as vg
from gaca_openrlhf.diagnostics.disagreement import ScoredResult
from gaca_openrlhf.eval.runner import GenResult
from test_eval_protocol import FakeVLLMGenerator, make_tokenizer_dir  # same folder (rootdir import mode)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
USERS = ["gaca_openrlhf/eval/cli.py", "gaca_openrlhf/bench/evaluate.py", "gaca_openrlhf/diagnostics/cli.py"]


@pytest.fixture
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("model")
    make_tokenizer_dir(path)
    return str(path)


class FakeScoringVLLM(FakeVLLMGenerator):
    """vLLM for the diagnostics' scoring generator: results carry an NLL, resamples vary with the request seed."""

    def generate(self, requests):
        self.requests.extend(requests)
        acts = ["go forward", "go back", "look"]
        return [ScoredResult(f"<think>t</think><action>{acts[r.seed % 3]}</action>", [1, 2], "stop",
                             nll=0.1 + len(r.prompt_ids) % 5 / 10) for r in requests]


@pytest.fixture
def sessions(monkeypatch):
    """Every session started, with (env, engine seed, generator class) and whether it was closed."""
    started = []
    real_start, real_close = session.EvalSession.start, session.EvalSession.close

    def start(self, make_generator=None, seed=None):
        real_start(self, make_generator, seed)
        started.append(self)
        self.closed = False
        return self

    def close(self):
        real_close(self)
        self.closed = True

    monkeypatch.setattr(session.EvalSession, "start", start)
    monkeypatch.setattr(session.EvalSession, "close", close)
    return started


def _run_eval(model, tmp_path):
    from gaca_openrlhf.eval.cli import main

    out = tmp_path / "r.json"
    assert main(["--model", model, "--env", "toy", "--panel", "t", "--num-tasks", "2", "--out", str(out),
                 "--no-progress", "--max-steps", "2"]) == 0
    return json.loads(out.read_text())


def _run_bench(model, tmp_path):
    from gaca_openrlhf.bench.evaluate import main

    assert main(["--seeds", "3,4", "--out-dir", str(tmp_path / "ev"), "--extra-panel", "more=t", "--model", model,
                 "--env", "toy", "--panel", "t", "--num-tasks", "2", "--no-progress", "--max-steps", "2"]) == 0
    return {p: json.loads((tmp_path / "ev" / p).read_text())
            for p in ("seed3.json", "seed4.json", "more/seed3.json", "more/seed4.json")}


def _run_diagnostics(model, tmp_path):
    from gaca_openrlhf.diagnostics.cli import main

    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    (run / "metrics.jsonl").write_text(json.dumps({"iteration": 1, "adv/lambda_mean": 0.5}) + "\n")
    assert main(["--run", str(run), "--out", str(tmp_path / "diag"), "--model", model, "--env", "toy",
                 "--num-tasks", "2", "--samples-per-state", "2", "--bootstrap", "10", "--max-steps", "3"]) == 0
    return json.loads((tmp_path / "diag" / "diagnostics.json").read_text())


def test_the_eval_cli_runs_through_the_session(model, tmp_path, sessions, monkeypatch):
    """Catches the eval CLI building its own generator or run config instead of the session's."""
    monkeypatch.setattr(vg, "VLLMGenerator", FakeVLLMGenerator)
    res = _run_eval(model, tmp_path)
    assert len(sessions) == 1 and sessions[0].closed and sessions[0].generator is FakeVLLMGenerator.made[-1]
    assert res["num_episodes"] == 2 and "generated_data" in res["config"] and "total_s" in res["timing"]
    assert "tasks_sha1" not in res["config"] and "engine" not in res["config"]


def test_the_benchmark_evaluation_runs_all_seeds_and_panels_on_one_session(model, tmp_path, sessions, monkeypatch):
    """Catches a second engine per seed or panel, the engine not seeded by the first seed, or the results'
    ``config`` changed: ``tasks_sha1`` (what the quickstart's --resume compares) and ``engine`` recorded, no
    ``generated_data``, keys in their old order."""
    from gaca_openrlhf.eval.panels import tasks_digest

    monkeypatch.setattr(vg, "VLLMGenerator", FakeVLLMGenerator)
    made = len(FakeVLLMGenerator.made)
    out = _run_bench(model, tmp_path)
    assert len(sessions) == 1 and sessions[0].closed and len(FakeVLLMGenerator.made) == made + 1
    assert FakeVLLMGenerator.made[-1].kw["seed"] == 3
    cfg = out["seed4.json"]["config"]
    assert list(cfg) == ["model", "env", "panel", "panel_arg", "panel_meta", "num_tasks", "tasks_sha1",
                         "episodes_per_task", "seed", "temperature", "top_p", "max_steps", "max_tokens", "history_k",
                         "invalid_action", "prompt_max_len", "num_envs", "data", "env_kwargs", "vllm", "host",
                         "engine"]
    assert cfg["tasks_sha1"] == tasks_digest(["0", "1"]) and cfg["seed"] == 4
    assert cfg["engine"] == "one engine for all seeds (gaca_openrlhf.bench.evaluate)"
    assert out["more/seed3.json"]["config"]["panel_arg"] == "t" and out["more/seed3.json"]["num_episodes"] == 2
    assert set(out["seed3.json"]["timing"]) >= {"engine_start_s", "episodes_s"}
    assert "total_s" not in out["seed3.json"]["timing"]


def test_the_diagnostics_run_through_the_session_with_their_scoring_generator(model, tmp_path, sessions,
                                                                               monkeypatch):
    """Catches the diagnostics building their own evaluation start-up again, or the session dropping the
    caller's generator factory (the scoring generator asks vLLM for log-probs)."""
    monkeypatch.setattr(vg, "VLLMGenerator", FakeScoringVLLM)
    res = _run_diagnostics(model, tmp_path)
    assert len(sessions) == 1 and sessions[0].closed
    gen = sessions[0].generator
    assert isinstance(gen, FakeScoringVLLM) and gen.sampling_extra == {"logprobs": 1}
    assert res["disagreement"]["summary"]["n_episodes"] == 4 and res["lambda"]["frozen_policy"]["n"] > 0
    # the options the diagnostics' parser lacks are read with defaults, never written into the recorded args
    assert not {"top_p", "enforce_eager", "record_actions", "no_progress"} & set(res["config"])
    assert res["config"]["prompt_max_len"] == 1024  # the env default filled in, and recorded


# ------------------------------------------------------------------------------------------------ Ray
def _alfworld_tree(tmp_path):
    root = tmp_path / "data"
    games = []
    for i in range(2):
        rel = f"json_2.1.1/valid_seen/pick_and_place_simple-A{i}-None-B-{i}/trial_0"
        (root / rel).mkdir(parents=True)
        (root / rel / "traj_data.json").write_text(json.dumps({"task_type": "pick_and_place_simple"}))
        (root / rel / "game.tw-pddl").write_text(json.dumps({"solvable": True}))
        games.append(rel)
    pdir = tmp_path / "panels"
    pdir.mkdir()
    (pdir / "mine.json").write_text(json.dumps({"name": "mine", "split": "valid_seen", "games": games}))
    return str(root), str(pdir)


@pytest.mark.parametrize("entry", ["eval", "bench", "diagnostics"])
def test_ray_is_shut_down_when_an_episode_raises(entry, model, tmp_path, monkeypatch):
    """Catches Ray left running (its workers and object store outlive the command) when the episode loop raises:
    the session shuts it down on the way out, for each of the three entry points."""
    import ray

    import gaca_openrlhf.diagnostics.disagreement as dis

    calls = []
    monkeypatch.setattr(session, "init_ray", lambda n: calls.append(("init", n)))
    monkeypatch.setattr(ray, "shutdown", lambda *a, **k: calls.append(("shutdown",)))

    def explode(*a, **k):
        raise RuntimeError("an env worker died")

    monkeypatch.setattr(session, "run_episodes", explode)
    monkeypatch.setattr(dis, "run_disagreement", explode)
    monkeypatch.setattr(vg, "VLLMGenerator", FakeScoringVLLM)
    root, pdir = _alfworld_tree(tmp_path)
    env = ["--env", "alfworld", "--panel", "mine", "--data", root, "--panel-dir", pdir, "--num-envs", "2",
           "--alfworld-backend", "ray", "--model", model]
    if entry == "eval":
        from gaca_openrlhf.eval.cli import main

        argv = env + ["--out", str(tmp_path / "r.json"), "--no-progress"]
    elif entry == "bench":
        from gaca_openrlhf.bench.evaluate import main

        argv = ["--seeds", "0", "--out-dir", str(tmp_path / "ev")] + env + ["--no-progress"]
    else:
        from gaca_openrlhf.diagnostics.cli import main

        (tmp_path / "run").mkdir()
        argv = ["--run", str(tmp_path / "run"), "--out", str(tmp_path / "diag")] + env
    with pytest.raises(RuntimeError, match="an env worker died"):
        main(argv)
    assert calls == [("init", 2), ("shutdown",)]


def _args(**kw):
    base = dict(env="toy", model=None, panel="t", num_tasks=2, episodes_per_task=1, temperature=0.0, seed=0,
                data=None, panel_dir=None, webshop_url=None, env_kwargs=None, alfworld_backend="auto", num_envs=None,
                env_timeout=5.0, max_steps=2, max_tokens=8, history_k=2, invalid_action="execute",
                prompt_max_len=None, dtype="auto", gpu_memory_utilization=None, tensor_parallel_size=1)
    return argparse.Namespace(**{**base, **kw})


def test_session_seams_generator_factory_and_no_ray_for_local_envs(model, monkeypatch):
    """Catches a generator setting not passed to the factory, the run config not the session's, ``run`` usable
    before ``start``, or Ray started / stopped for an environment that runs in-process."""
    import ray

    monkeypatch.setattr(session, "init_ray", lambda n: pytest.fail("Ray started for the toy env"))
    monkeypatch.setattr(ray, "shutdown", lambda *a, **k: pytest.fail("Ray shut down, never started"))
    made = []

    class Gen:
        settings = {"fake": True}

        def __init__(self, model, **kw):
            made.append((model, kw))

        def generate(self, requests):
            return [GenResult("<action>go forward</action>", [1], "stop") for _ in requests]

    with session.EvalSession(_args(model=model)) as s:
        panel = s.panel("t", 2)
        with pytest.raises(RuntimeError, match="before start"):
            s.run(panel, 0)
        s.start(Gen, seed=9)
        episodes, timing = s.run(panel, 1, progress=False)
        res = s.results(panel, "t", 1, episodes, timing)
    assert made == [(os.path.abspath(model), dict(temperature=0.0, top_p=1.0, seed=9, max_model_len=1024 + 8,
                                                  dtype="auto", gpu_memory_utilization=None, enforce_eager=None,
                                                  tensor_parallel_size=1))]
    assert s.run_config(1).num_envs == 8 and s.args.prompt_max_len == 1024  # the toy env's defaults
    assert [e["task"] for e in episodes] == ["0", "1"] and res["config"]["vllm"] == {"fake": True}
    assert "generated_data" not in res["config"] and "tasks_sha1" not in res["config"]


def test_the_users_import_no_private_helpers():
    """Catches an entry point reaching into another module's private helpers again (``ev._die``, ``_init_ray``):
    what they share is the session's public API."""
    for rel in USERS + ["gaca_openrlhf/eval/session.py"]:
        tree = ast.parse(open(os.path.join(ROOT, rel)).read())
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    assert not alias.name.startswith("_") or node.module == "__future__", (rel, alias.name)
                    imported.add((alias.asname or alias.name).split(".")[0])
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in imported:
                assert not (node.attr.startswith("_") and not node.attr.startswith("__")), (rel, node.attr)
        if rel in USERS:
            assert "EvalSession" in open(os.path.join(ROOT, rel)).read(), rel
