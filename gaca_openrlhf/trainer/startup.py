"""Bounded waits for a run's start-up: the trainer, model actors and vLLM engines coming up.

``train`` (:mod:`.launch`) used to wait for them one after the other with plain ``ray.get``: the models' loads
first, the engines' readiness after. An engine that died in its creation task (vLLM refusing to start with too
little free memory) was only looked at once every model had loaded, and a model actor that never came up (its
worker killed by Ray's OOM killer before it ran) kept the driver waiting forever, idle, the engine's error unread.

:func:`wait_for_startup` waits for all of a phase's calls *together* (``ray.wait``) and stops at the first one that
fails, with a :class:`StartupError` naming the actor ("vLLM engine 1/2", "policy rank 0") and its own error (the
last lines of the exception its creation task raised, or Ray's death cause). While it waits it also asks Ray's
control store for the state of the actors still pending (an actor already ``DEAD`` is reported even when no reply
came), and it gives up after ``timeout_s`` naming what is still pending: :func:`startup_timeout_s` (the backend's
default, ``GACA_STARTUP_TIMEOUT_S`` to override).
"""
from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence

import ray

#: seconds the whole start-up (trainer, models, engines) may take unless the backend says otherwise
DEFAULT_TIMEOUT_S = 1800.0
#: environment variable overriding the start-up bound (seconds)
TIMEOUT_ENV = "GACA_STARTUP_TIMEOUT_S"
#: seconds between two looks at the pending actors' states
POLL_S = 5.0
#: lines of an actor's own error kept in a StartupError
MAX_CAUSE_LINES = 6

_EXC_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)\b.*?:")


class StartupError(RuntimeError):
    """A trainer, model actor or vLLM engine failed (or did not come up in time) while the run was starting."""


@dataclass
class Wait:
    """One start-up call to wait for: ``ref`` (its object ref), ``what`` (the actor, for the error message),
    ``actor`` (its handle, whose state is looked up while waiting; None: not looked up), ``hint`` (what to do when
    it fails, appended to the error)."""

    ref: Any
    what: str
    actor: Any = None
    hint: str = ""


def startup_timeout_s(default: float = DEFAULT_TIMEOUT_S) -> float:
    """The start-up bound in seconds: ``GACA_STARTUP_TIMEOUT_S`` when set (a positive number), else ``default``."""
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return float(default)
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{TIMEOUT_ENV} must be a number of seconds, got {raw!r}") from None
    if not value > 0:
        raise ValueError(f"{TIMEOUT_ENV} must be > 0 seconds, got {raw!r}")
    return value


def error_cause(err: BaseException) -> str:
    """The actor's own error in a Ray exception: from the last line that starts an exception (``ValueError: ...``)
    to the end (at most :data:`MAX_CAUSE_LINES` lines), else its first non-empty lines. For a creation task that
    raised, that is the exception ``__init__`` raised; for a worker that died, Ray's death cause."""
    text = str(err).strip() or type(err).__name__
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    starts = [i for i, line in enumerate(lines) if _EXC_LINE.match(line)]
    if starts:
        lines = lines[starts[-1]:]
    short = "\n".join(lines[:MAX_CAUSE_LINES])
    if len(lines) > MAX_CAUSE_LINES:
        short += "\n..."
    return short


def describe_failure(what: str, err: BaseException, hint: str = "") -> str:
    """``what`` failed to start: its own error (:func:`error_cause`), then ``hint`` unless the error already
    says it (the CPU engine's own error names --vllm.gpu_memory_utilization already)."""
    cause = error_cause(err)
    msg = f"{what} failed to start: {cause}"
    if hint and hint not in cause and not _hint_already_given(hint, cause):
        msg += f"\n{hint}"
    return msg


def _hint_already_given(hint: str, cause: str) -> bool:
    # the hint's first option ("--vllm.gpu_memory_utilization") already named in the actor's own error
    options = re.findall(r"--[\w.]+", hint)
    return bool(options) and all(opt in cause for opt in options)


def actor_state(handle) -> Optional[tuple]:
    """``(state, death cause text)`` of an actor from Ray's control store (``"ALIVE"``, ``"PENDING_CREATION"``,
    ``"DEAD"`` ...), or None when it cannot be looked up (not an actor handle, Ray down, an API change)."""
    try:
        actor_id = handle._actor_id.hex()
        from ray._private import state as ray_state

        info = ray_state.actors(actor_id)
    except Exception:  # noqa: BLE001 - a look-up that fails only skips this check
        return None
    if not info:
        return None
    return info.get("State"), _death_cause_text(info.get("DeathCause"))


def _death_cause_text(cause) -> str:
    if cause is None:
        return ""
    try:
        if cause.HasField("creation_task_failure_context"):
            return cause.creation_task_failure_context.formatted_exception_string
        if cause.HasField("actor_died_error_context"):
            return cause.actor_died_error_context.error_message
    except Exception:  # noqa: BLE001 - not the protobuf we know: its text
        pass
    return str(cause)


def wait_for_startup(waits: Sequence[Wait], timeout_s: float, *, poll_s: float = POLL_S, ray_api=ray,
                     state_of: Callable[[Any], Optional[tuple]] = actor_state,
                     clock: Callable[[], float] = time.monotonic, total_s: Optional[float] = None) -> List[Any]:
    """The values of ``waits``' refs, in their order, once all are ready; a :class:`StartupError` as soon as one of
    them fails (or its actor is found ``DEAD``), or when ``timeout_s`` passes with some still pending.

    ``total_s``: the whole start-up's bound named in the timeout error, when ``timeout_s`` is what is left of it
    (:class:`Deadline`). ``ray_api`` (``ray.wait``/``ray.get``), ``state_of`` (:func:`actor_state`) and ``clock``
    are parameters for the tests."""
    values: dict = {}
    pending = {i: w for i, w in enumerate(waits)}
    deadline = clock() + max(float(timeout_s), 0.0)
    while pending:
        left = deadline - clock()
        ready, _ = ray_api.wait([w.ref for w in pending.values()], num_returns=1,
                                timeout=max(min(poll_s, left), 0.0))
        ready = list(dict.fromkeys(i for i in (_index_of(pending, ref) for ref in ready) if i is not None))
        for i in ready:
            w = pending.pop(i)
            try:
                values[i] = ray_api.get(w.ref)
            except Exception as e:  # noqa: BLE001 - RayActorError, RayTaskError, OOM ...: all reported the same way
                raise StartupError(describe_failure(w.what, e, w.hint)) from e
        if ready or not pending:
            continue
        for w in pending.values():
            found = state_of(w.actor) if w.actor is not None else None
            if found and found[0] == "DEAD":
                cause = found[1] or "no cause recorded"
                raise StartupError(describe_failure(w.what, RuntimeError(f"the actor is dead: {cause}"), w.hint))
        if clock() >= deadline:
            raise StartupError(timeout_message(list(pending.values()), total_s or timeout_s, state_of))
    return [values[i] for i in range(len(waits))]


def _index_of(pending: dict, ref) -> Optional[int]:
    """The pending wait whose ref ``ref`` is (the object ``ray.wait`` handed back, else an equal ref)."""
    for i, w in pending.items():
        if w.ref is ref:
            return i
    for i, w in pending.items():
        if w.ref == ref:
            return i
    return None


def timeout_message(pending: Sequence[Wait], timeout_s: float,
                    state_of: Callable[[Any], Optional[tuple]] = actor_state) -> str:
    """What is still pending after ``timeout_s``: each actor with its state when known, and how to wait longer."""
    parts = []
    for w in pending:
        found = state_of(w.actor) if w.actor is not None else None
        parts.append(f"{w.what} (actor state {found[0]})" if found and found[0] else w.what)
    hints = list(dict.fromkeys(w.hint for w in pending if w.hint))
    msg = (f"start-up did not finish within {timeout_s:.0f} s; still waiting for: {', '.join(parts)}. "
           "An actor stuck in PENDING_CREATION usually lacks resources (GPUs/CPUs/memory: see Ray's log above, e.g. "
           f"'killed due to memory pressure'); a slow model load may need more time: set {TIMEOUT_ENV} (seconds).")
    if hints:
        msg += "\n" + "\n".join(hints)
    return msg


class Deadline:
    """One bound over several start-up phases: :meth:`left` is the time remaining of ``timeout_s``."""

    def __init__(self, timeout_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.timeout_s, self.clock = float(timeout_s), clock
        self.end = clock() + self.timeout_s

    def left(self) -> float:
        return max(self.end - self.clock(), 0.0)
