"""agents.base helpers shared by training rollouts and evaluation."""
import pytest

from agents.base import is_listed


@pytest.mark.parametrize("action,listed,expected", [
    ("go to shelf 1", ["go to shelf 1", "look"], True),
    ("go to shelf 2", ["go to shelf 1", "look"], False),
    ("search[red shoes]", ["search[<your query>]", "click[back to search]"], True),  # WebShop's search template
    ("click[red shoes]", ["search[<your query>]", "click[back to search]"], False),
    ("search[red shoes", ["search[<your query>]"], False),
    ("click[buy now]", ["click[<product>]x"], False),
])
def test_is_listed(action, listed, expected):
    assert is_listed(action, listed) is expected
