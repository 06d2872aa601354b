"""``python -m gaca_openrlhf.eval`` end to end on the toy env with the real tokenizer, runner and JSON writer, vLLM
replaced by test_eval_protocol's FakeVLLMGenerator (its engine cannot start in a unit test); and main's argument
and data checks (exit status 2 / 3). Each test names the one-line bug it catches."""
from __future__ import annotations

import json
import os
import platform

import pytest

import gaca_openrlhf.eval.vllm_generator as vg
from gaca_openrlhf.eval.cli import main
from test_eval_protocol import FakeVLLMGenerator, make_tokenizer_dir  # same folder (rootdir import mode)


@pytest.fixture(autouse=True)
def no_engine(monkeypatch):
    """A run that gets as far as the engine without a test's FakeVLLMGenerator fails at once (never starts vLLM)."""
    monkeypatch.setattr(vg, "VLLMGenerator", lambda *a, **k: pytest.fail("vLLM engine started"))


@pytest.fixture
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("model")
    make_tokenizer_dir(path)
    return str(path)


def test_results_json_config_timing_and_stdout(model, tmp_path, monkeypatch, capsys):
    """Catches: a results ``config`` field dropped, renamed or filled from the wrong option (panel name/argument/
    meta, task count, env defaults for prompt budget and envs in flight, invalid-action mode, env kwargs, the
    generator's settings, host), a vLLM option not passed to the generator (dtype, memory share, eager mode, TP
    size), a timing figure missing, or the one-line stdout summary changed."""
    monkeypatch.setattr(vg, "VLLMGenerator", FakeVLLMGenerator)
    out = tmp_path / "o" / "r.json"
    assert main(["--model", model, "--env", "toy", "--panel", "mytoy", "--num-tasks", "2", "--out", str(out),
                 "--no-progress", "--dtype", "float32", "--gpu-memory-utilization", "0.2", "--enforce-eager",
                 "--tensor-parallel-size", "1", "--invalid-action", "noop", "--env-kwargs", '{"k": 1}',
                 "--temperature", "0", "--max-steps", "3"]) == 0
    gen = FakeVLLMGenerator.made[-1]
    assert gen.model == os.path.abspath(model)
    assert gen.kw == {"temperature": 0.0, "top_p": 1.0, "seed": 0, "max_model_len": 1024 + 512, "dtype": "float32",
                      "gpu_memory_utilization": 0.2, "enforce_eager": True, "tensor_parallel_size": 1}
    res = json.loads(out.read_text())
    assert res["config"] == {
        "model": os.path.abspath(model), "env": "toy", "panel": "toy[:2]", "panel_arg": "mytoy",
        "panel_meta": {"first_n": 2}, "num_tasks": 2, "episodes_per_task": 1, "seed": 0, "temperature": 0.0,
        "top_p": 1.0, "max_steps": 3, "max_tokens": 512, "history_k": 2, "invalid_action": "noop",
        "prompt_max_len": 1024, "num_envs": 8, "data": None, "generated_data": None, "env_kwargs": {"k": 1},
        "vllm": {"stub": True}, "host": platform.node()}
    t = res["timing"]
    assert {"engine_start_s", "episodes_s", "total_s"} <= set(t) and 0 <= t["episodes_s"] <= t["total_s"]
    assert t["engine_start_s"] <= t["total_s"]
    cap = capsys.readouterr()
    brief = json.loads(cap.out.strip().splitlines()[-1])
    assert brief == {k: res[k] for k in ("num_episodes", "num_failed", "success_rate", "mean_score", "mean_steps",
                                         "valid_action_ratio")}
    assert f"wrote {out}" in cap.err


def _exit(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    return e.value.code, capsys.readouterr().err


def test_alfworld_data_root_checks(model, tmp_path, monkeypatch, capsys):
    """Catches: a missing ALFWorld data root not an error (exit 2) with the hint to generate games, $ALFWORLD_DATA
    not read, a data root that does not exist accepted, or a panel problem not an exit-2 error."""
    base = ["--model", model, "--env", "alfworld", "--panel", "eval_id", "--out", str(tmp_path / "r.json")]
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    code, err = _exit(base, capsys)
    assert code == 2 and "ALFWorld needs a data root: pass --data DIR or set $ALFWORLD_DATA" in err
    assert "python -m agents.alfworld generate" in err
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "from-env"))
    code, err = _exit(base, capsys)
    assert code == 2 and f"ALFWorld data root {str(tmp_path / 'from-env')!r} does not exist" in err
    code, err = _exit(base + ["--data", str(tmp_path / "nowhere")], capsys)
    assert code == 2 and "nowhere' does not exist" in err
    (tmp_path / "empty").mkdir()
    code, err = _exit(base + ["--data", str(tmp_path / "empty")], capsys)
    assert code == 2 and "no playable games" in err
    assert not (tmp_path / "r.json").exists()


def test_webshop_unreachable_exits_3_with_the_default_url(model, tmp_path, monkeypatch, capsys):
    """Catches: the WebShop default URL not used without --webshop-url, --webshop-url ignored, or an unreachable
    server not exit status 3 before any model is loaded."""
    import socket

    import agents.webshop.env as wenv

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    monkeypatch.setattr(wenv, "DEFAULT_URL", f"http://127.0.0.1:{port}")
    base = ["--model", model, "--env", "webshop", "--panel", "test", "--num-tasks", "1", "--out",
            str(tmp_path / "r.json")]
    code, err = _exit(base, capsys)
    assert code == 3 and f"WebShop server http://127.0.0.1:{port} is not reachable" in err
    code, err = _exit(base + ["--webshop-url", f"http://127.0.0.1:{port}/x"], capsys)
    assert code == 3 and f"WebShop server http://127.0.0.1:{port}/x is not reachable" in err


def test_bad_numbers_and_boundaries(model, tmp_path, monkeypatch, capsys):
    """Catches: the error messages changed, or the smallest valid values (one episode per task, one env,
    temperature 0) rejected. (--num-envs 0 means the env's default, like an unset option.)"""
    base = ["--model", model, "--env", "toy", "--panel", "t", "--out", str(tmp_path / "r.json"), "--no-progress"]
    code, err = _exit(base + ["--num-envs", "-2"], capsys)
    assert (code, err) == (2, "error: --num-envs must be >= 1\n")
    code, err = _exit(base + ["--episodes-per-task", "0"], capsys)
    assert (code, err) == (2, "error: --episodes-per-task must be >= 1\n")
    code, err = _exit(base + ["--temperature", "-1"], capsys)
    assert (code, err) == (2, "error: --temperature must be >= 0\n")
    monkeypatch.setattr(vg, "VLLMGenerator", FakeVLLMGenerator)
    assert main(base + ["--num-envs", "1", "--episodes-per-task", "1", "--temperature", "0", "--num-tasks",
                        "1"]) == 0
    assert json.loads((tmp_path / "r.json").read_text())["config"]["num_envs"] == 1
