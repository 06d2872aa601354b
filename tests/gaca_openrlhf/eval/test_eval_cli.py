"""The eval session's small parts (``gaca_openrlhf/eval/session.py``): environment config (ALFWorld engine backend, --env-kwargs), model-folder checks,
the JSON writer, and panel-resolution errors that the protocol tests do not reach. No vLLM, Ray or TextWorld."""
from __future__ import annotations

import argparse
import json
import os

import pytest

from gaca_openrlhf.eval.session import check_model, env_config, write_json
from gaca_openrlhf.eval.panels import PanelError, resolve_panel


def ns(**kw):
    base = dict(env="alfworld", alfworld_backend="auto", num_envs=16, data="/d", env_timeout=30.0, env_kwargs=None,
                webshop_url=None)
    return argparse.Namespace(**{**base, **kw})


def test_alfworld_backend_follows_num_envs():
    assert env_config(ns(num_envs=1)) == {"backend": "local", "data_dir": "/d"}
    assert env_config(ns()) == {"backend": "ray", "data_dir": "/d", "reset_timeout_s": 30.0, "step_timeout_s": 30.0}
    assert env_config(ns(alfworld_backend="ray", num_envs=1))["backend"] == "ray"
    # several in-process envs take turns on the engine lock; no Ray-only timeouts reach the local adapter
    assert env_config(ns(alfworld_backend="local", num_envs=4)) == {"backend": "local", "data_dir": "/d"}


def test_env_kwargs_merge_and_errors(capsys):
    assert env_config(ns(env="webshop", webshop_url="http://h:1")) == {"base_url": "http://h:1"}
    assert env_config(ns(env="webshop", webshop_url="u", env_kwargs='{"timeout_s": 5}')) == {"base_url": "u",
                                                                                              "timeout_s": 5}
    assert env_config(ns(num_envs=1, env_kwargs='{"data_dir": "/x"}'))["data_dir"] == "/x"  # the user's wins
    for bad in ("{nope", "[1, 2]"):
        with pytest.raises(SystemExit) as e:
            env_config(ns(env_kwargs=bad))
        assert e.value.code == 2
    assert "--env-kwargs" in capsys.readouterr().err


def test_model_folder_checks(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        check_model(str(tmp_path / "missing"))
    assert e.value.code == 2 and "does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        check_model(str(tmp_path))
    assert e.value.code == 2 and "no config.json" in capsys.readouterr().err
    (tmp_path / "config.json").write_text("{}")
    assert check_model(str(tmp_path)) == os.path.abspath(tmp_path)


def test_write_json_is_strict_json(tmp_path):
    path = tmp_path / "sub" / "r.json"
    write_json(str(path), {"a": float("nan"), "b": [1.5, float("inf")], "c": {"d": 2}})
    assert json.loads(path.read_text()) == {"a": None, "b": [1.5, None], "c": {"d": 2}}
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]  # no temporary file left behind


def _games(root, split, n):
    for i in range(n):
        d = root / "json_2.1.1" / split / f"pick_and_place_simple-A{i}-None-B-{i}" / "trial_0"
        d.mkdir(parents=True)
        (d / "traj_data.json").write_text(json.dumps({"task_type": "pick_and_place_simple"}))
        (d / "game.tw-pddl").write_text(json.dumps({"solvable": True}))


def test_panel_errors_and_seeded_selection(tmp_path):
    with pytest.raises(PanelError, match="does not exist"):
        resolve_panel("alfworld", "eval_id", data_root=str(tmp_path / "nope"))
    _games(tmp_path, "valid_seen", 130)
    with pytest.raises(PanelError, match="positive"):
        resolve_panel("alfworld", "eval_id", data_root=str(tmp_path), num_tasks=0)
    with pytest.raises(PanelError, match="unknown environment"):
        resolve_panel("minecraft", "x")
    a = resolve_panel("alfworld", "eval_id", data_root=str(tmp_path)).tasks
    b = resolve_panel("alfworld", "eval_id", data_root=str(tmp_path), panel_seed=1).tasks
    assert len(a) == len(b) == 128 and a != b  # the panel seed picks the 128 games
    assert resolve_panel("toy", "toy").tasks == ["0", "1", "2", "3"]


@pytest.mark.parametrize("kw,msg", [
    ({"episodes_per_task": 0}, "episodes_per_task must be >= 1, got 0"),
    ({"num_envs": 0}, "num_envs must be >= 1, got 0"),
    ({"max_new_tokens": 0}, "max_new_tokens and prompt_max_len must be >= 1"),
    ({"prompt_max_len": 0}, "max_new_tokens and prompt_max_len must be >= 1"),
    ({"invalid_action": "skip"}, "invalid_action must be 'execute' or 'noop', got 'skip'"),
])
def test_run_config_rejects_bad_values(kw, msg):
    from gaca_openrlhf.eval.runner import RunConfig

    with pytest.raises(ValueError) as e:
        RunConfig(env="toy", **kw)
    assert str(e.value) == msg


def test_run_config_smallest_values_and_model_len():
    from gaca_openrlhf.eval.runner import RunConfig

    cfg = RunConfig(env="toy", episodes_per_task=1, num_envs=1, max_new_tokens=1, prompt_max_len=1)
    assert cfg.max_model_len == 2  # prompt budget + response budget
    assert RunConfig(env="toy", max_model_len=100).max_model_len == 100
