"""OpenRLHF's own PPO parser and validation, reused without copying them.

OpenRLHF 0.11.2 builds its parser and validates the parsed args inside ``if __name__ == "__main__":`` of
``openrlhf/cli/train_ppo_ray.py``, so they cannot be imported. This module reads that block from the installed
source and splits it at ``args = parser.parse_args()``: the statements before build the parser
(:func:`build_parser`), the statements after (minus the final ``train(args)``) validate and hierarchize the args
(:func:`validate`). An OpenRLHF upgrade is picked up as is; a changed layout fails loudly here.
"""
from __future__ import annotations

import argparse
import ast
import importlib.util
from functools import lru_cache


def _is_main_guard(node: ast.stmt) -> bool:
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__")


def _is_parse_args(node: ast.stmt) -> bool:
    return (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "parse_args")


def _is_train_call(node: ast.stmt) -> bool:
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name) and node.value.func.id == "train")


@lru_cache(maxsize=1)
def _blocks():
    spec = importlib.util.find_spec("openrlhf.cli.train_ppo_ray")
    path = spec.origin
    tree = ast.parse(open(path).read(), filename=path)
    mains = [n for n in tree.body if _is_main_guard(n)]
    if len(mains) != 1:
        raise RuntimeError(f"{path}: expected one `if __name__ == '__main__':` block, found {len(mains)}")
    body = mains[0].body
    split = [i for i, n in enumerate(body) if _is_parse_args(n)]
    if len(split) != 1:
        raise RuntimeError(f"{path}: expected one `args = parser.parse_args()` in the main block")
    build = ast.Module(body=body[: split[0]], type_ignores=[])
    check = ast.Module(body=[n for n in body[split[0] + 1 :] if not _is_train_call(n)], type_ignores=[])
    header = ast.Module(body=[n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))], type_ignores=[])
    return (compile(header, path, "exec"), compile(build, path, "exec"), compile(check, path, "exec"))


def _namespace() -> dict:
    header, _, _ = _blocks()
    ns = {"__name__": "openrlhf_train_ppo_ray_main"}
    exec(header, ns)  # the module's imports (argparse, datetime, ...)
    return ns


def build_parser() -> argparse.ArgumentParser:
    """OpenRLHF's PPO argument parser, freshly built."""
    _, build, _ = _blocks()
    ns = _namespace()
    exec(build, ns)
    return ns["parser"]


def validate(flat_args: argparse.Namespace):
    """OpenRLHF's post-parse validation; returns the hierarchized (nested) args."""
    _, _, check = _blocks()
    ns = _namespace()
    ns["args"] = flat_args
    exec(check, ns)
    return ns["args"]


def extend_choices(parser: argparse.ArgumentParser, dest: str, extra, default=None, help=None) -> None:
    """Add choices to an existing option (e.g. the project's estimator names); optionally a new default and help."""
    for action in parser._actions:
        if action.dest == dest:
            action.choices = list(action.choices or []) + [c for c in extra if c not in (action.choices or [])]
            if default is not None:
                action.default = default
            if help is not None:
                action.help = help
            return
    raise KeyError(f"OpenRLHF parser has no option with dest {dest!r}")


def redefault(parser: argparse.ArgumentParser, dest: str, default, help=None) -> None:
    """Give an existing option a new default (and help), keeping its type and choices."""
    for action in parser._actions:
        if action.dest == dest:
            action.default = default
            if help is not None:
                action.help = help
            return
    raise KeyError(f"OpenRLHF parser has no option with dest {dest!r}")
