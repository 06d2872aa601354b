"""The WebShop AgentEnv adapter against a real server on loopback."""
import socket
import time

import pytest

from agents.base import AgentEnv, EnvError, EnvStep
from agents.parsing import parse_action
from agents.prompts import StepMemory, render_step_prompt
from agents.registry import make_env as registry_make_env
from agents.registry import prompt_template
from agents.webshop.client import SessionLostError
from agents.webshop.env import MAX_STEPS, PROMPT, format_avail_actions, format_obs, make_env, parse_task
from webshop_server.testing import goal_option_values


def test_format_helpers_follow_verl_agent():
    task = "i need a green tea"
    obs = f"Instruction: [SEP] {task} [SEP] Back to Search [SEP] Page 1 (Total results: 50) [SEP] Next >"
    assert format_obs(obs, task) == "'Back to Search' [SEP] 'Page 1 (Total results: 50)' [SEP] 'Next >'"
    assert format_obs("Thank you [SEP] 1.0", task) == "Thank you [SEP] 1.0"
    assert format_avail_actions({"has_search_bar": True, "clickables": ["search"]}) == [
        "search[<your query>]", "click[search]"]
    assert format_avail_actions({"has_search_bar": False, "clickables": ["back to search", "b0abc"]}) == [
        "click[back to search]", "click[b0abc]"]
    with pytest.raises(ValueError):
        format_avail_actions({"bogus": 1})
    assert parse_task(7) == {"goal_index": 7} and parse_task("12") == {"goal_index": 12}
    assert parse_task("test:3") == {"split": "test", "index": 3} and parse_task("train/0") == {"split": "train", "index": 0}
    with pytest.raises(ValueError):
        parse_task("somewhere")


def test_env_protocol_and_registry(ws_url):
    env = registry_make_env("webshop", base_url=ws_url)
    assert isinstance(env, AgentEnv) and env.name == "webshop" and env.max_steps == MAX_STEPS == 15
    assert prompt_template("webshop") is PROMPT
    task, first = env.reset("test:0")
    assert isinstance(first, EnvStep) and first.reward == 0.0 and not first.done
    assert first.observation == "'Search'" and first.anchor == first.observation
    assert first.admissible_actions == ["search[<your query>]", "click[search]"]
    mem = StepMemory(k=2)
    text = render_step_prompt(PROMPT, task, mem, first.observation, first.admissible_actions)
    assert f"Your task is to: {task}." in text and "[\n'search[<your query>]',\n'click[search]',\n]" in text
    mem.add(first.observation, "search[tea]")
    later = render_step_prompt(PROMPT, task, mem, first.observation, first.admissible_actions)
    assert "[Observation 1: ''Search'', Action 1: 'search[tea]']" in later and "step 2" in later
    results = env.step("search[tea]")  # WebShop's anchor: the formatted observation of each page
    assert results.anchor == results.observation != first.anchor
    env.close()


def _expert_actions(env, goal, step):
    query = goal["instruction_text"].split(", and price lower than")[0]
    cur = step(f"search[{query}]")
    target = f"click[{goal['asin'].lower()}]"
    for _ in range(5):  # "Next >" is always listed (as in WebShop); the top 50 fill 5 pages
        if target in cur.admissible_actions:
            break
        cur = step("click[next >]")
    cur = step(target)
    for v in goal_option_values(goal):
        if f"click[{v}]" in cur.admissible_actions:
            cur = step(f"click[{v}]")
    return step("click[buy now]")


@pytest.mark.parametrize("task", ["test:0", "test:1", "eval:2", 1300])
def test_expert_episode_wins_reward_10(ws_url, task):
    env = make_env(base_url=ws_url)
    text, first = env.reset(task)
    goal = env.goal()
    assert goal["instruction_text"] == text
    last = _expert_actions(env, goal, lambda a: env.step(parse_action(f"<think>ok</think><action>{a}</action>").action))
    assert last.done and last.won and last.reward == 10.0
    assert last.info["score"] == 1.0 and last.info["task_score"] == 1.0 and last.info["won"]
    assert last.info["task_type"] in ("beauty", "electronics", "fashion", "grocery", "furniture")
    assert last.admissible_actions == [] and "Thank you for shopping with us!" in last.observation
    with pytest.raises(EnvError):
        env.step("click[back to search]")
    env.close()


def test_wrong_purchase_gives_zero_reward_and_logs_score(ws_url):
    env = make_env(base_url=ws_url)
    task, _ = env.reset("test:5")
    goal = env.goal()
    res = env.step("search[zzz office chair green tea cable]")
    asin = next(a for a in res.admissible_actions if a.startswith("click[b0") and goal["asin"].lower() not in a)
    env.step(asin)
    last = env.step("click[buy now]")
    assert last.done and not last.won and last.reward == 0.0 and 0.0 <= last.info["score"] < 1.0
    env.close()


def test_invalid_actions_are_noops_and_steps_are_bounded(ws_url):
    env = make_env(base_url=ws_url)
    _, first = env.reset("test:7")
    res = env.step("search[green tea]")
    bad = parse_action("I will click buy now")  # no tags -> invalid, never executed
    assert not bad.valid
    same = env.step(bad.action, valid=bad.valid)
    assert same.observation == res.observation and same.reward == 0 and not same.done
    assert same.info["is_action_valid"] is False and same.info["executed"] is False
    garbage = env.step("teleport to checkout")  # not search[...] / click[...]: answered locally as unknown
    assert garbage.observation == res.observation and garbage.info["executed"] is False
    noop = env.step("click[not a button]")  # sent; the shop answers unknown clicks as no-ops
    assert noop.observation == res.observation and noop.info["executed"] is False and noop.info["is_action_valid"]
    steps = 4
    while not noop.done:
        noop = env.step("click[next >]" if steps % 2 else "click[< prev]")
        steps += 1
    assert steps == MAX_STEPS and noop.info["truncated"] and not noop.won and noop.reward == 0
    env.close()


def test_server_failures_raise_env_error(ws_url):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    env = make_env(base_url=dead, retries=1, backoff=0.05, timeout=2, connect_wait=0.5)
    t0 = time.monotonic()
    with pytest.raises(EnvError, match="failed"):
        env.reset("test:0")
    assert 0.5 <= time.monotonic() - t0 < 5  # a refused connection is retried for connect_wait seconds
    env = make_env(base_url=ws_url)
    with pytest.raises(EnvError):
        env.reset("test:100000")  # out of range -> 400 from the server
    env.reset("test:0")
    env.client.close_session(env.session_id)  # server forgets the session (e.g. evicted)
    with pytest.raises(SessionLostError, match="closed") as lost:
        env.step("search[tea]")
    assert isinstance(lost.value, EnvError) and lost.value.reason == "closed"
    assert env.client.lost_sessions == {"closed": 1} and env.failed_episodes == {"closed": 1} and env.done
    with pytest.raises(TypeError):
        make_env(base_url=ws_url, colour="red")


def test_envs_are_isolated_and_reset_frees_previous_session(ws_url):
    a, b = make_env(base_url=ws_url), make_env(base_url=ws_url)
    a.reset("test:0")
    b.reset("test:0")
    old = a.session_id
    ra = a.step("search[green tea]")
    rb = b.step("click[search]")
    assert ra.observation != rb.observation and rb.observation == "'Search'"
    a.reset("test:1")
    with pytest.raises(EnvError):
        a.client.step(old, "click[x]")
    a.close()
    b.close()


def test_oracle_value_in_info(ws_url):
    # guards: the value read before the step instead of after it, or a no-op that asks the server again
    env = make_env(base_url=ws_url, oracle=True)
    try:
        _, first = env.reset("test:0")
        assert first.info["oracle_value"] == 1.0  # the search page: the goal's own product
        empty = env.step("search[zzzq qqqz]")  # no result: nothing reachable forward
        assert empty.info["oracle_value"] == 0.0
        same = env.step("click[back to search]", valid=False)  # not sent: page and value unchanged
        assert same.info["oracle_value"] == 0.0
        back = env.step("click[back to search]")
        assert back.info["oracle_value"] == 1.0
    finally:
        env.close()
    plain = make_env(base_url=ws_url)
    try:
        _, first = plain.reset("test:0")
        assert "oracle_value" not in first.info
    finally:
        plain.close()


def test_oracle_auto_follows_what_the_server_exposes(ws_url, ws_shop):
    """``oracle="auto"`` (the credit audit's default): on where the server exposes goals (``/health``'s
    ``goals_exposed``), off, without an error, where it does not; any other value is refused."""
    from webshop_server.testing import serve_in_thread

    env = make_env(base_url=ws_url, oracle="auto")
    try:
        assert env.reset("test:0")[1].info["oracle_value"] == 1.0
    finally:
        env.close()
    with serve_in_thread(ws_shop, expose_goals=False, production=True) as hidden_url:
        env = make_env(base_url=hidden_url, oracle="auto")
        try:
            _, first = env.reset("test:0")
            assert "oracle_value" not in first.info and "oracle_value" not in env.step("search[x]").info
        finally:
            env.close()
    with pytest.raises(ValueError, match="oracle must be"):
        make_env(base_url=ws_url, oracle="yes")
