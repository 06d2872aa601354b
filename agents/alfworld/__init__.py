"""ALFWorld for agent RL: offline game generator, env adapter on the real TextWorld engine, Ray env workers,
task panels and the ``python -m agents.alfworld`` commands. See ``agents/alfworld/README.md``.

Importing this package imports nothing heavy; TextWorld/ALFWorld load when an environment is built.
"""
from agents.alfworld.assets import is_generated

__all__ = ["is_generated"]
