"""Watching a run's actors while the trainer's ``fit`` runs: a death stops the run at once, naming the actor.

``train`` (:mod:`.launch`) used to wait for ``fit`` with a plain ``ray.get``. A vLLM engine or a policy rank killed
mid-run (Ray's OOM killer, a segfault, a lost node) was noticed only when the trainer next called that actor, and
not at all when the call that would notice it waited first on another rank: the surviving ranks of a collective
(NCCL all-gather / all-reduce, gloo on CPU) wait for the dead one forever, and so does the driver.

:func:`wait_for_fit` waits for ``fit`` in slices of ``poll_s`` seconds and, between them, asks Ray's control store
for the state of every actor of the run (trainer, each policy / reference / critic / reward rank, each engine);
the first one found ``DEAD`` ends the wait with a :class:`RunFailure` naming it and Ray's death cause. A ``fit`` that
raises raises here unchanged (its traceback is the best account of a trainer error). Alive but stuck actors are not detected here (no heartbeat); ``fit`` has no overall bound because a run's length is its own.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import ray

from .startup import POLL_S, Wait, actor_state


class RunFailure(RuntimeError):
    """An actor of the run died while the run was training."""


def wait_for_fit(fit: Wait, watched: Sequence[Wait], *, poll_s: float = POLL_S, ray_api=ray,
                 state_of: Callable[[Any], Optional[tuple]] = actor_state) -> Any:
    """The value of ``fit.ref`` (the trainer's ``fit``; its error when it raises); a :class:`RunFailure` as soon
    as its actor or one of ``watched`` (``Wait`` entries whose ``ref`` is unused: the other actors) is found ``DEAD``.

    ``ray_api`` (``ray.wait``/``ray.get``) and ``state_of`` (:func:`~.startup.actor_state`) are parameters for the
    tests."""
    actors = [w for w in (fit, *watched) if w.actor is not None]
    while True:
        ready, _ = ray_api.wait([fit.ref], num_returns=1, timeout=poll_s)
        if ready:
            return ray_api.get(fit.ref)  # fit's own error is raised as it is, with its traceback
        dead = _first_dead(actors, state_of)
        if dead is not None:
            # the trainer may be about to report the same death with more context: give its fit one more look
            ready, _ = ray_api.wait([fit.ref], num_returns=1, timeout=min(poll_s, 1.0))
            if ready:
                return ray_api.get(fit.ref)
            w, cause = dead
            raise RunFailure(_message(w, cause or "no cause recorded", "died during training"))


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
