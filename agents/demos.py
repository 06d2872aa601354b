"""Expert demonstrations as step-level SFT samples, rendered exactly as the training rollout renders its prompts.

Each demonstration step becomes one (prompt text, response text) pair: the prompt is
``agents.prompts.render_step_prompt(agents.registry.prompt_template(env), task, memory, observation, admissible)``
with the same :class:`agents.prompts.StepMemory` (k pairs) the rollout and the evaluation loop use; the response is
``<think>...</think><action>COMMAND</action>``, the format :func:`agents.parsing.parse_action` accepts. An
environment's demonstrator (``EnvSpec.sft_demos``: ``agents/alfworld/demos.py``, ``agents/webshop/expert.py``)
plays episodes and renders them here; :mod:`gaca_openrlhf.sft.demos` saves and loads them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from agents.prompts import StepMemory, render_step_prompt
from agents.registry import prompt_template


@dataclass(frozen=True)
class DemoStep:
    """One SFT sample: the rendered step prompt (user message) and the expert's response."""

    task: str  # task id (ALFWorld game id / WebShop goal id)
    step: int
    prompt: str
    response: str


def expert_response(action: str) -> str:
    """The response the SFT model learns to write: a one-sentence thought and the action, in the parsed format."""
    return f"<think>I should {action}.</think><action>{action}</action>"


def render_episode(env_name: str, task_text: str, observations: Sequence[str], admissibles: Sequence[list[str]],
                   actions: Sequence[str], task_id: str = "", history_k: int = 2) -> list[DemoStep]:
    """Render a played episode (observation/admissible actions *before* each action) as SFT samples."""
    if not (len(observations) == len(admissibles) == len(actions)):
        raise ValueError("observations, admissible action lists and actions must have the same length")
    template = prompt_template(env_name)
    memory = StepMemory(k=history_k)
    out = []
    for t, (obs, adm, act) in enumerate(zip(observations, admissibles, actions)):
        out.append(DemoStep(task_id, t, render_step_prompt(template, task_text, memory, obs, list(adm)),
                            expert_response(act)))
        memory.add(obs, act)
    return out
