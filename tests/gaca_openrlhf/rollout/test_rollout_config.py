"""The rollout configuration travels to the Ray rollout actors as JSON in ``GACA_ROLLOUT_CONFIG`` (OpenRLHF builds
``AgentExecutor()`` without arguments there): a round trip keeps every field; without the variable, the defaults.
Catches: ``to_env`` writing something else than the config, ``from_env`` ignoring the variable or always parsing.
``from_args`` builds the config from train_ppo's ``--env.*`` options, each field from the option of its own name."""
import dataclasses
import json
import typing

import pytest
from types import SimpleNamespace as ns

from gaca_openrlhf.cli.options import option_spec
from gaca_openrlhf.rollout.agent_executor import AgentExecutor
from gaca_openrlhf.rollout.config import ENV_VAR, RolloutConfig


def test_round_trip_through_the_environment(monkeypatch):
    cfg = RolloutConfig(name="toy", kwargs={"length": 6}, history_k=0, max_steps=7, prompt_max_len=99,
                        max_new_tokens=11, stop=["</a>"], timeout_s=3.5, invalid_action="noop",
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


def _args(**env):
    """train_ppo's parsed options (the generated --env.* defaults) as far as RolloutConfig.from_args reads them."""
    hints = typing.get_type_hints(RolloutConfig)
    defaults = {f.name: option_spec(f, hints[f.name])["default"] for f in dataclasses.fields(RolloutConfig)
                if "from" not in f.metadata}
    return ns(env=ns(**{**defaults, **env}), rollout=ns(max_new_tokens=None), data=ns(max_len=2048),
              train=ns(seed=5))


def test_from_args_reads_each_field_by_its_own_name():
    """Catches: a field read from another option, the JSON kwargs not parsed, the response budget or seed not from
    their OpenRLHF options, or the prompt limit not derived from data.max_len minus the budget (floor 1)."""
    cfg = RolloutConfig.from_args(_args(name="toy", kwargs='{"length": 6}', timeout_s=3.5, history_k=0))
    assert (cfg.name, cfg.kwargs, cfg.timeout_s, cfg.history_k) == ("toy", {"length": 6}, 3.5, 0)
    assert (cfg.max_new_tokens, cfg.prompt_max_len, cfg.seed) == (256, 2048 - 256, 5)
    a = _args(prompt_max_len=300)
    a.rollout.max_new_tokens, a.data.max_len = 40, 10
    assert (RolloutConfig.from_args(a).prompt_max_len, RolloutConfig.from_args(a).max_new_tokens) == (300, 40)
    a.env.prompt_max_len = None
    assert RolloutConfig.from_args(a).prompt_max_len == 1  # never 0 or negative


def test_default_environment_is_the_registrys():
    """Catches: RolloutConfig's default environment disagreeing with the CLI's (both are the registry's default)."""
    from agents.registry import DEFAULT_ENV

    assert RolloutConfig().name == DEFAULT_ENV == RolloutConfig.from_args(_args()).name


def test_credit_audit_requests_the_oracle_where_there_is_one(monkeypatch):
    """auto: oracle "auto" for an environment with an oracle, nothing for one without; on: True, and an error for
    one without; off: nothing; an explicit ``oracle`` in kwargs wins."""
    import agents.registry as registry
    from agents.base import EnvSpec

    assert RolloutConfig(name="toy").env_kwargs() == {"oracle": "auto"}
    assert RolloutConfig(name="toy", credit_audit="on", kwargs={"length": 5}).env_kwargs() == {"length": 5,
                                                                                              "oracle": True}
    assert RolloutConfig(name="toy", credit_audit="off").env_kwargs() == {}
    assert RolloutConfig(name="toy", kwargs={"oracle": False}).env_kwargs() == {"oracle": False}
    no_oracle = EnvSpec(name="plain", make_env=lambda **k: None, prompt=None)
    monkeypatch.setattr(registry, "spec", lambda name: no_oracle)
    assert RolloutConfig(name="plain").env_kwargs() == {}
    with pytest.raises(ValueError, match="has no oracle progress"):
        RolloutConfig(name="plain", credit_audit="on").env_kwargs()
    with pytest.raises(ValueError, match="credit_audit must be one of"):
        RolloutConfig(credit_audit="sometimes")
