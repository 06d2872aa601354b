"""The observation-consistent ALFWorld searcher (agents/alfworld/search.py) on generated games (real
TextWorld engine)."""
from __future__ import annotations

import pytest

from agents.alfworld.search import SearchState, next_action, parse_task, play


def test_parse_task_reads_both_templates():
    # bug caught: a regex that only knows "put a X in Y" (half of the pick_and_place_simple games)
    assert parse_task("put a book in shelf.") == ("book", "shelf")
    assert parse_task("put some keychain on dresser.") == ("keychain", "dresser")
    assert parse_task("heat some egg and put it in fridge.") is None


def test_search_goes_to_the_receptacle_after_the_current_one():
    # the current receptacle is never in the admissible "go to" list; bug caught: restarting from the first listed
    # receptacle (the searcher then shuttles between the first two forever)
    st = SearchState("book", "shelf", ["go to desk 1"])
    adm = ["go to bed 1", "go to desk 2", "go to drawer 1", "go to shelf 1", "inventory", "look"]
    assert next_action(st, "You arrive at desk 1.", adm) == "go to desk 2"
    st = SearchState("book", "shelf", ["go to drawer 1"])
    # after the last one it wraps around; the goal class (shelf) is skipped
    assert next_action(st, "", ["go to bed 1", "go to desk 1", "go to shelf 1"]) == "go to bed 1"


def test_search_opens_takes_and_delivers():
    st = SearchState("mug", "sinkbasin", ["go to cabinet 1"])
    assert next_action(st, "The cabinet 1 is closed.", ["go to sinkbasin 1", "open cabinet 1"]) == "open cabinet 1"
    assert next_action(st, "", ["close cabinet 1", "take mug 2 from cabinet 1", "go to sinkbasin 1"]) == \
        "take mug 2 from cabinet 1"
    assert next_action(st, "", ["go to cabinet 2", "go to sinkbasin 1", "move mug 2 to cabinet 1"]) == \
        "go to sinkbasin 1"
    assert next_action(st, "", ["go to cabinet 1", "move mug 2 to sinkbasin 1"]) == "move mug 2 to sinkbasin 1"


@pytest.fixture(scope="module")
def small_rooms(tmp_path_factory) -> str:
    from agents.alfworld.generator import generate

    root = str(tmp_path_factory.mktemp("alfworld_r5"))
    stats = generate(root, "valid_seen", 8, seed=0, task_types=[1], max_receptacles=5)
    assert stats.written == 8, stats.as_dict()
    return root


def test_searcher_wins_and_each_action_follows_from_its_prompt(small_rooms):
    from agents.alfworld.env import AlfworldEnv
    from agents.alfworld.panels import list_games

    env = AlfworldEnv(data_dir=small_rooms, max_steps=15)
    try:
        episodes = [play(env, g, 15) for g, _ in list_games(small_rooms, "valid_seen")]
    finally:
        env.close()
    # bug caught: any rule that needs the hidden location or loops (the step cap is 15)
    assert all(ep is not None and ep["won"] for ep in episodes)
    for ep in episodes:
        obj, goal = parse_task(ep["task_text"])
        for t, (obs, adm, act) in enumerate(zip(ep["observations"], ep["admissibles"], ep["actions"])):
            # what a 2-step-history prompt shows: the last two actions only. Bug caught: a rule that reads older
            # memory (e.g. holding known only from a take 3 steps back), which the model cannot imitate
            visible = SearchState(obj, goal, list(ep["actions"][max(0, t - 2):t]))
            assert next_action(visible, obs, adm) == act, (ep["task_text"], t, ep["actions"])


def test_search_demos_render_prompts_for_sft(small_rooms):
    from agents.alfworld.panels import list_games
    from agents.alfworld.demos import alfworld_demos

    games = [g for g, _ in list_games(small_rooms, "valid_seen")]
    steps, stats = alfworld_demos(small_rooms, games, max_steps=15, expert="search")
    assert stats["won"] == len(games) and stats["expert"] == "search"
    assert len(steps) == stats["steps"] and all(s.response.endswith("</action>") for s in steps)
    with pytest.raises(ValueError):
        alfworld_demos(small_rooms, games, expert="oracle")


def test_here_is_read_from_any_action_that_names_the_place():
    # a 2-step window after a repeated open has lost the "go to"; bug caught: here = None there, so the recovering
    # searcher restarts its tour instead of going on from where it stands
    assert SearchState("mug", "sinkbasin", ["open cabinet 2", "open cabinet 2"]).here == "cabinet 2"
    assert SearchState("mug", "sinkbasin", ["go to cabinet 1", "take mug 1 from drawer 3"]).here == "drawer 3"
    assert SearchState("mug", "sinkbasin", ["go to cabinet 1", "look"]).here == "cabinet 1"
    assert SearchState("mug", "sinkbasin", ["look", "inventory"]).here is None


def test_detour_actions_are_the_mistakes_they_name():
    import random

    from agents.alfworld.search import detour_action

    adm = ["go to bed 1", "go to desk 2", "go to shelf 1", "look"]
    st = SearchState("book", "shelf", ["go to desk 1", "open desk 1"])
    assert detour_action("repeat", st, adm, random.Random(0)) == "open desk 1"
    assert st.actions[-1] == "open desk 1"  # recorded, so the search goes on from the detour's state
    assert detour_action("stay", SearchState("book", "shelf", ["go to desk 1"]), adm, random.Random(0)) == \
        "go to desk 1"
    drawn = {detour_action("wander", SearchState("book", "shelf", []), adm, random.Random(i)) for i in range(40)}
    assert drawn == {"go to bed 1", "go to desk 2", "go to shelf 1"}  # only admissible go-tos, each reachable
    assert detour_action("stay", SearchState("book", "shelf", []), adm, random.Random(0)) == "look"
    with pytest.raises(ValueError, match="unknown detour kind"):
        detour_action("jump", st, adm, random.Random(0))


@pytest.mark.parametrize("kind", ["repeat", "stay", "wander"])
def test_detour_episodes_recover_and_follow_from_their_prompts(small_rooms, kind):
    import random

    from agents.alfworld.env import AlfworldEnv
    from agents.alfworld.panels import list_games

    env = AlfworldEnv(data_dir=small_rooms, max_steps=50)
    try:
        for g, _ in list_games(small_rooms, "valid_seen"):
            clean = play(env, g, 50)
            for at in (1, len(clean["actions"]) - 1):
                ep = play(env, g, 50, detour=(at, kind), rng=random.Random(at))
                # bug caught: the detour not applied (the episode equals the clean one) or applied at another step
                assert ep["actions"][:at] == clean["actions"][:at]
                assert ep["actions"][at] != clean["actions"][at], (kind, at, ep["actions"])
                assert ep["won"], (g, kind, at, ep["actions"])  # the searcher recovers within 50 steps
                obj, goal = parse_task(ep["task_text"])
                for t in range(at + 1, len(ep["actions"])):
                    # after the mistake each action is a function of the 2-step history the prompt shows
                    visible = SearchState(obj, goal, list(ep["actions"][t - 2:t]))
                    assert next_action(visible, ep["observations"][t], ep["admissibles"][t]) == ep["actions"][t]
    finally:
        env.close()


def test_search_demos_with_detours_add_recovery_steps_only(small_rooms, tmp_path):
    import shutil

    from agents.alfworld.demos import alfworld_demos
    from agents.alfworld.panels import list_games

    games = [g for g, _ in list_games(small_rooms, "valid_seen")]
    clean, _ = alfworld_demos(small_rooms, games, max_steps=50, expert="search")
    steps, stats = alfworld_demos(small_rooms, games, max_steps=50, expert="search", detours=2)
    assert stats["detour_episodes"] == 2 * len(games) and 0 < stats["detour_won"] <= stats["detour_episodes"]
    assert len(steps) == len(clean) + stats["detour_steps"] and stats["detour_steps"] > 0
    pairs = [(s.prompt, s.response) for s in steps]
    # the clean episodes are all there, unchanged (bug caught: detours replacing the clean demonstrations)
    assert all((s.prompt, s.response) in pairs for s in clean)
    # the mistake itself is never a target: the detour's own step has the clean episode's prompt, so a kept
    # mistake would answer a clean prompt differently (bug caught: keeping the steps from the detour on)
    clean_answer = {s.prompt: s.response for s in clean}
    assert all(clean_answer.get(p, r) == r for p, r in pairs)
    # the recovery steps are there: prompts that show a step that changed nothing, which clean ones never do
    extra = [p for p, _ in pairs if p not in clean_answer]
    assert extra and any("Nothing happens" in p for p in extra)
    assert not any("Nothing happens" in s.prompt for s in clean)
    # seeded by the games' identity: the same steps from a copy of the data elsewhere
    moved = tmp_path / "elsewhere"
    shutil.copytree(small_rooms, moved)
    again, _ = alfworld_demos(str(moved), [g.replace(small_rooms, str(moved)) for g in games], max_steps=50,
                              expert="search", detours=2)
    assert [(s.prompt, s.response) for s in again] == pairs
    with pytest.raises(ValueError, match="detours"):
        alfworld_demos(small_rooms, games, expert="walkthrough", detours=1)
