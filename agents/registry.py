"""Environment registry: name -> the module whose ``SPEC`` (:class:`agents.base.EnvSpec`) says everything the rest
of the system asks of the environment (adapter, prompt, options, panels, demonstrator, quickstart, labels).

One line per environment in :data:`ENVIRONMENTS`. Entries are import strings, imported on first use, so that
importing the registry pulls in no environment (TextWorld, HTTP client); a spec module itself imports only what
describing the environment needs.

An environment outside this repository is registered by one line too, without editing this file:
``GACA_ENVIRONMENTS="name=package.module[,name2=...]"`` in the environment (read on every lookup, so child
processes -- Ray actors, the quickstart's phases -- see it as well), or :func:`register` in-process.

A legacy entry ``(module, factory attribute, template attribute)`` (tests' scripted environments) is a spec with
only an adapter and a prompt.
"""
from __future__ import annotations

import importlib
import os
from typing import Any, Union

from agents.base import AgentEnv, EnvSpec
from agents.prompts import PromptTemplate

#: name -> spec module (defines ``SPEC``), or a legacy (module, factory attribute, template attribute)
ENVIRONMENTS: dict[str, Union[str, tuple[str, str, str]]] = {
    "alfworld": "agents.alfworld.spec",
    "webshop": "agents.webshop.spec",
    "toy": "agents.toy.spec",
}
#: the environment of commands whose ``--env`` has a default (the quickstart, the diagnostics, a results record
#: without one)
DEFAULT_ENV = "alfworld"
#: variable naming extra environments, ``name=module,...`` (module defines ``SPEC``)
EXTRA_ENV_VAR = "GACA_ENVIRONMENTS"


def register(name: str, module: str) -> None:
    """Register environment ``name`` whose spec is ``module.SPEC`` (in this process only; see the module doc)."""
    ENVIRONMENTS[name] = module


def _extra() -> dict[str, str]:
    out = {}
    for item in os.environ.get(EXTRA_ENV_VAR, "").split(","):
        name, sep, module = item.strip().partition("=")
        if sep and name.strip() and module.strip():
            out[name.strip()] = module.strip()
    return out


def _entries() -> dict:
    return {**_extra(), **ENVIRONMENTS}  # the repository's own names cannot be shadowed


def names() -> list[str]:
    """Every registered environment name, the repository's first (in their order), then the extra ones."""
    entries = _entries()
    return list(ENVIRONMENTS) + [n for n in entries if n not in ENVIRONMENTS]


def spec(name: str) -> EnvSpec:
    """The :class:`EnvSpec` of a registered environment (imports its spec module)."""
    entries = _entries()
    if name not in entries:
        raise KeyError(f"unknown environment {name!r}; known: {sorted(entries)}")
    entry = entries[name]
    if isinstance(entry, tuple):
        module, factory, template = entry
        mod = importlib.import_module(module)
        return EnvSpec(name=name, make_env=getattr(mod, factory), prompt=getattr(mod, template))
    found = importlib.import_module(entry).SPEC
    if not isinstance(found, EnvSpec) or found.name != name:
        raise TypeError(f"{entry}.SPEC must be an agents.base.EnvSpec named {name!r}")
    return found


def specs(with_quickstart: bool = False, with_gpu_recipe: bool = False) -> list[EnvSpec]:
    """The specs of every registered environment, in registry order (``with_quickstart``: only those the quickstart
    offers; ``with_gpu_recipe``: only those with a GPU recipe, :attr:`EnvSpec.gpu_recipe`)."""
    out = [spec(n) for n in names()]
    if with_quickstart:
        out = [s for s in out if s.quickstart is not None]
    if with_gpu_recipe:
        out = [s for s in out if s.gpu_recipe is not None]
    return out


def make_env(name: str, **config: Any) -> AgentEnv:
    """Build an environment instance by registry name with keyword config."""
    return spec(name).make_env(**config)


def prompt_template(name: str) -> PromptTemplate:
    """The step-prompt template of a registered environment."""
    return spec(name).prompt
