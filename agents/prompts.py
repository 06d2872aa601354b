"""Step prompts with a short memory of the last k (observation, action) pairs (docs/design.md §2.3).

The rules are verl-agent's (``agent_system/environments/env_manager.py`` + ``agent_system/memory/memory.py``), so
a model trained here sees byte for byte what it would see there:

- The first step of an episode (no step taken yet), and every step when the history length ``k`` is 0, uses the
  template *without* history (``PromptTemplate.first``; ALFWorld's has no task line, WebShop's has one).
- Later steps use ``PromptTemplate.later`` with ``step_count`` = steps taken so far, ``current_step`` =
  ``step_count + 1``, ``history`` = the last ``k`` (observation, action) pairs rendered as
  ``[Observation n: '<obs>', Action n: '<action>']`` joined by newlines (n counts from 1 over the whole
  episode), and ``history_length`` = how many pairs are shown (``min(k, step_count)``).
- The observations in the history are what the prompt showed at that step (ALFWorld: the raw text, WebShop: the
  formatted text); the actions are the *projected* actions (:func:`agents.parsing.parse_action`), valid or not.
- Admissible actions are formatted per environment (``PromptTemplate.format_actions``; ALFWorld drops ``help``
  and joins ``'a'`` items with ``"\\n "``, WebShop writes one ``'a',`` per line).
- WebShop falls back to the template without history when the one with history exceeds 13000 characters
  (``PromptTemplate.max_chars_with_history``).

The command line that renders prompt cases (what the model sees) is :mod:`agents.prompt_cases`.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Sequence


def quote_comma_join(actions: Sequence[str]) -> str:
    """``'a', 'b'``: the toy environment's admissible-action list."""
    return ", ".join(f"'{a}'" for a in actions)


@dataclass(frozen=True)
class PromptTemplate:
    """An environment's step prompt and how its model output is read.

    first: template without history (first step, or history length 0); later: template with history.
    Fields available to both: ``task``, ``observation``, ``admissible_actions``, ``step_count``,
    ``history_length``, ``history``, ``current_step``.
    format_actions: admissible actions (after dropping ``hidden_actions``) -> the text put in the template.
    max_chars_with_history: a ``later`` prompt longer than this is replaced by ``first`` (0: no limit).
    tail_chars: characters of an untagged response kept as its action (:func:`agents.parsing.parse_action`).
    """

    first: str
    later: str
    format_actions: Callable[[Sequence[str]], str] = quote_comma_join
    hidden_actions: tuple[str, ...] = ()
    max_chars_with_history: int = 0
    tail_chars: int = 30


@dataclass
class StepMemory:
    """The last ``k`` (observation, action) pairs of an episode and the number of steps taken."""

    k: int = 2
    _pairs: deque = field(default_factory=deque)
    steps_taken: int = 0

    def add(self, observation: str, action: str) -> None:
        self._pairs.append((observation, action))
        while len(self._pairs) > max(self.k, 0):
            self._pairs.popleft()
        self.steps_taken += 1

    @property
    def pairs(self) -> list[tuple[str, str]]:
        """The shown pairs, oldest first."""
        return list(self._pairs)

    def render(self) -> str:
        return render_history(self.pairs, self.steps_taken)


def render_history(pairs: Sequence[tuple[str, str]], step_count: int) -> str:
    """``[Observation n: '<obs>', Action n: '<act>']`` lines for the trailing ``pairs`` of ``step_count`` steps."""
    first = step_count - len(pairs) + 1
    return "\n".join(f"[Observation {first + i}: '{obs}', Action {first + i}: '{act}']"
                     for i, (obs, act) in enumerate(pairs))


def render_prompt(template: PromptTemplate, task: str, observation: str, admissible_actions: Sequence[str],
                  history: Sequence[tuple[str, str]], step_count: int, history_k: int) -> str:
    """Render one step prompt from explicit inputs (rules in the module docstring).

    ``history`` holds the episode's (observation, action) pairs, oldest first; only the last ``history_k`` are
    shown (``history_k <= 0``: none, verl-agent's ``history_length <= 0``). ``step_count`` is the number of steps
    taken before this one (it numbers the shown pairs).
    """
    if step_count < 0:
        raise ValueError(f"step_count must be >= 0, got {step_count}")
    if len(history) > step_count:
        raise ValueError(f"history has {len(history)} pairs but only {step_count} steps were taken")
    actions = template.format_actions([a for a in admissible_actions if a not in template.hidden_actions])
    first = template.first.format(task=task, observation=observation, admissible_actions=actions,
                                  step_count=step_count, history_length=0, history="", current_step=step_count + 1)
    if step_count == 0 or history_k <= 0:
        return first
    shown = list(history)[-history_k:]
    later = template.later.format(task=task, observation=observation, admissible_actions=actions,
                                  step_count=step_count, history_length=len(shown),
                                  history=render_history(shown, step_count), current_step=step_count + 1)
    if template.max_chars_with_history and len(later) > template.max_chars_with_history:
        return first  # verl-agent's WebShop: an over-long prompt drops its history
    return later


def render_step_prompt(
    template: PromptTemplate, task: str, memory: StepMemory, observation: str, admissible_actions: Sequence[str]
) -> str:
    """Fill the environment's template for the current step of an episode whose past is in ``memory``."""
    return render_prompt(template, task, observation, admissible_actions, memory.pairs, memory.steps_taken,
                         memory.k)


def fit_prompt(ids: list[int], limit: int, log=None) -> list[int]:
    """Left-truncate prompt token ids to ``limit``: the current observation and admissible actions sit at the end."""
    if len(ids) <= limit:
        return ids
    if log is not None:
        log(f"step prompt of {len(ids)} tokens left-truncated to {limit}")
    return ids[-limit:]


def encode_step_prompt(tokenizer, text: str) -> list[int]:
    """Token ids of a step prompt as the policy sees it: one user turn through the tokenizer's chat template with
    the generation prompt appended, tokenized without extra special tokens (the template already has them).

    The one encoding used by both the training rollout (``AgentExecutor``) and evaluation (``eval.cli``).
    """
    chat = tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                         add_generation_prompt=True)
    return list(tokenizer(chat, add_special_tokens=False)["input_ids"])
