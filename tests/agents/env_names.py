"""Where code outside ``agents/`` names an environment: the scanner behind ``test_no_env_names.py``.

A hit is an environment's name (case-insensitive; ``toy`` as a whole word) in code or in a string that is not a
docstring. Comments and docstrings may name environments (examples, history); code and messages may not: an
environment's knowledge lives in its ``agents/<env>/`` folder and reaches the rest through its ``EnvSpec``.
"""
from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ENV_NAMES = ("alfworld", "webshop", "toy")
PATTERN = re.compile(r"alfworld|webshop|\btoy\b", re.IGNORECASE)


def _docstring_lines(tree: ast.AST) -> set[int]:
    """Line numbers of every docstring (module, class, function)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    return lines


def hits(path: Path) -> list[tuple[int, str]]:
    """(line, token text) of each environment name in ``path``'s code and non-docstring strings."""
    src = path.read_text(encoding="utf-8")
    doc = _docstring_lines(ast.parse(src))
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            continue
        if tok.type == tokenize.STRING and tok.start[0] in doc:
            continue
        if PATTERN.search(tok.string):
            out.append((tok.start[0], tok.string if len(tok.string) < 120 else tok.string[:117] + "..."))
    return out


def scan(root: Path) -> dict[str, list[tuple[int, str]]]:
    """relative path -> hits, for every ``.py`` file under ``root`` with at least one."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        h = hits(path)
        if h:
            found[path.relative_to(root.parent).as_posix()] = h
    return found
