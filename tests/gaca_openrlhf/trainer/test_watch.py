"""``trainer/watch.py``: the wait for the trainer's ``fit`` that stops when an actor of the run dies.

Ray is replaced by a stand-in whose ``fit`` ref becomes ready after some polls (or never), and Ray's actor table by
a dict of states, so a death is found in no real time. What a real death looks like to Ray's control store
(``actor_state``) is covered by the slow start-up test (test_startup_failure.py)."""
from __future__ import annotations

import pytest

from gaca_openrlhf.trainer.startup import Wait
from gaca_openrlhf.trainer.watch import RunFailure, wait_for_fit


class FakeRay:
    """``fit`` is ready after ``polls`` waits (None: never); ``get`` returns ``value`` or raises ``error``.
    ``on_wait`` runs before each wait (to kill an actor part-way)."""

    def __init__(self, polls=None, value="done", error=None, on_wait=None):
        self.polls, self.value, self.error, self.on_wait = polls, value, error, on_wait
        self.waits = []

    def wait(self, refs, num_returns=1, timeout=None):
        self.waits.append(timeout)
        if self.on_wait:
            self.on_wait(len(self.waits))
        if self.polls is not None and len(self.waits) > self.polls:
            return list(refs), []
        return [], list(refs)

    def get(self, ref):
        if self.error is not None:
            raise self.error
        return self.value


def run(fake, states, watched_names=("policy rank 0", "policy rank 1", "vLLM engine 1/2")):
    watched = [Wait(None, name, name) for name in watched_names]
    return wait_for_fit(Wait("fit-ref", "the trainer's fit", "trainer"), watched, poll_s=0.01, ray_api=fake,
                        state_of=lambda handle: states.get(handle))


def test_fit_value_is_returned_after_some_polls_while_all_alive():
    """Bug caught: giving up while every actor is alive (a timeout on fit), or returning before fit finished."""
    fake = FakeRay(polls=5, value="fit-result")
    states = {"policy rank 0": ("ALIVE", ""), "trainer": ("ALIVE", "")}
    assert run(fake, states) == "fit-result"
    assert len(fake.waits) == 6 and all(t == 0.01 for t in fake.waits)


def test_a_dead_rank_stops_the_wait_naming_it_and_its_cause():
    """Bug caught: a dead policy rank ignored (the driver waits for fit forever while the other ranks wait in a
    collective for the dead one), or the wrong actor / no cause named."""
    states = {"policy rank 0": ("ALIVE", ""), "policy rank 1": ("ALIVE", "")}

    def kill(n):
        if n == 3:
            states["policy rank 1"] = ("DEAD", "The actor died because its worker was killed (OOM).")

    with pytest.raises(RunFailure, match=r"^policy rank 1 died during training: The actor died because its worker "
                                         r"was killed \(OOM\)\.$"):
        run(FakeRay(polls=None, on_wait=kill), states)


def test_the_trainer_itself_and_engines_are_watched():
    """Bug caught: only the watched list looked at (a dead trainer actor never noticed), or engines left out."""
    with pytest.raises(RunFailure, match="the trainer's fit died during training: no cause recorded"):
        run(FakeRay(polls=None), {"trainer": ("DEAD", "")})
    with pytest.raises(RunFailure, match="vLLM engine 1/2 died during training: killed"):
        run(FakeRay(polls=None), {"vLLM engine 1/2": ("DEAD", "killed")})


def test_fit_error_is_raised_unchanged():
    """Bug caught: the trainer's own error (a NaN stop, a weight-sync gap) swallowed or rewrapped without its
    traceback."""
    err = ValueError("sync/logprob_gap 3.2 exceeds --run.max_logprob_gap 0.1")
    with pytest.raises(ValueError) as got:
        run(FakeRay(polls=0, error=err), {})
    assert got.value is err


def test_fit_that_reports_the_death_itself_wins():
    """Bug caught: the watchdog's generic message preferred over the trainer's own error about the same death
    (fit finishing in the grace look after a death was seen)."""
    err = RuntimeError("vLLM engine call failed: ActorDiedError")
    fake = FakeRay(polls=1, error=err)  # not ready at the first poll, ready at the grace look
    with pytest.raises(RuntimeError) as got:
        run(fake, {"vLLM engine 1/2": ("DEAD", "killed")})
    assert got.value is err and len(fake.waits) == 2


def test_unknown_states_are_not_deaths():
    """Bug caught: an actor whose state cannot be looked up (None) or is restarting taken for dead."""
    fake = FakeRay(polls=3)
    assert run(fake, {"policy rank 0": None, "policy rank 1": ("RESTARTING", "")}) == "done"
