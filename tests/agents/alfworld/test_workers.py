"""Ray env workers: same results as in-process, crash -> EnvError + restart, hang -> timeout (slow)."""
from __future__ import annotations

import asyncio

import pytest

from agents.base import EnvError

pytestmark = pytest.mark.slow

import ray  # noqa: E402  (default install: a missing part fails)


@pytest.fixture(scope="module")
def ray_local():
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    if started:
        ray.shutdown()


@pytest.fixture(scope="module")
def renv(ray_local):
    from agents.alfworld.backends import make_env

    e = make_env(backend="ray", step_timeout_s=20, reset_timeout_s=120, num_cpus=0.5)
    yield e
    e.close()


def test_ray_env_matches_local_and_wins(six_games, paths, walkthrough, renv):
    from agents.alfworld.env import AlfworldEnv

    path = paths["pick_and_place_simple"]
    local = AlfworldEnv()
    task_l, first_l = local.reset(path)
    task_r, first_r = renv.reset(path)
    assert (task_l, first_l) == (task_r, first_r)
    for cmd in walkthrough(path):
        sl, sr = local.step(cmd), renv.step(cmd)
        assert sl == sr
    assert sr.won and sr.reward == 10.0 and sr.done
    with pytest.raises(EnvError):
        renv.step("look")  # episode over
    renv.reset(path)
    assert renv.cache_info()["misses"] == 1  # the worker translated the game once
    local.close()


def test_killed_worker_fails_the_episode_and_restarts(six_games, paths, walkthrough, renv):
    path = paths["pick_and_place_simple"]
    renv.reset(path)
    pid = renv.ping()
    restarts = renv.restarts
    ray.kill(renv._actor)
    with pytest.raises(EnvError, match="died"):
        renv.step("look")
    with pytest.raises(EnvError):  # the failed episode cannot continue
        renv.step("look")
    task, step = renv.reset(path)  # a fresh worker serves the next episode
    assert step.observation.startswith("-= Welcome") and renv.restarts == restarts + 1
    assert renv.ping() != pid


def test_crashing_worker_process_is_detected(six_games, paths, walkthrough, renv):
    path = paths["pick_and_place_simple"]
    renv.reset(path)
    with pytest.raises(EnvError):
        renv._call("debug_exit", timeout=30)
    _, step = renv.reset(path)
    assert not step.done


def test_hanging_worker_times_out_and_restarts(six_games, paths, walkthrough, renv):
    path = paths["pick_and_place_simple"]
    renv.reset(path)
    restarts = renv.restarts
    with pytest.raises(EnvError, match="timed out"):
        renv._call("debug_sleep", 60, timeout=1.0)
    assert renv.restarts == restarts + 1
    _, step = renv.reset(path)
    assert not step.done


def test_async_api_and_pool(six_games, paths, walkthrough, ray_local):
    from agents.alfworld.workers import EnvPool

    paths = paths
    path = paths["pick_and_place_simple"]
    pool = EnvPool(2, step_timeout_s=20, reset_timeout_s=120, num_cpus=0.5)

    async def episode():
        async with pool.alease() as env:
            await env.areset(path)
            for cmd in walkthrough(path):
                s = await env.astep(cmd)
            return s.won

    async def main():
        return await asyncio.gather(*(episode() for _ in range(4)))

    try:
        assert asyncio.run(main()) == [True] * 4
        with pool.lease() as env:
            env.reset(path)
            assert env.step("dance", valid=False).observation == "Nothing happens."
    finally:
        pool.close()


def test_async_timeout(six_games, paths, walkthrough, renv):
    path = paths["pick_and_place_simple"]

    async def main():
        await renv.areset(path)
        with pytest.raises(EnvError, match="timed out"):
            await renv._acall("debug_sleep", 60, timeout=1.0)
        await renv.areset(path)
        return await renv.astep("look")

    assert asyncio.run(main()).observation


def test_ray_env_reports_the_oracle_from_its_worker(six_games, paths, walkthrough, ray_local):
    """``oracle`` reaches the worker's adapter (it is not a Ray actor option): the EnvSteps it returns carry
    ``oracle_distance``, equal to the in-process adapter's, down to 0 at the win (the credit audit in training)."""
    from agents.alfworld.backends import make_env
    from agents.alfworld.env import AlfworldEnv

    path = paths["pick_and_place_simple"]
    renv = make_env(backend="ray", step_timeout_s=20, reset_timeout_s=120, num_cpus=0.5, oracle="auto")
    local = AlfworldEnv(oracle=True)
    try:
        first_r, first_l = renv.reset(path)[1], local.reset(path)[1]
        assert first_r.info["oracle_distance"] == first_l.info["oracle_distance"] > 0
        for cmd in walkthrough(path):
            sr, sl = renv.step(cmd), local.step(cmd)
            assert sr.info["oracle_distance"] == sl.info["oracle_distance"]
        assert sr.won and sr.info["oracle_distance"] == 0
    finally:
        renv.close()
        local.close()
