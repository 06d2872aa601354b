"""Action projection shared by every environment (docs/design.md §2.3): verl-agent's rules, reproduced exactly.

The model answers ``<think>...</think><action>...</action>``. verl-agent's projection
(``env_package/{alfworld,webshop}/projection.py``) reads a response like this:

1. The whole response is lower-cased first, so the tags are found case-insensitively.
2. With both ``<action>`` and ``</action>`` present, the action is the text between the *first* ``<action>`` and
   the *first* ``</action>``, stripped (inner whitespace kept). It is valid (1) unless the *original* (not
   lower-cased) response lacks ``<think>`` or ``</think>``, or contains a CJK Unified Ideograph (U+4E00-U+9FFF).
   An empty or out-of-order block (``</action>`` before ``<action>``) yields an empty action that keeps validity 1,
   as verl-agent's slicing does.
3. Without both action tags, the action is the last ``tail_chars`` characters of the lower-cased response
   (ALFWorld 30, WebShop 20) and it is invalid (0).

The projected action is *executed* whatever its validity (verl-agent's behaviour; the rollout option
``invalid_action="noop"`` keeps this project's older no-op answer instead); validity only sets the
invalid-action penalty (``is_action_valid``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

#: characters of an untagged response kept as its action (verl-agent: ``actions[i][-30:]`` / ``[-20:]``)
TAIL_CHARS = {"alfworld": 30, "webshop": 20}
DEFAULT_TAIL_CHARS = 30
_START, _END = "<action>", "</action>"
# verl-agent's "contains any Chinese characters" test: the CJK Unified Ideographs block only
_CJK = re.compile(r"[\u4e00-\u9fff]")


@dataclass(frozen=True)
class ParsedAction:
    """action: the projected text sent to the environment; valid: whether the response followed the format."""

    action: str
    valid: bool
    reason: str = ""


def tail_chars_of(env: str) -> int:
    """Characters of an untagged response kept as its action for environment ``env``."""
    return TAIL_CHARS.get(env, DEFAULT_TAIL_CHARS)


def parse_action(response: str, tail_chars: int = DEFAULT_TAIL_CHARS) -> ParsedAction:
    """Project a response to (action, validity) exactly as verl-agent does (rules in the module docstring)."""
    if not isinstance(response, str):
        raise TypeError(f"response must be str, got {type(response).__name__}")
    if tail_chars < 1:
        raise ValueError(f"tail_chars must be >= 1, got {tail_chars}")
    lowered = response.lower()
    start, end = lowered.find(_START), lowered.find(_END)
    if start == -1 or end == -1:
        return ParsedAction(lowered[-tail_chars:], False, "missing <action>...</action>")
    action = lowered[start + len(_START):end].strip()
    if response.find("<think>") == -1 or response.find("</think>") == -1:
        return ParsedAction(action, False, "missing <think>...</think>")
    if _CJK.search(response):
        return ParsedAction(action, False, "cjk characters")
    return ParsedAction(action, True)


def judge_response(text: str, finish_reason: str | None, num_tokens: int,
                   tail_chars: int = DEFAULT_TAIL_CHARS) -> ParsedAction:
    """The validity rule shared by training rollouts and evaluation: verl-agent's projection, plus two cases
    verl-agent cannot meet because it has no stop string.

    A response cut off by the token limit (``finish_reason == "length"``) or with no tokens is an invalid action
    even if its tags happen to parse: the policy did not finish its answer. With ``stop=["</action>"]`` a
    truncated response never holds ``</action>``, so its projection is already invalid and this changes nothing
    in practice; the action is the projected one either way.
    """
    parsed = parse_action(text, tail_chars)
    if num_tokens == 0:
        return ParsedAction(parsed.action, False, "empty response")
    if finish_reason == "length":
        return ParsedAction(parsed.action, False, "truncated at the token limit")
    return parsed
