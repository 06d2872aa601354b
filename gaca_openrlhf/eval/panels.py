"""Fixed evaluation panels: which tasks an evaluation runs, resolved the same way on every machine.

Each environment resolves its own panels (:attr:`agents.base.EnvSpec.resolve_panel`): ALFWorld a panel JSON file or
a standard name built from the data root (:mod:`agents.alfworld.eval_panels`), WebShop a goal split cut to
``--num-tasks`` (:mod:`agents.webshop.spec`), an environment without its own panels ``--num-tasks`` integer tasks
(:func:`agents.base.integer_panel`; the toy corridor).

Every problem (no data root, no such panel, an empty split) raises :class:`PanelError` with a message that says
what to do.
"""
from __future__ import annotations

from dataclasses import dataclass

from agents.base import Panel, PanelError
from agents.registry import spec as env_spec

__all__ = ["EvalProtocol", "PAPER_PROTOCOL", "Panel", "PanelError", "resolve_panel", "tasks_digest"]


@dataclass(frozen=True)
class EvalProtocol:
    """The GACA paper's evaluation protocol (verl-agent's): ALFWorld's in-distribution panel of 128 valid_seen
    games, sampling temperature 0.4, one evaluation per seed over 3 seeds, success reported as the mean and the
    population standard deviation over the seeds; the best checkpoint (highest mean success) is reported next to
    the final one."""

    panel: str = "eval_id"
    num_tasks: int = 128
    temperature: float = 0.4
    seeds: tuple = (0, 1, 2)


PAPER_PROTOCOL = EvalProtocol()


def tasks_digest(tasks: list[str]) -> str:
    """A short digest of a panel's task list: two evaluations with the same digest ran the same tasks in the same
    order (``--resume`` must not reuse results of a panel whose file was regenerated with other games)."""
    import hashlib

    return hashlib.sha1("\n".join(tasks).encode("utf-8")).hexdigest()[:16]


def resolve_panel(env: str, panel: str, *, data_root: str | None = None, panel_dir: str | None = None,
                  num_tasks: int | None = None, panel_seed: int = 0) -> Panel:
    """The panel of ``env`` named ``panel`` (see module doc); ``num_tasks`` keeps the first N tasks."""
    try:
        spec = env_spec(env)
    except KeyError as e:
        raise PanelError(str(e.args[0])) from e
    return spec.panel(panel, data_root=data_root, panel_dir=panel_dir, num_tasks=num_tasks, panel_seed=panel_seed)
