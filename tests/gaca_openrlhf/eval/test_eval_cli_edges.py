"""The eval CLI's Ray start-up, WebShop health check and error exit (mutmut run of eval/cli.py; these pieces are
in eval/session.py now). The WebShop
checks talk HTTP to a real local server; ``ray.init`` is recorded instead of started (a Ray cluster takes ~10 s
and is covered by the slow end-to-end eval test). Each test names the one-line bug it catches."""
from __future__ import annotations

import json
import os

import pytest

import gaca_openrlhf.eval.cli as cli
import gaca_openrlhf.eval.session as session
from agents.webshop.spec import health
from http_answer import Server  # same folder (rootdir import mode)


def check_webshop(*args, **kwargs):
    """The session's WebShop server check: the spec's health check, an unreachable server ending the run (exit 3)."""
    return session.checked(health, *args, **kwargs)


# ------------------------------------------------------------------------------------------------- init_ray
@pytest.fixture
def ray_rec(monkeypatch):
    import ray

    calls = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kw: calls.append(kw))
    return calls


def test_init_ray_sizes_the_cluster_for_the_env_workers(ray_rec, monkeypatch):
    """Catches: the CPU count not max(cores, ceil(envs / 2) + 1) (env actors take half a CPU each, plus one),
    the dashboard or driver logging switched on, or the repository not on the workers' PYTHONPATH (they import
    agents.*) / the caller's PYTHONPATH dropped."""
    monkeypatch.setattr(session.os, "cpu_count", lambda: 2)
    monkeypatch.setenv("PYTHONPATH", "/extra")
    session.init_ray(16)
    session.init_ray(3)
    session.init_ray(1)
    assert [c["num_cpus"] for c in ray_rec] == [9, 3, 2]
    assert all(c["include_dashboard"] is False and c["log_to_driver"] is False for c in ray_rec)
    assert ray_rec[0]["runtime_env"] == {"env_vars": {"PYTHONPATH": session.REPO_ROOT + os.pathsep + "/extra"}}
    assert os.path.isfile(os.path.join(session.REPO_ROOT, "agents", "base.py"))


def test_init_ray_unknown_core_count_and_no_pythonpath(ray_rec, monkeypatch):
    """Catches: an unknown core count (None) not taken as 1, or an empty PYTHONPATH entry added when the caller has
    none."""
    monkeypatch.setattr(session.os, "cpu_count", lambda: None)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    session.init_ray(1)
    session.init_ray(0)
    assert [c["num_cpus"] for c in ray_rec] == [2, 1]
    assert ray_rec[0]["runtime_env"] == {"env_vars": {"PYTHONPATH": session.REPO_ROOT}}


def test_init_ray_leaves_a_running_ray_alone(monkeypatch):
    """Catches: a second ray.init when Ray is already up (it raises)."""
    import ray

    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(ray, "init", lambda **kw: pytest.fail("ray.init called"))
    session.init_ray(4)


# ---------------------------------------------------------------------------------------------- WebShop /health
@pytest.mark.parametrize("body,expected", [('{"generated": false, "n": 3}', {"generated": False, "n": 3}),
                                           ("not json", {}), ("[1, 2]", {})])
def test_check_webshop_reads_health(body, expected):
    """Catches: the /health path or the trailing-slash strip changed, or a non-JSON / non-object answer not read
    as {} (it would crash or leak a list as the health)."""
    s = Server(200, body)
    try:
        assert check_webshop(s.url + "/") == expected
        assert s.paths == ["/health"]
    finally:
        s.close()


def test_check_webshop_unreachable_or_unhealthy_exits_3(capsys):
    """Catches: an unhealthy (HTTP 503) or unreachable server not ending the run with exit status 3 and a message
    that says how to start it."""
    s = Server(503, "down")
    try:
        with pytest.raises(SystemExit) as e:
            check_webshop(s.url)
        assert e.value.code == 3
    finally:
        s.close()
    err = capsys.readouterr().err
    assert err.startswith(f"error: WebShop server {s.url} is not reachable (")
    assert "python -m webshop_server --port PORT" in err
    with pytest.raises(SystemExit) as e:
        check_webshop(s.url, timeout=2.0)  # closed now: connection refused
    assert e.value.code == 3


def test_check_webshop_timeout(monkeypatch):
    """Catches: the 10 s default timeout of the health check changed or not passed to the request."""
    import urllib.request

    seen = []

    def urlopen(url, timeout=None):
        seen.append((url, timeout))
        raise OSError("nope")

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    with pytest.raises(SystemExit):
        check_webshop("http://h:1")
    with pytest.raises(SystemExit):
        check_webshop("http://h:1", timeout=3.5)
    assert seen == [("http://h:1/health", 10.0), ("http://h:1/health", 3.5)]


def test_die_prints_and_exits(capsys):
    """Catches: the error text or the default exit status 2 changed."""
    with pytest.raises(SystemExit) as e:
        session.die("bad thing")
    assert e.value.code == 2 and capsys.readouterr().err == "error: bad thing\n"
    with pytest.raises(SystemExit) as e:
        session.die("x", code=3)
    assert e.value.code == 3


def test_json_safe_and_write_json(tmp_path):
    """Catches: NaN/inf inside tuples or nested lists not nulled, finite numbers or other values changed, the file
    not indented JSON, or a missing parent folder not created."""
    data = {"a": (1.5, float("-inf")), "b": [[float("nan")]], "c": "s", "d": None, "e": 3}
    assert session.json_safe(data) == {"a": [1.5, None], "b": [[None]], "c": "s", "d": None, "e": 3}
    path = tmp_path / "x" / "y" / "r.json"
    session.write_json(str(path), data)
    text = path.read_text()
    assert json.loads(text) == {"a": [1.5, None], "b": [[None]], "c": "s", "d": None, "e": 3}
    assert text.startswith('{\n "a": [\n  1.5,') and not list(path.parent.glob("*.tmp*"))


# ---------------------------------------------------------------------------------------------- the parser
def test_parser_defaults_and_required_options():
    """Catches: a default of the eval CLI changed (each one decides the protocol or the run: K = 1, T 0.4 (the
    paper's), top-p 1, seed 0, all tasks, env backend auto, env's own step limit, 512 response tokens as in
    training, history 2, invalid actions executed, env-default budgets, 120 s env timeout, vLLM auto settings),
    a required option made optional, or a choice list changed."""
    p = cli.build_parser()
    args = p.parse_args(["--model", "m", "--env", "toy", "--panel", "p", "--out", "o"])
    assert vars(args) == {
        "model": "m", "env": "toy", "panel": "p", "out": "o", "episodes_per_task": 1, "temperature": 0.4,
        "top_p": 1.0, "seed": 0, "num_tasks": None, "data": None, "panel_dir": None, "webshop_url": None,
        "env_kwargs": None, "alfworld_backend": "auto", "max_steps": 0, "max_tokens": 512, "history_k": 2,
        "invalid_action": "execute", "prompt_max_len": None, "num_envs": None, "env_timeout": 120.0,
        "dtype": "auto", "gpu_memory_utilization": None, "tensor_parallel_size": 1, "enforce_eager": None,
        "record_actions": False, "no_progress": False}
    full = ["--model", "m", "--env", "toy", "--panel", "p", "--out", "o"]
    for i in range(0, len(full), 2):  # each of the four is required
        with pytest.raises(SystemExit):
            p.parse_args(full[:i] + full[i + 2:])
    for opt, good, bad in [("--env", ["alfworld", "webshop", "toy"], "minecraft"),
                           ("--alfworld-backend", ["auto", "local", "ray"], "docker"),
                           ("--invalid-action", ["execute", "noop"], "skip")]:
        base = list(full)
        for g in good:
            argv = base + [opt, g] if opt != "--env" else ["--model", "m", "--env", g, "--panel", "p", "--out", "o"]
            p.parse_args(argv)
        with pytest.raises(SystemExit):
            p.parse_args(base + [opt, bad])
    args = p.parse_args(full + ["--enforce-eager", "--record-actions", "--no-progress", "--num-tasks", "3",
                                "--env-timeout", "2.5", "--gpu-memory-utilization", "0.3"])
    assert (args.enforce_eager, args.record_actions, args.no_progress, args.num_tasks) == (True, True, True, 3)
    assert (args.env_timeout, args.gpu_memory_utilization) == (2.5, 0.3)
    assert p.prog == "python -m gaca_openrlhf.eval"
