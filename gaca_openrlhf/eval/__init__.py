"""Evaluation on fixed task panels with fixed seeds: ``python -m gaca_openrlhf.eval`` (:mod:`.cli`).

:func:`run_episodes` is the lock-step loop (generic over a :class:`Generator`), :func:`summarize` the aggregate
numbers, :func:`resolve_panel` the task panels; :class:`.session.EvalSession` starts an evaluation (the eval CLI's,
the benchmark's and the diagnostics' one start-up, owning Ray). Importing this package pulls in no vLLM, Ray or
TextWorld.
"""
from gaca_openrlhf.eval.panels import Panel, PanelError, resolve_panel
from gaca_openrlhf.eval.runner import GenRequest, GenResult, Generator, RunConfig, derive_seed, run_episodes, summarize

__all__ = ["Panel", "PanelError", "resolve_panel", "GenRequest", "GenResult", "Generator", "RunConfig",
           "derive_seed", "run_episodes", "summarize"]
