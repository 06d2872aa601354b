"""The import graph runs one way (issue 26): ``gaca_openrlhf`` may import ``agents``, never the reverse; an
environment reaches the training system only through its ``EnvSpec``."""
from __future__ import annotations

import ast
from pathlib import Path

AGENTS = Path(__file__).resolve().parents[2] / "agents"


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports (top level or inside functions; relative imports resolve within agents)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
    return out


def test_agents_import_nothing_from_gaca_openrlhf():
    upward = {p.relative_to(AGENTS.parent).as_posix(): sorted(m for m in imported_modules(p)
                                                              if m.split(".")[0] == "gaca_openrlhf")
              for p in sorted(AGENTS.rglob("*.py"))}
    assert not {p: m for p, m in upward.items() if m}, "agents/ is the lower layer: it may not import gaca_openrlhf"
