"""``trainer/watch.py``: the wait for the trainer's ``fit`` that stops when an actor of the run dies.

Ray is replaced by a stand-in whose ``fit`` ref becomes ready after some polls (or never), and Ray's actor table by
a dict of states, so a death is found in no real time. What a real death looks like to Ray's control store
(``actor_state``) is covered by the slow start-up test (test_startup_failure.py)."""
from __future__ import annotations

import pytest

from gaca_openrlhf.trainer.progress import Mark
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


# ---- alive but stuck: the trainer's published phase stops changing ----

class Clock:
    """The driver's clock: each wait advances it by ``step`` seconds (no real time passes)."""

    def __init__(self, step):
        self.t, self.step = 0.0, step

    def __call__(self):
        return self.t


def stall_run(marks, stall_s, step=60.0, polls=None, states=None):
    """wait_for_fit with a clock that advances ``step`` s per poll; ``marks(n)`` is the mark published at poll n."""
    clock = Clock(step)
    polled = []

    def on_wait(n):
        clock.t += clock.step
        polled.append(n)

    fake = FakeRay(polls=polls, on_wait=on_wait)
    return wait_for_fit(Wait("fit-ref", "the trainer's fit", "trainer"), [], poll_s=0.01, ray_api=fake,
                        state_of=lambda h: (states or {}).get(h), progress=lambda: marks(len(polled)),
                        stall_s=stall_s, clock=clock)


def test_a_phase_that_never_ends_stops_the_run_naming_it():
    """Bug caught: a hung collective with every actor alive waits forever (no stall check), the stall counted from
    the wrong moment, or the message not naming the phase and iteration."""
    mark = Mark("training", 3, 7, 0.0)
    with pytest.raises(RunFailure, match=r"^no progress for 61 min: the training phase of iteration 3 began at "
                                         r"00:00:00 UTC \(the trainer's clock\) and has not ended, while every actor "
                                         r"of the run is alive \(--run.stall_timeout_s 3600\)"):
        stall_run(lambda n: mark, stall_s=3600)


def test_changing_phases_never_stop_a_long_run():
    """Bug caught: the watch bounding the whole run (a run of many phases, each shorter than the limit, stopped), or
    a phase entered twice in a row (same name, new sequence number) taken for no progress."""
    def marks(n):  # a new mark every 50 min (limit 60), the same phase name each time
        return Mark("rollout", n // 50, n // 50, float(n))

    assert stall_run(marks, stall_s=3600, step=60.0, polls=500) == "done"


def test_no_stall_check_when_off_or_before_the_first_mark():
    """Bug caught: --run.stall_timeout_s 0 still stopping runs, or an unreadable progress store (no mark ever)
    stopping a healthy run."""
    stuck = Mark("sync", 2, 5, 0.0)
    assert stall_run(lambda n: stuck, stall_s=0, polls=300) == "done"
    assert stall_run(lambda n: None, stall_s=60, polls=300) == "done"


def test_a_death_is_reported_before_a_stall():
    """Bug caught: a dead rank reported as a stall (the message would then say every actor is alive)."""
    with pytest.raises(RunFailure, match="policy rank 1 died during training"):
        wait_for_fit(Wait("fit-ref", "the trainer's fit", "trainer"), [Wait(None, "policy rank 1", "r1")],
                     poll_s=0.01, ray_api=FakeRay(polls=None), state_of=lambda h: ("DEAD", "") if h == "r1" else None,
                     progress=lambda: Mark("training", 1, 1, 0.0), stall_s=1e-9, clock=iter(range(10**6)).__next__)


def test_iteration_progress_reports_each_finished_iteration_once():
    """--run.progress_lines: the driver turns the trainer's marks into 'iterations done' once per change, also with
    the stall check off. Catches: an iteration counted done at its rollout, repeated lines, nothing without a stall
    limit."""
    from gaca_openrlhf.trainer.watch import iteration_progress

    phases = [("start", 0), ("rollout", 1), ("experience", 1), ("training", 1), ("sync", 1), ("checkpoint", 1),
              ("rollout", 2), ("training", 2), ("checkpoint", 2), ("done", 2)]
    marks = [Mark(p, i, seq, 0.0) for seq, (p, i) in enumerate(phases)]
    seen = []
    clock = Clock(1.0)
    polled = []

    def on_wait(n):
        clock.t += 1.0
        polled.append(n)

    fake = FakeRay(polls=len(marks), on_wait=on_wait)
    wait_for_fit(Wait("fit-ref", "the trainer's fit", "trainer"), [], poll_s=0.01, ray_api=fake,
                 state_of=lambda h: None, progress=lambda: marks[min(len(polled) - 1, len(marks) - 1)],
                 stall_s=0, clock=clock, on_mark=iteration_progress(2, lambda d, t: seen.append((d, t))))
    assert seen == [(0, 2), (1, 2), (2, 2)]

    # a short run: fit returns between two polls; the final count still comes from the last mark ("done")
    seen.clear()
    published = [Mark("start", 0, 0, 0.0)]
    fake = FakeRay(polls=1, on_wait=lambda n: n == 2 and published.append(Mark("done", 2, 9, 0.0)))
    wait_for_fit(Wait("fit-ref", "the trainer's fit", "trainer"), [], poll_s=0.01, ray_api=fake,
                 state_of=lambda h: None, progress=lambda: published[-1], stall_s=0,
                 on_mark=iteration_progress(2, lambda d, t: seen.append((d, t))))
    assert seen == [(0, 2), (2, 2)]
