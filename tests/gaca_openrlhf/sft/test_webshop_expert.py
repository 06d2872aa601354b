"""The goal-aware WebShop demonstrator against the real Flask server over HTTP (a generated 1000-product shop)."""
import pytest

from agents.parsing import parse_action
from agents.webshop.expert import plan_click, webshop_demos
from webshop_server.engine import Shop
from webshop_server.testing import serve_in_thread


@pytest.fixture(scope="module")
def url():
    with serve_in_thread(Shop(num_products=1000, seed=0), expose_goals=True) as u:
        yield u


def test_plan_click_matches_case_insensitively_and_only_whole_texts():
    acts = ["search[<your query>]", "click[B0ABC]", "click[Next >]"]
    assert plan_click(acts, "b0abc") == "click[B0ABC]" and plan_click(acts, "next >") == "click[Next >]"
    assert plan_click(acts, "B0AB") is None


def test_demos_win_and_are_rendered_with_the_training_prompts(url):
    seen = []
    steps, stats = webshop_demos(url, [f"train:{i}" for i in range(6)], progress=lambda i, n: seen.append((i, n)))
    assert stats["goals"] == 6 and stats["won"] + stats["not_won"] == 6 and stats["won"] >= 4
    assert stats["steps"] == len(steps) and seen[-1] == (6, 6)
    by_task = {}
    for s in steps:
        by_task.setdefault(s.task, []).append(s)
    assert len(by_task) == stats["won"]
    for episode in by_task.values():
        actions = [parse_action(s.response).action for s in episode]
        assert actions[0].startswith("search[") and actions[-1] == "click[buy now]"
        assert all(parse_action(s.response).valid for s in episode)
        assert "search[<your query>]" in episode[0].prompt  # the first page's admissible actions, as the policy sees
        assert all(a.lower() in s.prompt.lower() for s, a in zip(episode[1:], actions[1:]))  # clicked = listed


def test_a_goal_id_outside_the_split_is_a_clear_error(url):
    from agents.base import EnvError

    with pytest.raises(EnvError, match="index 999999 out of range for split 'train'"):
        webshop_demos(url, ["train:999999"])
