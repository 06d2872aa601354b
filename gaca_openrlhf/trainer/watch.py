"""Watching a run's actors while the trainer's ``fit`` runs: a death stops the run at once, naming the actor.

``train`` (:mod:`.launch`) used to wait for ``fit`` with a plain ``ray.get``. A vLLM engine or a policy rank killed
mid-run (Ray's OOM killer, a segfault, a lost node) was noticed only when the trainer next called that actor, and
not at all when the call that would notice it waited first on another rank: the surviving ranks of a collective
(NCCL all-gather / all-reduce, gloo on CPU) wait for the dead one forever, and so does the driver.

:func:`wait_for_fit` waits for ``fit`` in slices of ``poll_s`` seconds and, between them, asks Ray's control store
for the state of every actor of the run (trainer, each policy / reference / critic / reward rank, each engine);
the first one found ``DEAD`` ends the wait with a :class:`RunFailure` naming it and Ray's death cause. A ``fit`` that
raises raises here unchanged (its traceback is the best account of a trainer error).

Alive but stuck actors (a collective waiting for a rank that hangs without dying, an engine that never answers) are
found by their effect: the phase the trainer publishes (:mod:`.progress`) stops changing. When it has not changed for
``stall_s`` seconds of the driver's clock, the run stops with a :class:`RunFailure` naming the phase and iteration it
is stuck in. ``fit`` itself has no overall bound: a run's length is its own, only a phase that never ends is a fault.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Optional, Sequence

import ray

from .progress import Mark
from .startup import POLL_S, Wait, actor_state


class RunFailure(RuntimeError):
    """An actor of the run died, or the run stopped making progress, while it was training."""


def wait_for_fit(fit: Wait, watched: Sequence[Wait], *, poll_s: float = POLL_S, ray_api=ray,
                 state_of: Callable[[Any], Optional[tuple]] = actor_state,
                 progress: Optional[Callable[[], Optional[Mark]]] = None, stall_s: float = 0.0,
                 clock: Callable[[], float] = time.monotonic,
                 on_mark: Optional[Callable[[Mark], None]] = None) -> Any:
    """The value of ``fit.ref`` (the trainer's ``fit``; its error when it raises); a :class:`RunFailure` as soon
    as its actor or one of ``watched`` (``Wait`` entries whose ``ref`` is unused: the other actors) is found
    ``DEAD``, or when ``progress()`` (the trainer's last published :class:`~.progress.Mark`) has not changed for
    ``stall_s`` seconds of ``clock`` (0: no stall check; counted from the first mark seen, so a store that cannot be
    read never stops a run).

    ``on_mark(mark)`` is called with each new mark (a progress display: :func:`iteration_progress`).
    ``ray_api`` (``ray.wait``/``ray.get``), ``state_of`` (:func:`~.startup.actor_state`) and ``clock`` are
    parameters for the tests."""
    actors = [w for w in (fit, *watched) if w.actor is not None]
    last, since = None, clock()
    while True:
        ready, _ = ray_api.wait([fit.ref], num_returns=1, timeout=poll_s)
        if ready:
            if on_mark is not None and progress is not None:  # the last marks ("done") may fall between polls
                mark = progress()
                if mark is not None and mark != last:
                    on_mark(mark)
            return ray_api.get(fit.ref)  # fit's own error is raised as it is, with its traceback
        dead = _first_dead(actors, state_of)
        if dead is not None:
            # the trainer may be about to report the same death with more context: give its fit one more look
            ready, _ = ray_api.wait([fit.ref], num_returns=1, timeout=min(poll_s, 1.0))
            if ready:
                return ray_api.get(fit.ref)
            w, cause = dead
            raise RunFailure(_message(w, cause or "no cause recorded", "died during training"))
        if progress is not None and (stall_s > 0 or on_mark is not None):  # all alive: is the trainer moving?
            mark = progress()
            if mark is not None and mark != last:
                last, since = mark, clock()
                if on_mark is not None:
                    on_mark(mark)
            elif stall_s > 0 and last is not None and clock() - since > stall_s:
                raise RunFailure(_stall_message(last, clock() - since, stall_s))


def iteration_progress(total: int, report: Callable[[int, int], None]) -> Callable[[Mark], None]:
    """An ``on_mark`` for :func:`wait_for_fit`: ``report(iterations done, total)`` each time the count of finished
    iterations changes (an iteration is finished once its checkpoint phase is entered, or when fit is done)."""
    shown = [None]

    def on_mark(mark: Mark) -> None:
        done = mark.iteration if mark.phase in ("checkpoint", "done") else max(0, mark.iteration - 1)
        done = min(done, total)
        if done != shown[0]:
            shown[0] = done
            report(done, total)

    return on_mark


def _first_dead(actors: Sequence[Wait], state_of) -> Optional[tuple]:
    """(wait, Ray's death cause) of the first actor in ``actors`` whose state is ``DEAD``, else None."""
    for w in actors:
        found = state_of(w.actor)
        if found and found[0] == "DEAD":
            return w, found[1]
    return None


def _message(w: Wait, cause: str, verb: str) -> str:
    msg = f"{w.what} {verb}: {cause}"
    if w.hint and w.hint not in cause:
        msg += f"\n{w.hint}"
    return msg


def _stall_message(mark: Mark, waited_s: float, stall_s: float) -> str:
    started = time.strftime("%H:%M:%S UTC", time.gmtime(mark.unix))
    return (f"no progress for {waited_s / 60:.0f} min: {mark.describe()} began at {started} (the trainer's clock) "
            f"and has not ended, while every actor of the run is alive (--run.stall_timeout_s {stall_s:g}). Something waits that will not answer: a collective (NCCL/gloo) with a hung rank, or a "
            "vLLM engine. `ray stack` (or `py-spy dump --pid PID`) on each node shows where; if a phase of this "
            "recipe really takes longer, raise --run.stall_timeout_s (0: no limit).")
