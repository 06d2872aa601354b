"""Expert demonstrations rendered with the training prompts (real ALFWorld engine, generated games)."""
import json

import pytest

from agents.parsing import parse_action
from agents.alfworld.demos import alfworld_demos
from gaca_openrlhf.sft.demos import DemoStep, expert_response, load_demos, render_episode, save_demos


@pytest.fixture(scope="module")
def games(tmp_path_factory):
    from agents.alfworld.generator import generate
    from agents.alfworld.panels import list_games

    root = tmp_path_factory.mktemp("alf")
    generate(str(root), "train", 2, seed=0, task_types=[1])
    return str(root), [g for g, _ in list_games(str(root), "train")]


def test_expert_response_parses_to_the_action():
    r = expert_response("take mug 1 from desk 2")
    parsed = parse_action(r)
    assert parsed.valid and parsed.action == "take mug 1 from desk 2"


def test_alfworld_demos_replay_walkthroughs_with_training_prompts(games):
    root, ids = games
    steps, stats = alfworld_demos(root, ids)
    assert stats["games"] == 2 and stats["won"] == 2 and stats["steps"] == len(steps) > 0
    by_task = {}
    for s in steps:
        by_task.setdefault(s.task, []).append(s)
    for task, episode in by_task.items():
        walk = json.load(open(f"{root}/{task}/game.tw-pddl"))["walkthrough"]
        actions = [parse_action(s.response).action for s in episode]
        assert actions == [a for a in walk if a != "look"][: len(actions)] or actions == walk
        assert [s.step for s in episode] == list(range(len(episode)))
        # step 0: the no-history template with the game's intro; later steps: history of the previous actions
        assert "Welcome to TextWorld" in episode[0].prompt and "Prior to this step" not in episode[0].prompt
        if len(episode) > 2:
            p = episode[2].prompt
            assert "already taken 2 step(s)" in p
            assert f"Action 1: '{actions[0]}'" in p and f"Action 2: '{actions[1]}'" in p
            assert "You are now at step 3" in p


def test_render_episode_keeps_only_k_pairs_and_checks_lengths():
    obs = [f"obs {i}" for i in range(5)]
    adm = [["look", f"go to desk {i}"] for i in range(5)]
    acts = [f"go to desk {i}" for i in range(5)]
    steps = render_episode("alfworld", "put a mug in desk.", obs, adm, acts, history_k=2)
    last = steps[-1].prompt
    assert "Action 4: 'go to desk 3'" in last and "Action 3: 'go to desk 2'" in last
    assert "Action 2:" not in last and "obs 4" in last and "go to desk 4" in last
    with pytest.raises(ValueError):
        render_episode("alfworld", "t", obs, adm[:2], acts)


def test_save_and_load_round_trip_and_hash_changes_with_content(tmp_path):
    a = [DemoStep("g", 0, "p", "r"), DemoStep("g", 1, "p2", "r2")]
    h1 = save_demos(a, str(tmp_path / "a.jsonl"))
    assert load_demos(str(tmp_path / "a.jsonl")) == a
    h2 = save_demos(a[:1], str(tmp_path / "b.jsonl"))
    assert h1 != h2
