"""Environment registry: name -> factory ``(config: dict) -> AgentEnv`` and the env's prompt template.

Entries are import strings so that importing the registry pulls in no environment (TextWorld, HTTP client).
"""
from __future__ import annotations

import importlib
from typing import Any, Callable

from agents.base import AgentEnv
from agents.prompts import PromptTemplate

#: name -> (module, factory attribute, template attribute)
ENVIRONMENTS: dict[str, tuple[str, str, str]] = {
    "alfworld": ("agents.alfworld.backends", "make_env", "PROMPT"),
    "webshop": ("agents.webshop.env", "make_env", "PROMPT"),
    "toy": ("agents.toy.env", "make_env", "PROMPT"),
}


def _load(name: str) -> tuple[Callable[..., AgentEnv], PromptTemplate]:
    if name not in ENVIRONMENTS:
        raise KeyError(f"unknown environment {name!r}; known: {sorted(ENVIRONMENTS)}")
    module, factory, template = ENVIRONMENTS[name]
    mod = importlib.import_module(module)
    return getattr(mod, factory), getattr(mod, template)


def make_env(name: str, **config: Any) -> AgentEnv:
    """Build an environment instance by registry name with keyword config."""
    factory, _ = _load(name)
    return factory(**config)


def prompt_template(name: str) -> PromptTemplate:
    """The step-prompt template of a registered environment."""
    return _load(name)[1]
