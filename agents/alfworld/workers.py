"""ALFWorld environments in CPU-only Ray actors, with timeouts, crash detection and restart.

Why: TextWorld/Fast Downward work (0.2-4 s game loads, 15-65 ms steps, one game per process) must not run
inside a vLLM rollout process. ``RayAlfworldEnv`` implements ``AgentEnv`` on the client side and forwards each
call to its own ``AlfworldWorker`` actor (``num_gpus=0``).

Failure contract: every call has a timeout (``reset_timeout_s``, ``step_timeout_s``). If the actor dies
(crash, OOM kill, ``ray.kill``) or a call times out (hang), the client kills the actor, starts a fresh one on
the next call, and raises :class:`agents.base.EnvError`: the rollout marks *that episode* failed. A failed
episode is never continued or silently dropped -- ``step`` after a failure raises ``EnvError`` until ``reset``.

Scheduling (why this matters on a GPU node): the workers are created from inside OpenRLHF's vLLM actors, which
are placed with ``placement_group_capture_child_tasks=True``. Without an explicit strategy a worker would join that
placement group, whose colocated bundles (1 CPU each) are mostly taken by the policy, reference and vLLM actors
(0.2 CPU each): a 0.5-CPU worker never fits and every episode times out. So every worker is created with an
explicit ``scheduling_strategy`` ("DEFAULT": outside any placement group) and a small CPU budget
(``num_cpus``, default :data:`DEFAULT_WORKER_CPUS` = 0.1: 16 tasks x 8 rollouts = 128 workers take 12.8 logical
CPUs of the node, next to the 8 one-CPU bundles). A worker that Ray cannot schedule (not enough free CPUs outside
placement groups) is reported as such after ``schedule_timeout_s`` seconds (default 10), not after the reset timeout.

``EnvPool`` keeps N such environments for concurrent episodes (sync ``lease()`` / async ``alease()``).
Async code (e.g. an OpenRLHF ``AgentExecutor``) should use ``areset``/``astep`` so that waiting on an
environment does not block the event loop.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import time
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayError

from agents.base import EnvError, EnvStep
from agents.alfworld.env import MAX_STEPS, NAME, AlfworldEnv


class AlfworldWorker:
    """Actor body: one ``AlfworldEnv`` per actor process."""

    def __init__(self, **config: Any) -> None:
        self.env = AlfworldEnv(**config)

    def reset(self, task):
        return self.env.reset(task)

    def step(self, action: str, valid: bool = True) -> EnvStep:
        return self.env.step(action, valid)

    def cache_info(self) -> dict:
        return self.env.cache_info()

    def ping(self) -> int:
        return os.getpid()

    # failure injection for tests and drills
    def debug_sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def debug_exit(self) -> None:
        os._exit(1)


    def placement(self) -> dict:
        """Where Ray put this worker (tests: it must not be inside a placement group)."""
        ctx = ray.get_runtime_context()
        return {"pid": os.getpid(), "placement_group_id": ctx.get_placement_group_id(), "node_id": ctx.get_node_id()}


AlfworldWorkerActor = ray.remote(num_gpus=0)(AlfworldWorker)

#: logical CPUs per worker: 128 workers (16 tasks x 8 rollouts) take 12.8 CPUs (see module docstring)
DEFAULT_WORKER_CPUS = 0.1
#: a fresh worker not running after this many seconds is checked for schedulability
DEFAULT_SCHEDULE_TIMEOUT_S = 10.0


class WorkerUnschedulableError(EnvError):
    """Ray cannot place the worker: not enough free CPUs outside placement groups."""

_ACTOR_FAILURES = (RayActorError,)


class RayAlfworldEnv:
    """``AgentEnv`` whose engine lives in a CPU-only Ray actor (see module docstring)."""

    name = NAME

    def __init__(self, data_dir: str | None = None, max_steps: int = MAX_STEPS, cache_size: int = 32,
                 hide_help: bool = True, step_timeout_s: float = 30.0, reset_timeout_s: float = 120.0,
                 num_cpus: float = DEFAULT_WORKER_CPUS, schedule_timeout_s: float = DEFAULT_SCHEDULE_TIMEOUT_S,
                 oracle: bool | str = False, **ray_options: Any) -> None:
        if not ray.is_initialized():
            ray.init(ignore_reinit_error=True, include_dashboard=False, log_to_driver=False)
        self.max_steps = int(max_steps)
        # oracle: the worker's adapter adds info["oracle_distance"] to the EnvSteps it returns (the credit audit)
        self._config = dict(data_dir=data_dir, max_steps=max_steps, cache_size=cache_size, hide_help=hide_help,
                            oracle=bool(oracle))
        self.step_timeout_s = float(step_timeout_s)
        self.reset_timeout_s = float(reset_timeout_s)
        self.schedule_timeout_s = float(schedule_timeout_s)
        # explicit strategy: never join the placement group of the (vLLM) actor that creates this env
        ray_options.setdefault("scheduling_strategy", "DEFAULT")
        self._options = dict(num_cpus=float(num_cpus), num_gpus=0, **ray_options)
        self._actor = None
        self._started = False  # the current actor has answered once (it was scheduled)
        self._in_episode = False
        self.restarts = 0
        self.failures = 0

    # ---- actor lifecycle
    def _ensure_actor(self):
        if self._actor is None:
            self._actor = AlfworldWorkerActor.options(**self._options).remote(**self._config)
            self._started = False
        return self._actor

    def _unschedulable(self) -> str | None:
        """Why the pending worker cannot be placed now, or None when the CPUs it asks for are free (starting)."""
        need = self._options["num_cpus"]
        strategy = self._options.get("scheduling_strategy")
        if not isinstance(strategy, str):  # a caller-chosen placement group: its bundles are checked by Ray only
            return None
        free, total = ray.available_resources().get("CPU", 0.0), ray.cluster_resources().get("CPU", 0.0)
        if free + 1e-9 >= need:
            return None
        return (f"ALFWorld worker cannot be scheduled: it asks for {need:g} CPU outside placement groups and the "
                f"cluster has {free:g} of {total:g} CPUs free (the rest is held by placement groups / other actors). "
                f"Lower num_cpus in --env.kwargs (default {DEFAULT_WORKER_CPUS:g}) or give Ray more CPUs "
                f"(see examples/gpu/README.md, 'Env worker CPUs')")

    def _check_started(self, ref, timeout: float) -> None:
        """Sync: block until the fresh actor runs; fail within ``schedule_timeout_s`` if it cannot be placed."""
        if self._started:
            return
        deadline = time.monotonic() + timeout
        while True:
            wait = min(self.schedule_timeout_s, max(0.0, deadline - time.monotonic()))
            ready, _ = ray.wait([ref], timeout=wait)
            if ready:
                self._started = True
                return
            reason = self._unschedulable()
            if reason is not None:
                self._fail_unschedulable(reason)
            if time.monotonic() >= deadline:
                return  # the caller's ray.get times out and reports it

    async def _acheck_started(self, ref, timeout: float) -> None:
        if self._started:
            return
        deadline = time.monotonic() + timeout
        fut = asyncio.wrap_future(ref.future())
        while True:
            wait = min(self.schedule_timeout_s, max(0.0, deadline - time.monotonic()))
            done, _ = await asyncio.wait({fut}, timeout=wait)
            if done:
                self._started = True
                return
            reason = self._unschedulable()
            if reason is not None:
                self._fail_unschedulable(reason)
            if time.monotonic() >= deadline:
                return

    def _fail_unschedulable(self, reason: str):
        self.failures += 1
        self._in_episode = False
        self._discard_actor()
        raise WorkerUnschedulableError(reason)

    def _discard_actor(self) -> None:
        actor, self._actor = self._actor, None
        if actor is not None:
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
            self.restarts += 1

    def _fail(self, what: str, err: BaseException) -> EnvError:
        self.failures += 1
        self._in_episode = False
        self._discard_actor()
        return EnvError(f"ALFWorld worker {what}: {type(err).__name__}: {err}")

    def _call(self, method: str, *args: Any, timeout: float) -> Any:
        actor = self._ensure_actor()
        if not self._started:  # a fresh actor: readiness first, so an unplaceable one is reported within seconds
            self._check_started(actor.ping.remote(), timeout)
        ref = getattr(actor, method).remote(*args)
        try:
            return ray.get(ref, timeout=timeout)
        except GetTimeoutError as e:
            raise self._fail(f"{method} timed out after {timeout:.1f}s", e) from e
        except _ACTOR_FAILURES as e:
            raise self._fail(f"died during {method}", e) from e
        except RayError as e:  # the call raised inside the actor (bad game id, ...): actor is fine
            raise self._app_error(method, e) from e

    async def _acall(self, method: str, *args: Any, timeout: float) -> Any:
        actor = self._ensure_actor()
        if not self._started:
            await self._acheck_started(actor.ping.remote(), timeout)
        ref = getattr(actor, method).remote(*args)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(ref.future()), timeout=timeout)
        except asyncio.TimeoutError as e:
            raise self._fail(f"{method} timed out after {timeout:.1f}s", e) from e
        except _ACTOR_FAILURES as e:
            raise self._fail(f"died during {method}", e) from e
        except RayError as e:
            raise self._app_error(method, e) from e

    def _app_error(self, method: str, e: BaseException) -> EnvError:
        self.failures += 1
        self._in_episode = False
        cause = getattr(e, "cause", None) or e
        return EnvError(f"ALFWorld {method} failed: {type(cause).__name__}: {cause}")

    # ---- AgentEnv
    def reset(self, task: str | int) -> tuple[str, EnvStep]:
        self._in_episode = False
        out = self._call("reset", task, timeout=self.reset_timeout_s)
        self._in_episode = True
        return out

    def step(self, action: str, valid: bool = True) -> EnvStep:
        if not self._in_episode:
            raise EnvError("step() without an active episode (never reset, finished, or the worker failed)")
        out = self._call("step", action, valid, timeout=self.step_timeout_s)
        if out.done:
            self._in_episode = False
        return out

    async def areset(self, task: str | int) -> tuple[str, EnvStep]:
        self._in_episode = False
        out = await self._acall("reset", task, timeout=self.reset_timeout_s)
        self._in_episode = True
        return out

    async def astep(self, action: str, valid: bool = True) -> EnvStep:
        if not self._in_episode:
            raise EnvError("step() without an active episode (never reset, finished, or the worker failed)")
        out = await self._acall("step", action, valid, timeout=self.step_timeout_s)
        if out.done:
            self._in_episode = False
        return out

    def ping(self, timeout: float = 60.0) -> int:
        """Start the actor if needed and return its pid (warms a pool before the first episode)."""
        return self._call("ping", timeout=timeout)

    def cache_info(self) -> dict:
        return self._call("cache_info", timeout=self.step_timeout_s)

    def close(self) -> None:
        self._in_episode = False
        actor, self._actor = self._actor, None
        if actor is not None:
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)


class EnvPool:
    """N ``RayAlfworldEnv`` for concurrent episodes. ``with pool.lease() as env`` / ``async with pool.alease()``."""

    def __init__(self, size: int, warm: bool = True, **config: Any) -> None:
        self.envs = [RayAlfworldEnv(**config) for _ in range(int(size))]
        self._free: queue.Queue = queue.Queue()
        for env in self.envs:
            self._free.put(env)
        if warm:
            refs = [env._ensure_actor().ping.remote() for env in self.envs]
            ray.get(refs, timeout=max(60.0, 10.0 * len(refs)))

    def acquire(self, timeout: float | None = None) -> RayAlfworldEnv:
        return self._free.get(timeout=timeout)

    def release(self, env: RayAlfworldEnv) -> None:
        self._free.put(env)

    @contextlib.contextmanager
    def lease(self, timeout: float | None = None):
        env = self.acquire(timeout)
        try:
            yield env
        finally:
            self.release(env)

    @contextlib.asynccontextmanager
    async def alease(self):
        env = await asyncio.to_thread(self._free.get)
        try:
            yield env
        finally:
            self.release(env)

    def close(self) -> None:
        for env in self.envs:
            env.close()
