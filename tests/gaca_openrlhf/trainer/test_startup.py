"""``trainer/startup.py``: the bounded start-up wait of ``train`` (trainer, model actors, vLLM engines).

Ray is replaced by a stand-in whose refs are ready, failing or never ready, and the clock by a counter, so a
"never ready" actor times out in no real time. Each test names the bug it catches; the real thing (a vLLM engine
that cannot start on CPU, the driver stopping with its cause) is the slow test in test_startup_failure.py.
"""
from __future__ import annotations

import pytest
from ray.exceptions import RayActorError

from gaca_openrlhf.trainer import startup
from gaca_openrlhf.trainer.startup import Deadline, StartupError, Wait, error_cause, wait_for_startup

NEVER = object()  # a ref that never becomes ready


class Clock:
    """Fake monotonic time: each ``ray.wait`` that times out advances it by its timeout."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


class FakeRay:
    """``outcomes``: ref -> value, an exception (``get`` raises it) or NEVER. ``ready_after``: ref -> the number of
    ``wait`` calls before it is ready (default 0)."""

    def __init__(self, clock, outcomes, ready_after=None):
        self.clock, self.outcomes, self.ready_after = clock, outcomes, dict(ready_after or {})
        self.waits, self.gets = [], []

    def wait(self, refs, num_returns=1, timeout=None):
        self.waits.append((list(refs), timeout))
        ready = []
        for ref in refs:
            if self.outcomes[ref] is NEVER:
                continue
            if self.ready_after.get(ref, 0) > 0:
                self.ready_after[ref] -= 1
                continue
            ready.append(ref)
        if not ready:
            self.clock.t += timeout or 0.0
        return ready[:num_returns], [r for r in refs if r not in ready[:num_returns]]

    def get(self, ref, timeout=None):
        self.gets.append(ref)
        out = self.outcomes[ref]
        if isinstance(out, BaseException):
            raise out
        return out


def creation_error(message: str) -> RayActorError:
    """What Ray raises for a method of an actor whose ``__init__`` raised (the traceback text included)."""
    err = RayActorError(actor_id=None, error_msg=(
        "The actor died because of an error raised in its creation task, ray::_CPURolloutRayActor.__init__() "
        "(pid=1, ip=1.2.3.4)\n  File \"vllm_engine.py\", line 64, in __init__\n    self.llm = ...\n"
        "RuntimeError: Engine core initialization failed. See root cause above.\n\n"
        "The above exception was the direct cause of the following exception:\n\n"
        "  File \"actors.py\", line 50, in __init__\n    raise EngineStartError(...)\n"
        f"gaca_openrlhf.cpu.actors.EngineStartError: {message}"))
    return err


def test_values_come_back_in_order_whatever_the_ready_order():
    """Catches: values returned in the order the refs became ready, or a ref fetched twice / not at all."""
    clock = Clock()
    ray = FakeRay(clock, {"a": 1, "b": 2, "c": 3}, ready_after={"a": 2, "b": 1})
    waits = [Wait("a", "A"), Wait("b", "B"), Wait("c", "C")]
    assert wait_for_startup(waits, 60, ray_api=ray, state_of=lambda h: None, clock=clock) == [1, 2, 3]
    assert sorted(ray.gets) == ["a", "b", "c"]
    assert wait_for_startup([], 60, ray_api=ray, clock=clock) == []


def test_a_dead_engine_stops_the_wait_at_once_with_its_cause_and_hint():
    """Catches: a failed engine noticed only after every other start-up call finished (the driver hung behind a
    model actor that never came up), its own error (the memory diagnosis) dropped, or the hint not given."""
    clock = Clock()
    cause = ("vLLM engine could not start: not enough free memory: 2.33 GiB of 23.54 GiB RAM available, but "
             "--vllm.gpu_memory_utilization 0.1 reserves 2.35 GiB")
    ray = FakeRay(clock, {"policy": NEVER, "engine": creation_error(cause)})
    waits = [Wait("policy", "policy rank 0"), Wait("engine", "vLLM engine 1/1", hint="lower it")]
    with pytest.raises(StartupError) as info:
        wait_for_startup(waits, 900, ray_api=ray, state_of=lambda h: None, clock=clock)
    msg = str(info.value)
    assert msg.startswith("vLLM engine 1/1 failed to start: gaca_openrlhf.cpu.actors.EngineStartError: vLLM engine "
                          "could not start: not enough free memory")
    assert msg.endswith("\nlower it") and "Engine core initialization failed" not in msg
    assert isinstance(info.value.__cause__, RayActorError)
    assert clock.t == 0  # no waiting for the policy that never comes


def test_the_hint_is_not_repeated_when_the_error_already_gives_it():
    """Catches: the --vllm.gpu_memory_utilization advice printed twice (the CPU engine's error already says it)."""
    hint = "lower --vllm.gpu_memory_utilization or free memory"
    err = RuntimeError("EngineStartError: ... Lower --vllm.gpu_memory_utilization or free memory")
    assert hint not in startup.describe_failure("vLLM engine 1/1", err, hint)
    assert startup.describe_failure("vLLM engine 1/1", RuntimeError("RuntimeError: boom"), hint).endswith(hint)


def test_an_actor_found_dead_while_its_call_is_pending_is_reported():
    """Catches: an actor Ray already marks DEAD (worker killed by the OOM killer) waited for until the timeout
    because its pending call never answered."""
    clock = Clock()
    ray = FakeRay(clock, {"policy": NEVER})
    states = {"handle": ("DEAD", "Worker unexpectedly exits ... killed by the OOM killer")}
    with pytest.raises(StartupError, match=r"policy rank 0 failed to start: .*the actor is dead: .*OOM killer"):
        wait_for_startup([Wait("policy", "policy rank 0", "handle")], 900, poll_s=5, ray_api=ray,
                         state_of=states.get, clock=clock)
    assert clock.t == 5  # found at the first look, not at the deadline


def test_a_never_ready_actor_times_out_naming_it_and_its_state():
    """Catches: an unbounded wait (the driver idle forever), a timeout that does not say what is pending and how to
    wait longer, or the poll overshooting the bound."""
    clock = Clock()
    ray = FakeRay(clock, {"policy": NEVER, "engine": "ok"})
    states = {"h": ("PENDING_CREATION", "")}
    with pytest.raises(StartupError) as info:
        wait_for_startup([Wait("policy", "policy rank 0", "h"), Wait("engine", "vLLM engine 1/1")], 12, poll_s=5,
                         ray_api=ray, state_of=states.get, clock=clock)
    msg = str(info.value)
    assert msg.startswith("start-up did not finish within 12 s; still waiting for: policy rank 0 (actor state "
                          "PENDING_CREATION).")
    assert "vLLM engine" not in msg.split("still waiting for:")[1].split(".")[0]  # it was ready
    assert startup.TIMEOUT_ENV in msg
    assert clock.t == 12 and [t for _, t in ray.waits] == [5, 5, 5, 2]


def test_total_bound_named_when_waiting_for_what_is_left_of_it():
    """Catches: a later start-up phase's timeout error naming the time left (0 s) instead of the run's bound."""
    clock = Clock()
    deadline = Deadline(900, clock=clock)
    clock.t = 899.0
    ray = FakeRay(clock, {"critic": NEVER})
    with pytest.raises(StartupError, match="within 900 s; still waiting for: critic rank 0"):
        wait_for_startup([Wait("critic", "critic rank 0")], deadline.left(), ray_api=ray, clock=clock, total_s=900)
    assert deadline.left() == 0.0


def test_startup_timeout_from_the_environment(monkeypatch):
    """Catches: GACA_STARTUP_TIMEOUT_S ignored, the backend default ignored, or a bad value accepted (0 would fail
    every start, a typo would silently wait the default)."""
    monkeypatch.delenv(startup.TIMEOUT_ENV, raising=False)
    assert startup.startup_timeout_s(900) == 900.0 and startup.startup_timeout_s() == startup.DEFAULT_TIMEOUT_S
    monkeypatch.setenv(startup.TIMEOUT_ENV, "120")
    assert startup.startup_timeout_s(900) == 120.0
    for bad in ("0", "-5", "ten"):
        monkeypatch.setenv(startup.TIMEOUT_ENV, bad)
        with pytest.raises(ValueError, match=startup.TIMEOUT_ENV):
            startup.startup_timeout_s(900)


def test_error_cause_keeps_the_actors_own_error():
    """Catches: the Ray wrapper text ("The actor died because of ...", the traceback) kept instead of the error the
    actor raised, or a long cause not cut."""
    assert error_cause(creation_error("boom")) == "gaca_openrlhf.cpu.actors.EngineStartError: boom"
    lines = "\n".join(f"line {i}" for i in range(20))
    short = error_cause(RuntimeError(lines))
    assert short.splitlines()[0] == "line 0" and short.endswith("...") and len(short.splitlines()) == 7
    assert error_cause(RuntimeError("")) == "RuntimeError"


def test_actor_state_is_none_for_anything_it_cannot_look_up():
    """Catches: a state look-up that raises (no actor id, Ray not up) breaking the wait instead of being skipped."""
    assert startup.actor_state(object()) is None
    assert startup.actor_state("not a handle") is None
