"""No module outside ``agents/`` names an environment (issue 26): an environment is its ``agents/<env>/`` folder
and one line in ``agents.registry``; the rest of the system asks its ``EnvSpec``. The scanner (``env_names.py``)
reads code and non-docstring strings; comments and docstrings may name environments (examples, history).

``REMAINING`` lists the modules that still name one, each with the reason; the list may only shrink: a module not
on it that names an environment fails, and so does a listed module that no longer does (take it off the list).
"""
from __future__ import annotations

from pathlib import Path

from env_names import hits, scan  # same folder (rootdir import mode)

ROOT = Path(__file__).resolve().parents[2]

#: module -> why it still names an environment
REMAINING: dict = {}


def test_the_scanner_skips_comments_and_docstrings_but_not_strings(tmp_path):
    f = tmp_path / "m.py"
    f.write_text('"""About ALFWorld."""\n# webshop here\ndef g():\n    """toy."""\n    return "destroy"  # toy\n'
                 'X = "webshop"\nalfworld_thing = 1\n')
    assert [line for line, _ in hits(f)] == [6, 7]


def test_no_environment_name_outside_agents():
    found = scan(ROOT / "gaca_openrlhf")
    new = {p: h[:3] for p, h in found.items() if p not in REMAINING}
    assert not new, f"modules outside agents/ name an environment (ask its EnvSpec instead): {new}"
    cleaned = sorted(p for p in REMAINING if p not in found)
    assert not cleaned, f"no longer name an environment, take them off REMAINING: {cleaned}"
