"""The rule a week-long run relies on: an evaluation episode that ended in an environment failure never counts as
won, whatever the environment last reported.

The environments here are scripted stand-ins for one that reported success (``won=True``, ``score=1``) on a step
but had not ended the episode, then failed: an exception or a timeout on its next step, as a dying env worker or
WebShop server does. The real evaluation loop (:func:`run_episodes`), the toy template's prompt and the real
``summarize`` run unchanged.
"""
from __future__ import annotations

import time

import pytest

from agents.base import EnvError, EnvStep
from agents.prompts import PromptTemplate
from gaca_openrlhf.eval import runner as runner_mod
from gaca_openrlhf.eval.runner import GenResult, RunConfig, run_episodes, summarize


class WonThenFails:
    """Step 0 reports won (not done); step 1 raises (task 'raise') or hangs past the timeout (task 'hang')."""

    name = "won-then-fails"
    max_steps = 5

    def reset(self, task):
        self.task, self.t = task, 0
        return "do it", EnvStep("start", "start", ["buy"], info={"task_type": "t"})

    def step(self, action, valid=True):
        self.t += 1
        if self.t == 1:
            return EnvStep("bought", "bought", ["buy"], reward=1.0, done=False, won=True,
                           info={"task_type": "t", "score": 1.0})
        if self.task == "raise":
            raise EnvError("server gone")
        time.sleep(2)  # 'hang'
        return EnvStep("late", "late", ["buy"], reward=0.0, done=True, won=True, info={"score": 1.0})

    def close(self):
        pass


class Buyer:
    def generate(self, requests):
        return [GenResult("<think>ok</think><action>buy</action>", [5, 6], "stop") for _ in requests]


@pytest.fixture
def won_then_fails(monkeypatch):
    monkeypatch.setattr(runner_mod, "make_env", lambda name, **kw: WonThenFails())
    monkeypatch.setattr(runner_mod, "prompt_template", lambda name: PromptTemplate("{observation}", "{observation}"))


def test_an_episode_failed_after_reporting_won_is_not_won(won_then_fails):
    # Guards: `won = bool(obs.won)` without `and not ep.failed` in the episode record (the last observation said
    # won), and a failed episode's score taken from the environment's last info (1.0) instead of 0.
    cfg = RunConfig(env="won-then-fails", num_envs=2, env_timeout_s=0.5, max_new_tokens=8, prompt_max_len=64)
    recs, _ = run_episodes(["raise", "hang"], cfg, Buyer(), lambda s: [ord(c) % 250 for c in s], progress=False)
    by = {r["task"]: r for r in recs}
    assert by["raise"]["failed"] and "server gone" in by["raise"]["error"]
    assert by["hang"]["failed"] and "timed out" in by["hang"]["error"]
    for r in recs:
        assert r["won"] is False and r["score"] == 0.0 and r["steps"] == 1
    s = summarize(recs)
    assert s["success_rate"] == 0.0 and s["mean_score"] == 0.0 and s["task_solved_any_rate"] == 0.0
    assert s["num_failed"] == 2 and s["success_rate_excluding_failed"] is None


def test_the_same_success_without_the_failure_counts(won_then_fails, monkeypatch):
    # The control: the same environment ending the episode at its success counts as won, so the test above
    # fails for the failure, not because this environment can never be won. Guards: a rule that marks every
    # episode with an error text, or every multi-step episode, as lost.
    monkeypatch.setattr(WonThenFails, "max_steps", 1)
    cfg = RunConfig(env="won-then-fails", num_envs=1, env_timeout_s=0.5, max_new_tokens=8, prompt_max_len=64)
    recs, _ = run_episodes(["raise"], cfg, Buyer(), lambda s: [ord(c) % 250 for c in s], progress=False)
    assert recs[0]["won"] is True and recs[0]["score"] == 1.0 and not recs[0]["failed"]
