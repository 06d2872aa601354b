"""Edges of the rollout's ``AgentExecutor`` (``rollout/agent_executor.py``) found by mutation testing: the episode
dict's fields, timing, the step limit fallbacks, the prompt budget, info merging, env reuse and closing, the fault
drill.

vLLM is the scripted ``FakeEngine`` of test_agent_executor.py (exact per-token log-probs); the environments are
the real toy corridor or ``ScriptedEnv`` below (registered under a test name), which records its calls.
"""
import asyncio
import logging
from types import SimpleNamespace

import pytest

from agents.base import EnvError, EnvStep
from agents.prompts import PromptTemplate
from agents.registry import ENVIRONMENTS
from gaca_openrlhf.rollout import agent_executor as executor_mod
from gaca_openrlhf.rollout.agent_executor import AgentExecutor
from gaca_openrlhf.rollout.config import RolloutConfig

from test_agent_executor import FakeEngine, FakeTokenizer, _params  # noqa: E402 (tests are rootdir-imported)

SCRIPTED_PROMPT = PromptTemplate(first="O={observation} A=[{admissible_actions}]", later="H={history} O={observation}",
                                 tail_chars=10)
CREATED: list = []  # every ScriptedEnv made through the registry, in order


class ScriptedEnv:
    """Never ends by itself (unless ``done_at``); ``fail_reset`` / ``fail_step_at`` / ``fail_close`` raise."""

    def __init__(self, max_steps=None, reset_info=None, step_info=None, fail_reset=False, fail_step_at=None,
                 fail_close=False, won=False, done_at=None):
        if max_steps is not None:
            self.max_steps = max_steps
        self.reset_info, self.step_info = reset_info or {}, step_info or {}
        self.fail_reset, self.fail_step_at, self.fail_close = fail_reset, fail_step_at, fail_close
        self.won, self.done_at = won, done_at
        self.resets, self.steps, self.closed = 0, 0, 0
        CREATED.append(self)

    def reset(self, task):
        self.resets += 1
        if self.fail_reset:
            raise EnvError("scripted reset failure")
        self.steps = 0
        return f"task {task}", EnvStep(observation="start", anchor="start", admissible_actions=["look"],
                                       info=dict(self.reset_info))

    def step(self, action):
        if self.fail_step_at is not None and self.steps == self.fail_step_at:
            raise EnvError("scripted step failure")
        self.steps += 1
        done = self.done_at is not None and self.steps >= self.done_at
        return EnvStep(observation=f"obs {self.steps}", anchor=f"obs {self.steps}", admissible_actions=["look"],
                       reward=1.0, done=done, won=self.won and done, info=dict(self.step_info))

    def close(self):
        self.closed += 1
        if self.fail_close:
            raise RuntimeError("close failed")


def make_scripted_env(**config):
    return ScriptedEnv(**config)


@pytest.fixture
def scripted(monkeypatch):
    monkeypatch.setitem(ENVIRONMENTS, "scripted", (__name__, "make_scripted_env", "SCRIPTED_PROMPT"))
    CREATED.clear()
    return "scripted"


LOOK = "<think>x</think><action>look</action>"


def run(executor, engine=None, task="0", max_length=4096):
    engine = engine or FakeEngine([])
    return asyncio.run(executor.execute(task, "the label", _params(), max_length, FakeTokenizer(), engine))


class FakeClock:
    """``time.time`` advancing 1 s per call: every measured interval is exactly 1 s."""

    def __init__(self):
        self.now = 1000.0

    def time(self):
        self.now += 1.0
        return self.now


def test_episode_dict_of_a_finished_episode(monkeypatch):
    """Every field, exact (the clock is scripted: reset 1 s, 2 x (generate 1 s + step 1 s))."""
    monkeypatch.setattr(executor_mod, "time", FakeClock())
    out = run(AgentExecutor(RolloutConfig(name="toy", max_steps=2)), FakeEngine([LOOK, LOOK]), task="2")
    uid = out.pop("traj_uid")
    steps = out.pop("steps")
    assert out == dict(prompt="2", label="the label", failed=False, error="", won=False, score=0.0,
                       task_type="corridor", env_seconds=3.0, gen_seconds=2.0)
    assert len(steps) == 2 and isinstance(uid, int) and 0 <= uid < 2**62


def test_episode_dict_of_an_episode_failed_at_reset(scripted, caplog):
    """Nothing overwritten after the failure; the env is closed; the failure is logged with its task."""
    with caplog.at_level(logging.WARNING, logger=executor_mod.logger.name):
        out = run(AgentExecutor(RolloutConfig(name=scripted, kwargs={"fail_reset": True})), task="7")
    out.pop("traj_uid")
    assert out == dict(prompt="7", label="the label", steps=[], failed=True,
                       error="reset: EnvError('scripted reset failure')", won=False, score=0.0, task_type="",
                       env_seconds=0.0, gen_seconds=0.0)
    assert [e.closed for e in CREATED] == [1]  # created, reset failed: closed, not kept
    assert "env reset failed for task '7': EnvError('scripted reset failure')" in caplog.text


def test_trajectory_uids_are_62_bit_and_distinct():
    ex = AgentExecutor(RolloutConfig(name="toy", max_steps=1))
    uids = [run(ex, FakeEngine([LOOK]))["traj_uid"] for _ in range(24)]
    assert len(set(uids)) == 24 and all(0 <= u < 2**62 for u in uids)


def test_first_observation_info_kept_unless_the_last_step_overrides_it(scripted):
    """ALFWorld puts the task type in the reset info only: it must reach the episode (and a score from the last
    step wins over the reset's)."""
    cfg = RolloutConfig(name=scripted, max_steps=1, kwargs={"reset_info": {"task_type_name": "pick_two", "score": 0.1},
                                                               "step_info": {"score": 0.6}})
    out = run(AgentExecutor(cfg), FakeEngine([LOOK]))
    assert out["task_type"] == "pick_two" and out["score"] == 0.6


def test_step_limit_from_the_env_then_the_default(scripted):
    """``max_steps`` 0: the env's own limit (3 here); an env without one: 50 steps."""
    out = run(AgentExecutor(RolloutConfig(name=scripted, kwargs={"max_steps": 3})))
    assert len(out["steps"]) == 3 and not out["failed"]
    out = run(AgentExecutor(RolloutConfig(name=scripted)))
    assert len(out["steps"]) == 50


def test_prompt_budget_leaves_room_for_one_response_token():
    """Prompt <= max_length - 1 tokens (the rest is the response), at least 1 token: catches +-1 in the budget."""
    engine = FakeEngine([])
    run(AgentExecutor(RolloutConfig(name="toy", max_steps=1, prompt_max_len=4000)), engine, max_length=60)
    assert len(engine.calls[0][0]) == 59 and engine.calls[0][1].max_tokens == 1
    engine = FakeEngine([])
    run(AgentExecutor(RolloutConfig(name="toy", max_steps=1, prompt_max_len=4000)), engine, max_length=2)
    assert len(engine.calls[0][0]) == 1 and engine.calls[0][1].max_tokens == 1


def test_env_reused_after_a_finished_episode_and_closed_after_a_failed_one(scripted, caplog):
    ex = AgentExecutor(RolloutConfig(name=scripted, max_steps=1))
    run(ex, FakeEngine([LOOK]))
    run(ex, FakeEngine([LOOK]))
    assert len(CREATED) == 1 and CREATED[0].resets == 2 and CREATED[0].closed == 0  # one env, reused
    bad = AgentExecutor(RolloutConfig(name=scripted, max_steps=3, kwargs={"fail_step_at": 1}))
    with caplog.at_level(logging.WARNING, logger=executor_mod.logger.name):
        out = run(bad, FakeEngine([LOOK, LOOK]), task="4")
    assert out["failed"] and out["error"] == "step 1: EnvError('scripted step failure')" and len(out["steps"]) == 1
    assert CREATED[1].closed == 1 and bad._idle_envs == []  # a broken env is closed, never reused
    assert "env step failed for task '4' at step 1: EnvError('scripted step failure')" in caplog.text


def test_close_failure_is_logged_not_raised(scripted, caplog):
    ex = AgentExecutor(RolloutConfig(name=scripted, kwargs={"fail_reset": True, "fail_close": True}))
    with caplog.at_level(logging.WARNING, logger=executor_mod.logger.name):
        out = run(ex)
    assert out["failed"] and CREATED[0].closed == 1
    assert "env close failed: RuntimeError('close failed')" in caplog.text


def test_env_calls_and_close_are_bounded_in_time(scripted, monkeypatch):
    """reset/step wait at most ``timeout_s``; closing a (dead) env at most 30 s."""
    timeouts = []
    real_wait_for = asyncio.wait_for

    async def wait_for(aw, timeout):
        timeouts.append(timeout)
        return await real_wait_for(aw, timeout)

    monkeypatch.setattr(executor_mod.asyncio, "wait_for", wait_for)
    ex = AgentExecutor(RolloutConfig(name=scripted, max_steps=1, timeout_s=7.5, kwargs={"fail_step_at": 0}))
    run(ex, FakeEngine([LOOK]))
    assert timeouts == [7.5, 7.5, 7.5, 30]  # make env, reset, step (fails), close


def test_fault_drill_kills_the_env_worker_once(scripted, monkeypatch):
    """``kill_worker_at_step`` kills the env's Ray worker (``ray.kill(actor, no_restart=True)``) in the first
    ``kill_worker_episodes`` episodes reaching that step; Ray's kill is recorded here (the slow drill runs it)."""
    import ray

    killed = []
    monkeypatch.setattr(ray, "kill", lambda actor, no_restart: killed.append((actor, no_restart)))
    ex = AgentExecutor(RolloutConfig(name=scripted, max_steps=2, kill_worker_at_step=1, kill_worker_episodes=1))
    ex._make_env()  # prime the pool with an env that has a worker handle
    ex._idle_envs = [CREATED[0]]
    CREATED[0]._actor = "actor-0"
    run(ex, FakeEngine([LOOK, LOOK]))
    run(ex, FakeEngine([LOOK, LOOK]))
    assert killed == [("actor-0", True)] and ex._kills_left == 0


def test_step_records_carry_the_anchor_id_and_text(scripted):
    """Similarity grouping reads ``anchor_text``; step grouping the int ``anchor_id`` of the observation acted on: the
    estimators' hash of the raw anchor, so the advantage CLI computes the same ids from raw observations."""
    from gaca_openrlhf.advantages.hashing import hash_anchor

    out = run(AgentExecutor(RolloutConfig(name=scripted, max_steps=2)), FakeEngine([LOOK, LOOK]))
    assert [s["anchor_text"] for s in out["steps"]] == ["start", "obs 1"]
    assert [s["anchor_id"] for s in out["steps"]] == [hash_anchor("start"), hash_anchor("obs 1")]
    again = run(AgentExecutor(RolloutConfig(name=scripted, max_steps=2)), FakeEngine([LOOK, LOOK]))
    assert [s["anchor_id"] for s in again["steps"]] == [s["anchor_id"] for s in out["steps"]]  # stable across runs
    assert all(type(s["anchor_id"]) is int for s in out["steps"])


def test_stop_string_kept_in_the_response():
    """The response ends with ``</action>`` as the policy produced it (the trainer scores those tokens too)."""
    engine = FakeEngine([LOOK])
    run(AgentExecutor(RolloutConfig(name="toy", max_steps=1)), engine)
    assert engine.calls[0][1].include_stop_str_in_output is True


def test_fault_drill_at_step_zero_and_off_by_default(scripted, monkeypatch):
    import ray

    killed = []
    monkeypatch.setattr(ray, "kill", lambda actor, no_restart: killed.append(actor))
    for at_step, want in ((-1, []), (0, ["actor"])):  # -1 (default): never
        CREATED.clear()
        ex = AgentExecutor(RolloutConfig(name=scripted, max_steps=1, kill_worker_at_step=at_step))
        ex._idle_envs = [make_scripted_env()]
        CREATED[0]._actor = "actor"
        killed.clear()
        run(ex, FakeEngine([LOOK]))
        assert killed == want, at_step


def test_env_creation_failure_fails_the_episode_without_closing_anything(scripted, caplog):
    ex = AgentExecutor(RolloutConfig(name=scripted, kwargs={"no_such_option": 1}))
    with caplog.at_level(logging.WARNING, logger=executor_mod.logger.name):
        out = run(ex)
    assert out["failed"] and out["error"].startswith("reset: TypeError(")
    assert "env close failed" not in caplog.text  # there is no env to close


def test_prompt_truncation_is_logged(caplog):
    with caplog.at_level(logging.WARNING, logger=executor_mod.logger.name):
        run(AgentExecutor(RolloutConfig(name="toy", max_steps=1, prompt_max_len=50)), FakeEngine([LOOK]))
    assert "[gaca rollout] step prompt of" in caplog.text and "left-truncated to 50" in caplog.text


def test_response_cut_at_the_token_limit_is_invalid_even_if_it_parses():
    """The shared validity rule gets the finish reason (catches it dropped: the tags of this one parse)."""
    out = run(AgentExecutor(RolloutConfig(name="toy", max_steps=1)), FakeEngine([LOOK], finish="length"))
    assert out["steps"][0]["valid"] is False and out["steps"][0]["truncated"] is True


def test_fault_drill_skips_envs_without_a_worker(scripted, monkeypatch):
    """Local envs have no Ray worker handle: the drill leaves them alone (no crash, no kill)."""
    import ray

    monkeypatch.setattr(ray, "kill", lambda *a, **k: pytest.fail("no worker to kill"))
    out = run(AgentExecutor(RolloutConfig(name=scripted, max_steps=1, kill_worker_at_step=0)), FakeEngine([LOOK]))
    assert not out["failed"] and len(out["steps"]) == 1


def test_task_type_empty_when_the_env_reports_none(scripted):
    out = run(AgentExecutor(RolloutConfig(name=scripted, max_steps=1)), FakeEngine([LOOK]))
    assert out["task_type"] == "" and out["score"] == 0.0  # no score info: float(won)
