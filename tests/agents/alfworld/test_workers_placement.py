"""Env workers created inside a placement-group actor (as inside OpenRLHF's colocated vLLM engines) (slow: Ray).

The trap (issue 9): an actor placed with ``placement_group_capture_child_tasks=True`` drags the actors it creates
into its placement group. With ``--train.colocate_all`` each bundle is {"GPU": 1, "CPU": 1}, of which the policy,
reference and vLLM actors take 0.2 CPU each; a 0.5-CPU env worker never fits and every episode times out.
One bundle set up exactly like that, on logical GPUs (no CUDA needed: Ray only counts them).
"""
from __future__ import annotations

import time

import pytest

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from agents.base import EnvError

pytestmark = pytest.mark.slow


@ray.remote
class _Occupant:  # the policy / reference actors of a colocated bundle (0.2 GPU + 0.2 CPU each)
    def ready(self):
        return True


@ray.remote
class _Engine:
    """Stands in for OpenRLHF's RolloutRayActor: creates env workers from inside the placement group."""

    def placement_of_new_worker(self, timeout: float, **env_kwargs):
        from agents.alfworld.workers import RayAlfworldEnv

        env = RayAlfworldEnv(**env_kwargs)
        t0 = time.monotonic()
        try:
            where = env._call("placement", timeout=timeout)
            return {"ok": True, **where, "seconds": time.monotonic() - t0}
        except EnvError as e:
            return {"ok": False, "error": str(e), "type": type(e).__name__, "seconds": time.monotonic() - t0}
        finally:
            env.close()


@pytest.fixture(scope="module")
def colocated_bundle():
    assert not ray.is_initialized(), "this test needs its own Ray instance"
    ray.init(num_cpus=4, num_gpus=2, include_dashboard=False, log_to_driver=False)
    pg = placement_group([{"GPU": 1, "CPU": 1}, {"GPU": 1, "CPU": 1}], strategy="PACK")
    ray.get(pg.ready())

    def in_bundle(i):
        return dict(num_cpus=0.2, num_gpus=0.2, scheduling_strategy=PlacementGroupSchedulingStrategy(
            placement_group=pg, placement_group_bundle_index=i, placement_group_capture_child_tasks=True))

    # every bundle as on the node: actor + reference + vLLM engine (0.2 each); bundle 1's engine stays idle
    occupants = [_Occupant.options(**in_bundle(i)).remote() for i in (0, 0, 1, 1, 1)]
    ray.get([o.ready.remote() for o in occupants])
    engine = _Engine.options(**in_bundle(0)).remote()
    yield pg, engine
    ray.shutdown()


def test_the_trap_is_real_a_captured_half_cpu_worker_never_starts(colocated_bundle):
    """Control (the pre-fix behaviour): no explicit strategy + 0.5 CPU -> inside the group, never scheduled."""
    pg, engine = colocated_bundle
    out = ray.get(engine.placement_of_new_worker.remote(timeout=6.0, num_cpus=0.5, scheduling_strategy=None))
    assert not out["ok"] and "timed out" in out["error"], out


def test_default_worker_escapes_the_group_and_starts(colocated_bundle):
    pg, engine = colocated_bundle
    out = ray.get(engine.placement_of_new_worker.remote(timeout=60.0))
    assert out["ok"], out
    assert out["placement_group_id"] is None  # outside any placement group
    assert ray.util.placement_group_table(pg)["state"] == "CREATED"


def test_default_cpu_budget_fits_128_workers_next_to_8_bundles():
    from agents.alfworld.workers import DEFAULT_WORKER_CPUS

    # 8-GPU node, 16 tasks x 8 rollouts: 8 one-CPU bundles + 128 workers + the trainer's 1 CPU within 32 CPUs
    assert 8 * 1 + 128 * DEFAULT_WORKER_CPUS + 1 <= 32


def test_unschedulable_worker_is_reported_within_seconds(colocated_bundle):
    """A worker asking for more CPUs than are free is reported as unschedulable, not after the 120 s timeout."""
    pg, engine = colocated_bundle
    out = ray.get(engine.placement_of_new_worker.remote(timeout=120.0, num_cpus=16, schedule_timeout_s=2.0))
    assert not out["ok"] and out["type"] == "WorkerUnschedulableError", out
    assert "cannot be scheduled" in out["error"] and "16 CPU" in out["error"]
    assert out["seconds"] < 10
