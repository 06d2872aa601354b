"""Where the trainer's ``fit`` is: the phase it entered last, published for the driver's watch.

A dead actor stops the run (:mod:`.watch`), but an alive and stuck one -- a collective waiting for a rank that hangs
without dying, an engine that never answers -- leaves every actor ``ALIVE`` and the driver waiting forever. The
trainer therefore publishes each phase it enters (``rollout``, ``experience``, ``training``, ``sync``,
``checkpoint``) in Ray's cluster-wide key-value store (the GCS: reachable from every node, no shared disk needed),
and the driver (:func:`.watch.wait_for_fit`) stops the run when the published phase has not changed for
``--run.stall_timeout_s`` seconds of the driver's own clock (so clocks of other nodes never matter).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Callable, Optional

#: the phases the trainer publishes, in the order of one iteration (``start``: fit began; ``resume_sync``: the
#: weights loaded from a checkpoint go to the engines; ``done``: fit ended)
PHASES = ("start", "resume_sync", "rollout", "experience", "training", "sync", "validation", "checkpoint", "done")
KEY_PREFIX = "gaca/progress/"


@dataclass(frozen=True)
class Mark:
    """One published phase: ``seq`` counts marks (a phase entered twice in a row is still progress), ``unix`` is the
    trainer's clock (for the message only)."""

    phase: str
    iteration: int
    seq: int
    unix: float

    def describe(self) -> str:
        if self.phase == "start":
            return "the start of fit"
        return f"the {self.phase.replace('_', ' ')} phase of iteration {self.iteration}"


def progress_key(trainer_actor_id: str) -> str:
    """The store key of one run: its trainer actor's id (unique per run, known to the driver and the trainer)."""
    return KEY_PREFIX + trainer_actor_id


def _ray_kv():
    from ray.experimental import internal_kv

    return internal_kv._internal_kv_put, internal_kv._internal_kv_get


class ProgressReporter:
    """The trainer's side: :meth:`mark` publishes a phase under ``key``. ``put(key: bytes, value: bytes)`` defaults
    to Ray's internal key-value store. A failed publish is ignored: reporting progress must never stop training."""

    def __init__(self, key: str, put: Optional[Callable] = None, clock: Callable[[], float] = time.time) -> None:
        self.key, self.clock, self.seq, self.iteration = key.encode(), clock, 0, 0
        self._put = put

    def mark(self, phase: str, iteration: Optional[int] = None) -> None:
        """Publish ``phase`` of ``iteration`` (None: the iteration of the previous mark)."""
        if phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r}; expected one of {PHASES}")
        self.seq += 1
        self.iteration = self.iteration if iteration is None else int(iteration)
        value = json.dumps({"phase": phase, "iteration": self.iteration, "seq": self.seq, "unix": self.clock()})
        try:
            put = self._put or _ray_kv()[0]
            put(self.key, value.encode(), overwrite=True)
        except Exception:  # noqa: BLE001 -- the watch then sees no progress; training itself goes on
            pass


class NoProgress:
    """A reporter that publishes nothing (a trainer built without Ray, e.g. in unit tests)."""

    def mark(self, phase: str, iteration: Optional[int] = None) -> None:
        pass


def read_progress(key: str, get: Optional[Callable] = None) -> Optional[Mark]:
    """The driver's side: the last :class:`Mark` published under ``key`` (None before the first, or when the store
    cannot be read)."""
    try:
        raw = (get or _ray_kv()[1])(key.encode())
    except Exception:  # noqa: BLE001 -- an unreadable store is no evidence of a stall
        return None
    if not raw:
        return None
    d = json.loads(raw)
    return Mark(d["phase"], d["iteration"], d["seq"], d["unix"])
