"""Phase 1, the data: the environment's own data phase (:attr:`agents.base.QuickstartHooks.data_phase`; ALFWorld's
generated games and panels in :mod:`agents.alfworld.quickstart`, WebShop's local server in
:mod:`agents.webshop.quickstart`), given the quickstart's runner pieces as :data:`TOOLS`."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from gaca_openrlhf.bench.quickstart.config import (RL_POOL_SEED_OFFSET, TEST_SEED_OFFSET, VALIDATION_SEED_OFFSET,
                                                   QuickstartConfig)
from gaca_openrlhf.bench.quickstart.console import Console
from gaca_openrlhf.bench.quickstart.runner import ROOT, PhaseError, child_env, run_logged
from gaca_openrlhf.bench.quickstart.state import State


def _cache_root():
    from gaca_openrlhf.models.tiny import cache_root

    return cache_root()


def _write_tasks(task_ids, out: str) -> int:
    from gaca_openrlhf.rollout.tasks import write_tasks

    return write_tasks(task_ids, out)


#: what an environment's data phase may use of the quickstart (``agents`` imports nothing of ``gaca_openrlhf``):
#: the phase error, the logged subprocess runner and the children's environment, the repository root, the cache
#: root, the task-file writer and the panels' generator seed offsets
TOOLS = SimpleNamespace(PhaseError=PhaseError, run_logged=run_logged, child_env=child_env, ROOT=ROOT,
                        cache_root=_cache_root, write_tasks=_write_tasks, TEST_SEED_OFFSET=TEST_SEED_OFFSET,
                        VALIDATION_SEED_OFFSET=VALIDATION_SEED_OFFSET, RL_POOL_SEED_OFFSET=RL_POOL_SEED_OFFSET)


def hooks(cfg: QuickstartConfig):
    """The quickstart hooks of ``cfg.env`` (:class:`agents.base.QuickstartHooks`)."""
    from agents.registry import spec

    found = spec(cfg.env).quickstart
    if found is None:
        raise PhaseError(f"environment {cfg.env!r} defines no quickstart (EnvSpec.quickstart)")
    return found


def phase_data(cfg: QuickstartConfig, st: State, out: Path, con: Console) -> str:
    """Phase 1 of ``cfg.env``; returns its status-line detail."""
    return hooks(cfg).data_phase(cfg, st, out, con, TOOLS)
