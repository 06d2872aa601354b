"""The ``toy`` corridor environment (``agents/toy/env.py``) played step by step: goals, walls, the
reward, the step limit, invalid and inadmissible actions, the injected failure and the registry entry. The fast
rollout tests use this env; a silent change in its rules would change what they check."""

import pytest

from agents.base import EnvError
from agents.toy.env import PROMPT, ToyCorridorEnv, make_env


def _obs(room, length=4):
    return f"You are in room {room}. The corridor has rooms 0 to {length - 1}."


def test_defaults_and_reset():
    """Catches: a changed default length or step limit, or reset not returning the goal and room-0 observation."""
    env = ToyCorridorEnv()
    assert (env.length, env.max_steps, env.fail_on_task) == (4, 6, None)
    assert (env.room, env.goal, env.steps) == (0, 0, 0)
    task, obs = env.reset("5")  # goal = 1 + 5 % 3 = 3
    assert task == "go to room 3."
    assert obs.observation == obs.anchor == _obs(0)
    assert obs.admissible_actions == ["go forward", "go back", "look"]
    assert (env.room, env.steps, env.goal) == (0, 0, 3)


@pytest.mark.parametrize("task,goal", [(0, 1), (1, 2), (2, 3), (3, 1), (7, 2)])
def test_goal_is_1_plus_task_mod_length_minus_1(task, goal):
    """Catches: an off-by-one goal (room 0 would be won before any step) or a wrong modulus."""
    env = ToyCorridorEnv(length=4)
    assert env.reset(task)[0] == f"go to room {goal}."


def test_walking_to_the_goal_wins_with_reward_10():
    """Catches: a wrong move direction, a wrong reward, ``done`` not set on the win, or wrong info."""
    env = ToyCorridorEnv(length=5, max_steps=10)
    env.reset(2)  # goal 3
    for room in (1, 2):
        out = env.step("go forward")
        assert out.observation == _obs(room, 5) and out.anchor == _obs(room, 5)
        assert (out.reward, out.won, out.done) == (0.0, False, False)
        assert out.info == {"task_type": "corridor", "score": 0.0}
    out = env.step("go forward")
    assert (out.reward, out.won, out.done) == (10.0, True, True)
    assert out.info == {"task_type": "corridor", "score": 1.0}
    assert env.steps == 3


def test_walls_and_going_back():
    """Catches: leaving the corridor at either end (the min/max bounds) or ``go back`` moving the wrong way."""
    env = ToyCorridorEnv(length=3, max_steps=20)
    env.reset(1)  # goal 2
    assert env.step("go back").observation == _obs(0, 3) and env.room == 0
    env.step("go forward")
    assert env.room == 1
    assert env.step("go back").observation == _obs(0, 3)
    env.reset(0)  # goal 1; the env does not stop the walk after the win, so walk on to the far wall
    for _ in range(4):
        out = env.step("go forward")
    assert env.room == 2 and out.observation == _obs(2, 3) and out.won is False


def test_step_limit_ends_the_episode_without_reward():
    """Catches: ``>=`` -> ``>`` in the step limit (one step too many) or the limit not counted."""
    env = ToyCorridorEnv(length=4, max_steps=3)
    env.reset(0)  # goal 1
    assert env.step("look").done is False
    assert env.step("look").done is False
    out = env.step("look")
    assert (out.done, out.won, out.reward) == (True, False, 0.0)
    assert out.observation == _obs(0)


def test_invalid_and_inadmissible_actions():
    """Catches: an invalid action executed, or the "Nothing happens." answers changed or swapped."""
    env = ToyCorridorEnv()
    env.reset(0)  # goal 1
    out = env.step("go forward", valid=False)
    assert env.room == 0 and out.observation == "Nothing happens." and out.anchor == _obs(0)
    assert (out.won, out.done) == (False, False) and env.steps == 1
    out = env.step("fly")
    assert env.room == 0 and out.observation == "Nothing happens. " + _obs(0)
    out = env.step("look")
    assert out.observation == _obs(0)


def test_injected_failure_only_on_its_task():
    """Catches: the failure injected on every task, never, or with an unclear message."""
    env = ToyCorridorEnv(fail_on_task=2)
    with pytest.raises(EnvError, match="toy env: injected failure on task 2"):
        env.reset("2")
    assert env.reset(1)[0] == "go to room 2."
    assert ToyCorridorEnv(fail_on_task=0).reset(1)[0] == "go to room 2."
    with pytest.raises(EnvError):
        ToyCorridorEnv(fail_on_task=0).reset(0)


def test_make_env_passes_its_config_and_the_registry_line_builds_it():
    """Catches: ``make_env`` ignoring its config, or the registry line pointing at the wrong module/names (the toy
    env is registered by its one line in ``agents.registry``, like every environment: nothing to call first)."""
    from agents import registry

    env = make_env(length=6, max_steps=2, fail_on_task=9)
    assert (env.length, env.max_steps, env.fail_on_task) == (6, 2, 9)
    env.close()
    assert registry.ENVIRONMENTS["toy"] == "agents.toy.spec"
    built = registry.make_env("toy", length=5)
    assert isinstance(built, ToyCorridorEnv) and built.length == 5 and built.name == "toy"
    assert registry.prompt_template("toy") is PROMPT


def test_prompt_names_the_task_actions_and_history():
    """Catches: a changed prompt template (it is what the toy runs train on)."""
    assert "Your task is to: {task}" in PROMPT.first and "{admissible_actions}" in PROMPT.first
    assert "{observation}" in PROMPT.first and "{history}" not in PROMPT.first
    for key in ("{step_count}", "{history_length}", "{history}", "{current_step}", "{observation}"):
        assert key in PROMPT.later
    assert "<action> </action>" in PROMPT.later and "<think> </think>" in PROMPT.first


def test_go_back_is_one_room_and_other_actions_stay_put_away_from_the_walls():
    """Catches: ``go back`` moving two rooms, and ``valid and`` -> ``valid or`` in the ``go back`` test (``look`` or
    an invalid ``go back`` would then move the agent)."""
    env = ToyCorridorEnv(length=6, max_steps=20)
    env.reset(4)  # goal 5
    env.step("go forward")
    env.step("go forward")
    assert env.room == 2
    env.step("look")
    assert env.room == 2
    out = env.step("go back", valid=False)
    assert env.room == 2 and out.observation == "Nothing happens."
    assert env.step("go back").observation == _obs(1, 6) and env.room == 1
