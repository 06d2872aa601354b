"""``episodes.jsonl`` beside ``metrics.jsonl``: one JSON line per training episode, every iteration.

The per-iteration means of ``metrics.jsonl`` cannot say which tasks were learned or lost, nor how many groups had
outcome contrast; this log keeps each episode's identity and outcome so such questions are answered from the run's
own files (issue 35). It follows the metrics file's resume rule (:class:`~.metrics.MetricsWriter`): a resumed run
keeps the lines up to its checkpoint, a fresh run never appends to an earlier run's.
"""
from __future__ import annotations

from typing import Iterable, List

from .metrics import MetricsWriter

FILENAME = "episodes.jsonl"
#: the keys of every line, in order
FIELDS = ("iteration", "group", "traj", "task", "task_type", "won", "score", "length", "failed", "filtered",
          "off_list", "reward")


def episode_records(iteration: int, episodes: Iterable[dict]) -> List[dict]:
    """The lines of one iteration's episodes (the agent executor's dicts, with the ``group_id``/``traj_id`` the
    samples generator gives them): ``length`` = steps taken, ``off_list`` = steps whose action was not on the
    admissible list, ``reward`` = the episode's summed environment reward, ``filtered`` = dropped by the dynamic
    filter (no step of it was trained on)."""
    out = []
    for ep in episodes:
        steps = ep.get("steps") or []
        out.append({
            "iteration": int(iteration), "group": int(ep["group_id"]), "traj": int(ep["traj_id"]),
            "task": str(ep["prompt"]), "task_type": str(ep.get("task_type") or ""), "won": bool(ep["won"]),
            "score": float(ep["score"]), "length": len(steps), "failed": bool(ep["failed"]),
            "filtered": bool(ep.get("filtered", False)),
            "off_list": sum(1 for s in steps if s.get("listed") is False),
            "reward": float(sum(s["reward"] for s in steps)),
        })
    return out


class EpisodeLog:
    """Appends each iteration's episode lines to ``<save_path>/episodes.jsonl``."""

    def __init__(self, save_path: str):
        self._writer = MetricsWriter(save_path, FILENAME)
        self.path = self._writer.path

    def start(self, resumed_at: int) -> list[str]:
        """As :meth:`.metrics.MetricsWriter.start`: keep the lines of iterations <= ``resumed_at``, move the rest."""
        return self._writer.start(resumed_at)

    def write(self, iteration: int, episodes: Iterable[dict]) -> None:
        """Append the lines of ``episodes`` (one iteration's) for ``iteration``."""
        for record in episode_records(iteration, episodes):
            self._writer.write(record)
