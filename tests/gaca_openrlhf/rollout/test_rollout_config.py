"""The rollout configuration travels to the Ray rollout actors as JSON in ``GACA_ROLLOUT_CONFIG`` (OpenRLHF builds
``AgentExecutor()`` without arguments there): a round trip keeps every field; without the variable, the defaults.
Catches: ``to_env`` writing something else than the config, ``from_env`` ignoring the variable or always parsing."""
import json

from gaca_openrlhf.rollout.agent_executor import AgentExecutor
from gaca_openrlhf.rollout.config import ENV_VAR, RolloutConfig


def test_round_trip_through_the_environment(monkeypatch):
    cfg = RolloutConfig(env="toy", env_kwargs={"length": 6}, history_k=0, max_steps=7, prompt_max_len=99,
                        max_new_tokens=11, stop=["</a>"], env_timeout_s=3.5, invalid_action="noop",
                        kill_worker_at_step=2, kill_worker_episodes=4)
    env = cfg.to_env()
    assert list(env) == [ENV_VAR] == ["GACA_ROLLOUT_CONFIG"]
    assert json.loads(env[ENV_VAR])["max_new_tokens"] == 11
    monkeypatch.setenv(ENV_VAR, env[ENV_VAR])
    assert RolloutConfig.from_env() == cfg
    assert AgentExecutor().config == cfg  # what a rollout actor builds


def test_defaults_without_the_variable(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert RolloutConfig.from_env() == RolloutConfig()
