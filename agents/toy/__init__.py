"""The toy corridor: a tiny deterministic text environment for development and fast tests (see :mod:`.env`).

Not a stand-in for ALFWorld or WebShop; it makes the rollout, the evaluation loop and the diagnostics testable in
seconds. Registered as ``toy`` in :data:`agents.registry.ENVIRONMENTS`.
"""
from agents.toy.env import PROMPT, ToyCorridorEnv, make_env

__all__ = ["PROMPT", "ToyCorridorEnv", "make_env"]
