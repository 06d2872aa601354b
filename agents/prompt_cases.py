"""Render prompt cases with the environments' step-prompt rules: shows exactly what the model sees.

The rules are :mod:`agents.prompts`; this command line only reads cases, renders them through the registered
templates (:mod:`agents.registry`) and writes the answers.

Usage::

    python -m agents.prompt_cases --cases IN.json --out OUT.json

``IN.json`` is a list of cases or ``{"cases": [...]}`` (the format of
``tests/data/reference/verl_agent_prompt_vectors.json``). A *prompt case* has ``env``, ``task``, ``observation``,
``admissible_actions``, ``history`` (a list of ``{"observation", "action"}``, oldest first), ``history_length`` (k)
and optionally ``step_count`` (default: ``len(history)``); WebShop observations are the raw ``[SEP]`` text the
server returns and its admissible actions may be the server's ``{"has_search_bar", "clickables"}`` dict. It gets
``prompt``. A *projection case* has ``env`` and ``response`` and gets ``action`` and ``valid`` (1/0). Everything
else in a case is copied through.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from agents.parsing import parse_action
from agents.prompts import render_prompt
from agents.registry import spec


def _case_inputs(env: str, case: dict) -> tuple[str, str, list[str], list[tuple[str, str]]]:
    """(task, shown observation, admissible actions, history pairs) of a prompt case, from raw env outputs."""
    task, obs, actions = case["task"], case["observation"], case["admissible_actions"]
    history = [(h["observation"], h["action"]) if isinstance(h, dict) else tuple(h)
               for h in case.get("history") or []]
    if not all(len(h) == 2 and all(isinstance(x, str) for x in h) for h in history):
        raise ValueError("history entries must be {'observation': str, 'action': str}")
    convert = spec(env).prompt_case_inputs  # raw env outputs -> as shown (WebShop: [SEP] text, clickables dict)
    if convert is not None:
        task, obs, actions, history = convert(task, obs, actions, history)
    if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
        raise ValueError(f"admissible_actions must be a list of strings, got {actions!r}")
    return task, obs, actions, history


def render_case(case: dict) -> dict:
    """Answer one case (module docstring): a copy with ``prompt``, or ``action`` and ``valid`` added."""
    if not isinstance(case, dict) or "env" not in case:
        raise ValueError(f"a case is an object with an 'env' field, got {case!r}")
    env = case["env"]
    template = spec(env).prompt
    out = dict(case)
    if "response" in case:
        parsed = parse_action(case["response"], template.tail_chars)
        out.update(action=parsed.action, valid=int(parsed.valid))
        return out
    missing = [k for k in ("task", "observation", "admissible_actions", "history_length") if k not in case]
    if missing:
        raise ValueError(f"prompt case {case.get('name', '?')!r} lacks {missing}")
    task, obs, actions, history = _case_inputs(env, case)
    # verl-agent's step count is the length of the episode's memory; a case may list only the trailing pairs
    step_count = max(int(case.get("step_count") or 0), len(history))
    out["prompt"] = render_prompt(template, task, obs, actions, history, step_count, int(case["history_length"]))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m agents.prompt_cases", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", required=True, help="JSON file: a list of cases or {'cases': [...]}")
    p.add_argument("--out", required=True, help="where to write the answered cases (same shape as --cases)")
    args = p.parse_args(argv)
    with open(args.cases, encoding="utf-8") as f:
        data = json.load(f)
    cases = data.get("cases") if isinstance(data, dict) else data
    if not isinstance(cases, list):
        print(f"error: {args.cases}: expected a list of cases or an object with 'cases'", file=sys.stderr)
        return 2
    answered: list[Any] = []
    for i, case in enumerate(cases):
        try:
            answered.append(render_case(case))
        except (KeyError, ValueError, TypeError) as e:
            print(f"error: case {i} ({case.get('name', '?') if isinstance(case, dict) else '?'}): {e}",
                  file=sys.stderr)
            return 2
    result = {**data, "cases": answered} if isinstance(data, dict) else answered
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False, indent=1)
    print(f"{len(answered)} cases -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
