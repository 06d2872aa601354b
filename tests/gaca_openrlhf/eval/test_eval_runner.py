"""Fast tests of the evaluation loop, panels and CLI errors (scripted generator, no vLLM/Ray/TextWorld)."""
from __future__ import annotations

import json
import os
import time

import pytest

from agents.base import EnvError, EnvStep
from agents.prompts import PromptTemplate
from gaca_openrlhf.eval import runner as runner_mod
from gaca_openrlhf.eval.panels import PanelError, resolve_panel
from gaca_openrlhf.eval.runner import GenResult, RunConfig, derive_seed, run_episodes, summarize
ACTIONS = ["go forward", "go back", "look"]


class ScriptedGenerator:
    """Answers from the request seed only (like a seeded sampler): valid action, or an invalid reply."""

    def __init__(self):
        self.calls = []

    def generate(self, requests):
        self.calls.append(list(requests))
        out = []
        for r in requests:
            if r.seed % 7 == 0:
                out.append(GenResult("i do not know", [1, 2, 3], "stop"))
            elif r.seed % 11 == 0:
                out.append(GenResult("<think>hmm", [1] * r.max_tokens, "length"))
            else:
                a = ACTIONS[r.seed % 3]
                out.append(GenResult(f"<think>ok</think><action>{a}</action>", [5, 6], "stop"))
        return out


def encode(text):
    return [ord(c) % 250 for c in text]


def run(tasks, progress=False, generator=None, **kw):
    cfg = RunConfig(env="toy", **{"env_kwargs": {"length": 4, "max_steps": 6}, "prompt_max_len": 4000, **kw})
    return run_episodes(tasks, cfg, generator or ScriptedGenerator(), encode, progress=progress)


def test_records_in_panel_order_and_deterministic():
    tasks = [str(i) for i in range(5)]
    a, timing = run(tasks, episodes_per_task=3, num_envs=4, seed=3)
    b, _ = run(tasks, episodes_per_task=3, num_envs=4, seed=3)
    assert a == b
    assert [(r["task"], r["episode"]) for r in a] == [(t, k) for t in tasks for k in range(3)]
    assert timing["generate_calls"] > 0 and timing["max_batch"] <= 4
    # the sampled episodes do not depend on how many run together
    c, timing1 = run(tasks, episodes_per_task=3, num_envs=1, seed=3)
    assert c == a and timing1["max_batch"] == 1
    d, _ = run(tasks, episodes_per_task=3, num_envs=4, seed=4)
    assert d != a
    assert {r["seed"] for r in a} == {derive_seed(3, t, k) for t in tasks for k in range(3)}


def test_record_steps_keeps_each_step_and_its_oracle_info():
    # guards: the anchor recorded after the step instead of the one acted on, or records off by one step
    plain, _ = run(["1", "2"], episodes_per_task=2, seed=2)
    assert all("step_records" not in r for r in plain)
    recs, _ = run(["1", "2"], episodes_per_task=2, seed=2, record_steps=True,
                  env_kwargs={"length": 4, "max_steps": 6, "oracle": True})
    for r in recs:
        steps = r["step_records"]
        assert [s["t"] for s in steps] == list(range(r["steps"]))
        assert steps[0]["anchor"].startswith("You are in room 0.")  # the first step acts on the reset's room
        assert r["first_oracle"] == {"oracle_distance": 1 + int(r["task"]) % 3}
        for s, nxt in zip(steps, steps[1:]):  # the distance after a step is the one before the next
            room = int(nxt["anchor"].split("room ")[1].split(".")[0])
            assert s["oracle"] == {"oracle_distance": abs(1 + int(r["task"]) % 3 - room)}
        assert sum(s["valid"] for s in steps) == r["valid_steps"]
        assert (steps[-1]["reward"] == 10.0) == r["won"]


def test_one_generate_call_per_step_over_live_episodes():
    gen = ScriptedGenerator()
    recs, timing = run(["0", "1", "2"], generator=gen, episodes_per_task=2, num_envs=16)
    assert len(gen.calls[0]) == 6  # every episode in the first call
    assert timing["generate_calls"] == len(gen.calls) == max(r["steps"] for r in recs)
    assert [len(c) for c in gen.calls] == sorted((len(c) for c in gen.calls), reverse=True)


def test_validity_steps_and_summary():
    recs, _ = run([str(i) for i in range(6)], episodes_per_task=2, num_envs=3, seed=1)
    s = summarize(recs)
    assert s["num_episodes"] == 12 and s["num_failed"] == 0
    assert s["success_rate"] == pytest.approx(sum(r["won"] for r in recs) / 12)
    total = sum(r["steps"] for r in recs)
    assert s["valid_action_ratio"] == pytest.approx(sum(r["valid_steps"] for r in recs) / total)
    assert 0 < s["valid_action_ratio"] < 1  # the script emits some invalid replies
    assert all(1 <= r["steps"] <= 6 for r in recs)
    assert s["per_task_type"]["corridor"]["num_episodes"] == 12
    assert all(r["won"] == (r["score"] == 1.0) for r in recs)


def test_truncated_response_is_invalid():
    class Truncating:
        def generate(self, requests):
            return [GenResult("<think>x</think><action>go forward</action>", [1] * r.max_tokens, "length")
                    for r in requests]

    recs, _ = run(["0"], generator=Truncating(), max_new_tokens=4)
    assert recs[0]["steps"] >= 1  # (the toy env ignores validity; ALFWorld/WebShop do not execute it)
    assert recs[0]["valid_steps"] == 0 and recs[0]["truncated_responses"] == recs[0]["steps"]


def test_env_reset_failure_marks_episode_failed_not_crash():
    tasks = ["0", "1", "2"]
    recs, _ = run(tasks, episodes_per_task=2, num_envs=2,
                  **{"env_kwargs": {"length": 4, "max_steps": 6, "fail_on_task": 1}})
    failed = [r for r in recs if r["failed"]]
    assert [(r["task"], r["episode"]) for r in failed] == [("1", 0), ("1", 1)]
    assert all("reset" in r["error"] and "injected failure" in r["error"] for r in failed)
    s = summarize(recs)
    assert s["num_failed"] == 2 and s["num_episodes"] == 6
    assert s["success_rate"] == pytest.approx(sum(r["won"] for r in recs) / 6)  # failures count as not solved


class FlakyEnv:
    """Fails at step 1 on task 'bad', hangs on task 'slow'."""

    name = "flaky"
    max_steps = 3

    def reset(self, task):
        self.task = task
        return "do it", EnvStep("obs", "obs", ["look"])

    def step(self, action, valid=True):
        if self.task == "bad":
            raise EnvError("boom")
        if self.task == "slow":
            time.sleep(3)
        return EnvStep("obs2", "obs2", ["look"], reward=0.0, done=False, won=False, info={"task_type": "t"})

    def close(self):
        pass


def test_step_failure_and_timeout(monkeypatch):
    monkeypatch.setattr(runner_mod, "make_env", lambda name, **kw: FlakyEnv())
    monkeypatch.setattr(runner_mod, "prompt_template", lambda name: PromptTemplate("{observation}", "{observation}"))
    cfg = RunConfig(env="flaky", num_envs=3, env_timeout_s=0.5, max_new_tokens=8, prompt_max_len=64)
    recs, _ = run_episodes(["ok", "bad", "slow"], cfg, ScriptedGenerator(), encode, progress=False)
    by = {r["task"]: r for r in recs}
    assert not by["ok"]["failed"] and by["ok"]["steps"] == 3
    assert by["bad"]["failed"] and "step 0" in by["bad"]["error"] and "boom" in by["bad"]["error"]
    assert by["slow"]["failed"] and "timed out" in by["slow"]["error"]


def test_prompt_truncation_and_token_budget(monkeypatch):
    seen = []

    class Recorder(ScriptedGenerator):
        def generate(self, requests):
            seen.extend(requests)
            return super().generate(requests)

    run(["0"], generator=Recorder(), prompt_max_len=50, max_new_tokens=20, max_model_len=60)
    assert seen and all(len(r.prompt_ids) <= 50 for r in seen)
    assert all(1 <= r.max_tokens <= 10 for r in seen)


def test_progress_bar_runs(capsys):
    run(["0", "1"], progress=True)
    assert "eval" in capsys.readouterr().err


def test_summary_handles_empty_and_all_failed():
    assert summarize([])["success_rate"] is None
    rec = dict(task="a", task_index=0, episode=0, seed=1, task_type="", won=False, score=0.0, steps=0,
               valid_steps=0, valid_action_ratio=None, truncated_responses=0, response_tokens=0, failed=True,
               error="reset: x")
    s = summarize([rec])
    assert s["success_rate"] == 0.0 and s["mean_steps"] is None and s["valid_action_ratio"] is None
    assert s["per_task_type"]["unknown"]["num_failed"] == 1


# ------------------------------------------------------------------------------------------------ panels
def _fake_alfworld_root(tmp_path, split="valid_seen", n=3):
    types = ["pick_and_place_simple", "look_at_obj_in_light", "pick_heat_then_place_in_recep"]
    for i in range(n):
        d = tmp_path / "json_2.1.1" / split / f"{types[i % 3]}-X-None-Y-{i}" / "trial_0"
        d.mkdir(parents=True)
        (d / "traj_data.json").write_text(json.dumps({"task_type": types[i % 3]}))
        (d / "game.tw-pddl").write_text(json.dumps({"solvable": True}))
    return str(tmp_path)


def test_alfworld_standard_panel_built_from_data_root(tmp_path):
    root = _fake_alfworld_root(tmp_path)
    p = resolve_panel("alfworld", "eval_id", data_root=root)
    assert len(p.tasks) == 3 and all(t.startswith("json_2.1.1/valid_seen/") for t in p.tasks)
    assert set(p.task_types.values()) == {"pick_and_place_simple", "look_at_obj_in_light",
                                          "pick_heat_then_place_in_recep"}
    assert resolve_panel("alfworld", "eval_id", data_root=root, num_tasks=2).tasks == p.tasks[:2]
    # a panel file wins over building, and is found under <data>/panels
    os.makedirs(os.path.join(root, "panels"))
    with open(os.path.join(root, "panels", "eval_id.json"), "w") as f:
        json.dump({"name": "eval_id", "split": "valid_seen", "games": p.tasks[:1]}, f)
    assert resolve_panel("alfworld", "eval_id", data_root=root).tasks == p.tasks[:1]
    assert resolve_panel("alfworld", os.path.join(root, "panels", "eval_id.json"), data_root=root).tasks == p.tasks[:1]


def test_alfworld_panel_errors(tmp_path):
    root = _fake_alfworld_root(tmp_path)
    with pytest.raises(PanelError, match="no playable games"):
        resolve_panel("alfworld", "eval_ood", data_root=root)
    with pytest.raises(PanelError, match="unknown ALFWorld panel"):
        resolve_panel("alfworld", "nope", data_root=root)
    with pytest.raises(PanelError, match="ALFWORLD_DATA"):
        resolve_panel("alfworld", "eval_id", data_root=None)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"games": ["json_2.1.1/valid_seen/missing/trial_0"]}))
    with pytest.raises(PanelError, match="not under data root"):
        resolve_panel("alfworld", str(bad), data_root=root)


def test_webshop_panel():
    p = resolve_panel("webshop", "test", num_tasks=3)
    assert p.tasks == ["test:0", "test:1", "test:2"]
    assert len(resolve_panel("webshop", "test").tasks) == 500
    with pytest.raises(PanelError):
        resolve_panel("webshop", "test", num_tasks=501)
    with pytest.raises(PanelError, match="open-ended"):
        resolve_panel("webshop", "train")
    with pytest.raises(PanelError, match="unknown WebShop panel"):
        resolve_panel("webshop", "eval_id")


# ------------------------------------------------------------------------------------------------ CLI errors
def _main(argv):
    from gaca_openrlhf.eval.cli import main

    with pytest.raises(SystemExit) as e:
        main(argv)
    return e.value.code


def test_cli_missing_model(tmp_path, capsys):
    code = _main(["--model", str(tmp_path / "nope"), "--env", "webshop", "--panel", "test",
                  "--out", str(tmp_path / "r.json")])
    assert code == 2 and "does not exist" in capsys.readouterr().err


def test_cli_missing_data_and_panel(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    out = str(tmp_path / "r.json")
    assert _main(["--model", str(model), "--env", "alfworld", "--panel", "eval_id", "--out", out]) == 2
    assert "data root" in capsys.readouterr().err
    root = _fake_alfworld_root(tmp_path / "data")
    assert _main(["--model", str(model), "--env", "alfworld", "--panel", "eval_ood", "--data", root, "--out", out]) == 2
    assert "no playable games" in capsys.readouterr().err
    assert _main(["--model", str(model), "--env", "webshop", "--panel", "dev", "--out", out]) == 2
    assert "unknown WebShop panel" in capsys.readouterr().err
    # unreachable server: exit 3 before any model is loaded
    from webshop_server.testing import free_port

    url = f"http://127.0.0.1:{free_port()}"
    assert _main(["--model", str(model), "--env", "webshop", "--panel", "test", "--num-tasks", "2",
                  "--webshop-url", url, "--out", out]) == 3
    assert "not reachable" in capsys.readouterr().err
    assert not os.path.exists(out)
