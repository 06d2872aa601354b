"""``python -m gaca_openrlhf.eval``'s ``main``: what it hands to the episode loop and records (survivors of the
2026-12-01 fifth-session mutmut run of eval/cli.py). The ALFWorld case uses a hand-written ALFWorld data tree and a
panel file in its own folder, with the episode loop (the session's ``run_episodes``) replaced by a recorder:
TextWorld games cannot be built from such a tree, and the real loop runs in test_eval_cli_main.py (toy env) and the
slow end-to-end eval test. vLLM is test_eval_protocol's FakeVLLMGenerator (no engine in a unit test); the tokenizer, the
panel resolution, the results JSON and the WebShop health check over HTTP are real. Each test names the one-line
change it catches."""
from __future__ import annotations

import json
import os

import pytest

import gaca_openrlhf.eval.cli as cli
import gaca_openrlhf.eval.session as session
from agents.webshop.spec import health
import gaca_openrlhf.eval.vllm_generator as vg
from http_answer import Server  # same folder (rootdir import mode)
from test_eval_protocol import FakeVLLMGenerator, make_tokenizer_dir  # same folder (rootdir import mode)


def check_webshop(*args, **kwargs):
    """The session's WebShop server check: the spec's health check, an unreachable server ending the run (exit 3)."""
    return session.checked(health, *args, **kwargs)


@pytest.fixture
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("model")
    make_tokenizer_dir(path)
    return str(path)


class _Loop(list):
    """The episode loop's calls; also the Ray start-up / shut-down calls main makes around it."""

    ray_inits: list
    ray_shutdowns: list
    kw: list


@pytest.fixture
def loop(monkeypatch):
    """Records the tasks and RunConfig main hands to the episode loop (plays no episode), and records instead of
    running ``init_ray`` / ``ray.shutdown`` (a Ray cluster takes ~10 s; the slow end-to-end eval test starts one)."""
    import ray

    calls = _Loop()
    calls.ray_inits, calls.ray_shutdowns, calls.kw = [], [], []

    def run_episodes(tasks, cfg, generator, encode, task_types=None, progress=True, desc="eval"):
        calls.append((list(tasks), cfg, task_types))
        calls.kw.append({"progress": progress, "desc": desc})
        return [], {}

    monkeypatch.setattr(session, "run_episodes", run_episodes)
    monkeypatch.setattr(session, "init_ray", lambda n: calls.ray_inits.append(n))
    monkeypatch.setattr(ray, "shutdown", lambda *a, **k: calls.ray_shutdowns.append(1))
    monkeypatch.setattr(vg, "VLLMGenerator", FakeVLLMGenerator)
    return calls


def _alfworld_tree(tmp_path, generated: bool, folder: str = "json_2.1.1/valid_seen"):
    root = tmp_path / "data"
    games = []
    for i in range(3):
        rel = f"{folder}/pick_and_place_simple-A{i}-None-B-{i}/trial_0"
        d = root / rel
        d.mkdir(parents=True)
        traj = {"task_type": "pick_and_place_simple", **({"generator": {"seed": i}} if generated else {})}
        (d / "traj_data.json").write_text(json.dumps(traj))
        (d / "game.tw-pddl").write_text(json.dumps({"solvable": True}))
        games.append(rel)
    pdir = tmp_path / "my_panels"
    pdir.mkdir()
    (pdir / "mine.json").write_text(json.dumps({"name": "mine", "split": "valid_seen", "games": games[:2]}))
    return str(root), str(pdir), games[:2]


def test_alfworld_run_config_panel_dir_and_generated_data(model, tmp_path, loop, monkeypatch):
    """Catches in ``main``: ``panel_dir=args.panel_dir`` dropped or None (a panel found only in --panel-dir is
    not found: exit 2); a RunConfig field dropped or not taken from its option (``env_kwargs``, ``history_k``,
    ``env_timeout_s``, ``record_actions``, ``invalid_action``) or ``history_k`` not parsed as an int; the panel's
    task types not passed on; ``generated_data`` not computed for ALFWorld (``args.env == "alfworld"`` misspelt,
    ``alfworld_generated`` given no data root or no games, or None); the tokenizer loaded without
    ``trust_remote_code``; the total time a clock reading (``time.time() + t_start``)."""
    import transformers

    real = transformers.AutoTokenizer.from_pretrained
    tok_kw = []
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained",
                        lambda *a, **k: (tok_kw.append(k), real(*a, **k))[1])
    # games outside json_2.1.1/: the data root's own check says "not generated", only the panel's games tell
    root, pdir, games = _alfworld_tree(tmp_path, generated=True, folder="extra_games")
    out = tmp_path / "r.json"
    assert cli.main(["--model", model, "--env", "alfworld", "--panel", "mine", "--data", root, "--panel-dir", pdir,
                     "--num-envs", "1", "--alfworld-backend", "local", "--out", str(out), "--no-progress",
                     "--history-k", "3", "--env-timeout", "7", "--record-actions", "--invalid-action", "noop",
                     "--env-kwargs", '{"x": 1}', "--max-steps", "4", "--max-tokens", "9", "--seed", "5"]) == 0
    tasks, cfg, types = loop[-1]
    assert tasks == games and types == {g: "pick_and_place_simple" for g in games}
    assert cfg.env == "alfworld" and cfg.env_kwargs == {"backend": "local", "data_dir": root, "x": 1}
    assert (cfg.history_k, cfg.env_timeout_s, cfg.record_actions, cfg.invalid_action) == (3, 7.0, True, "noop")
    assert (cfg.max_steps, cfg.max_new_tokens, cfg.seed, cfg.num_envs, cfg.prompt_max_len) == (4, 9, 5, 1, 2048)
    assert loop.kw[-1] == {"progress": False, "desc": "eval alfworld/mine"}
    assert loop.ray_inits == [] and loop.ray_shutdowns == []  # the local backend needs no Ray
    res = json.loads(out.read_text())
    assert res["config"]["generated_data"] is True and res["config"]["data"] == root
    assert 0 <= res["timing"]["total_s"] < 600  # a duration, not a clock reading
    # the tokenizer may carry its own code (Qwen-style checkpoints): remote code trusted as for vLLM
    assert tok_kw and tok_kw[-1].get("trust_remote_code") is True


def test_alfworld_ray_backend_starts_and_stops_ray(model, tmp_path, loop):
    """Catches the Ray start-up or shut-down condition changed (``and`` -> ``or``, ``==`` -> ``!=``, the env name,
    the ``backend`` key or ``"ray"`` misspelt: Ray started for the local backend, or not started / not shut down for
    the Ray backend), ``init_ray`` not given the number of env slots, or progress shown under --no-progress
    inverted (``progress=args.no_progress``)."""
    root, pdir, games = _alfworld_tree(tmp_path, generated=False)
    out = tmp_path / "r.json"
    assert cli.main(["--model", model, "--env", "alfworld", "--panel", "mine", "--data", root, "--panel-dir", pdir,
                     "--num-envs", "3", "--out", str(out), "--env-timeout", "5"]) == 0
    assert loop.ray_inits == [3] and loop.ray_shutdowns == [1]
    assert loop[-1][1].env_kwargs == {"backend": "ray", "data_dir": root, "reset_timeout_s": 5.0,
                                      "step_timeout_s": 5.0}
    assert loop.kw[-1] == {"progress": True, "desc": "eval alfworld/mine"}


def test_alfworld_real_data_is_not_marked_generated(model, tmp_path, loop):
    """Catches ``generated_data`` fixed to True / not computed from the games (real ALFWorld games, no generator
    entry, must be recorded as comparable: false)."""
    root, pdir, _ = _alfworld_tree(tmp_path, generated=False)
    out = tmp_path / "r.json"
    assert cli.main(["--model", model, "--env", "alfworld", "--panel", "mine", "--data", root, "--panel-dir", pdir,
                     "--num-envs", "1", "--out", str(out), "--no-progress"]) == 0
    assert json.loads(out.read_text())["config"]["generated_data"] is False
    assert loop[-1][1].env_kwargs == {"backend": "local", "data_dir": root}  # auto with one env: local
    assert loop.ray_inits == [] and loop.ray_shutdowns == []


def test_toy_env_runs_from_its_registry_line(model, tmp_path, monkeypatch):
    """Catches the toy env depending on a run-time registration again (``agents/toy/`` is registered by its one
    line in ``agents.registry``, like every environment): main plays it with nothing registered first."""
    from agents.registry import ENVIRONMENTS

    monkeypatch.setattr(vg, "VLLMGenerator", FakeVLLMGenerator)
    assert ENVIRONMENTS["toy"] == "agents.toy.spec"
    out = tmp_path / "r.json"
    assert cli.main(["--model", model, "--env", "toy", "--panel", "t", "--num-tasks", "1", "--out", str(out),
                     "--no-progress", "--max-steps", "2"]) == 0
    assert json.loads(out.read_text())["num_episodes"] == 1


@pytest.fixture
def health_server():
    srv = Server(200, json.dumps({"ok": True, "generated": True}))
    yield srv
    srv.close()


def test_webshop_health_of_the_env_kwargs_url_and_generated_flag(model, tmp_path, loop, health_server, monkeypatch):
    """Catches: the health check not asking the URL the environments will use (``--env-kwargs`` ``base_url``
    overrides ``--webshop-url``: ``env_kwargs.get("base_url")`` misspelt, or ``or`` -> ``and``), or the server's
    ``generated`` answer not recorded as ``generated_data`` (None, or another key)."""
    url, port = health_server.url, health_server.port
    out = tmp_path / "r.json"
    # --webshop-url points at a closed port: only the env-kwargs URL answers
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = s.getsockname()[1]
    s.close()
    assert cli.main(["--model", model, "--env", "webshop", "--panel", "test", "--num-tasks", "2", "--out", str(out),
                     "--no-progress", "--webshop-url", f"http://127.0.0.1:{dead}",
                     "--env-kwargs", json.dumps({"base_url": url})]) == 0
    assert health_server.hits == [(port, "/health")]
    res = json.loads(out.read_text())
    assert res["config"]["generated_data"] is True
    assert loop[-1][1].env_kwargs == {"base_url": url}
    assert loop.ray_inits == [] and loop.ray_shutdowns == []  # WebShop talks HTTP: no Ray
    # without the override, --webshop-url is the one checked
    health_server.hits.clear()
    assert cli.main(["--model", model, "--env", "webshop", "--panel", "test", "--num-tasks", "2", "--out", str(out),
                     "--no-progress", "--webshop-url", url]) == 0
    assert health_server.hits == [(port, "/health")]


def _die_text(fn, capsys):
    with pytest.raises(SystemExit) as e:
        fn()
    return e.value.code, capsys.readouterr().err


def test_error_messages_are_exact(model, tmp_path, monkeypatch, capsys):
    """Catches an error message of ``env_config`` or ``main`` emptied (``die(None)``), wrapped in ``XX`` or
    changed in case: the user is told what is wrong and how to fix it, word for word."""
    import argparse

    def args(**kw):
        base = dict(env="alfworld", alfworld_backend="local", num_envs=2, data=None, env_timeout=1.0,
                    env_kwargs=None, webshop_url=None)
        return argparse.Namespace(**{**base, **kw})

    code, err = _die_text(lambda: session.env_config(args(env="toy", env_kwargs="{nope")), capsys)
    assert code == 2 and err.startswith("error: --env-kwargs is not JSON: Expecting property name")
    code, err = _die_text(lambda: session.env_config(args(env="toy", env_kwargs="[1]")), capsys)
    assert (code, err) == (2, "error: --env-kwargs must be a JSON object\n")
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    code, err = _die_text(lambda: cli.main(["--model", model, "--env", "alfworld", "--panel", "eval_id", "--out",
                                            str(tmp_path / "r.json")]), capsys)
    assert (code, err) == (2, "error: ALFWorld needs a data root: pass --data DIR or set $ALFWORLD_DATA (generate "
                              "offline games with `python -m agents.alfworld generate --out DIR --split valid_seen "
                              "--num-games N`)\n")


@pytest.fixture
def answer_server():
    srv = Server()
    yield srv
    srv.close()


def test_check_webshop_url_slash_bad_bytes_and_status(answer_server, capsys):
    """Catches in ``_check_webshop``: a health answer with one invalid UTF-8 byte in a string no longer read
    (``decode(..., "replace")`` -> strict or an unknown error handler: the ``generated`` flag lost or a crash); a 2xx status other than 200 not reported as ``HTTP <status>`` in the exit-3 message."""
    answer_server.status, answer_server.body = 200, b'{"generated": true, "name": "caf\xe9"}'
    health = check_webshop(answer_server.url + "/")  # (http.server would answer //health as /health too)
    assert answer_server.paths == ["/health"]
    assert health["generated"] is True and health["name"] == "caf\ufffd"
    answer_server.status, answer_server.body = 204, b""
    code, err = _die_text(lambda: check_webshop(answer_server.url), capsys)
    assert code == 3 and f"WebShop server {answer_server.url} is not reachable (HTTP 204)" in err
