#!/usr/bin/env python
"""ALFWorld environment benchmark: in-process reset/step latency, and the rollout's group pattern on a pool of Ray
env workers (each task's n episodes start together on n different workers).

    python scripts/bench_alfworld.py --data DIR --split train       # 16 tasks x 8 episodes on 8 workers, 2 CPUs
    python scripts/bench_alfworld.py                                # generates --tasks games into a tmp dir first
    python scripts/bench_alfworld.py --tasks 16 --group 8 --workers 8 --ray-cpus 2 --episode-steps 10

Group phases (both on a fresh pool of ``--workers`` Ray actors sharing ``--ray-cpus`` CPUs; every group's episodes
start at the same moment, as a rollout's ``n_samples_per_prompt`` episodes of one task do):

- ``cold``: empty node-wide translation cache: each game's first reset translates it (one worker translates, the
  others of the group wait for that translation and read it from the cache);
- ``warm``: a fresh pool (empty in-memory caches, as new tasks are for training workers) on the filled node cache:
  every reset is "after the game's first translation" -- the figure the reset target (p50 <= 100 ms) refers to.

Episodes take uniformly random admissible actions (seeded) for up to ``--episode-steps`` steps, like an untrained
policy. Prints one JSON line with all figures.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q / 100 * len(xs)))], 2)


def summary(xs_ms: list[float]) -> dict:
    return {"n": len(xs_ms), "p50_ms": pct(xs_ms, 50), "p90_ms": pct(xs_ms, 90), "p99_ms": pct(xs_ms, 99),
            "mean_ms": round(statistics.fmean(xs_ms), 2) if xs_ms else 0.0}


def play(env, game: str, rng: random.Random, steps: int, reset_ms: list, step_ms: list) -> int:
    t0 = time.perf_counter()
    _, s = env.reset(game)
    reset_ms.append((time.perf_counter() - t0) * 1000)
    n = 0
    for _ in range(steps):
        action = rng.choice(s.admissible_actions)
        t0 = time.perf_counter()
        s = env.step(action)
        step_ms.append((time.perf_counter() - t0) * 1000)
        n += 1
        if s.done:
            break
    return n


def group_phase(games: list[str], data: str, args, seed: int) -> dict:
    """One pass of len(games) groups x args.group episodes on a fresh pool (see module docstring)."""
    from agents.alfworld.workers import RayAlfworldEnv

    envs = [RayAlfworldEnv(data_dir=data, num_cpus=args.ray_cpus / args.workers, step_timeout_s=120,
                           reset_timeout_s=600) for _ in range(args.workers)]
    t0 = time.perf_counter()
    for e in envs:
        e.ping(timeout=300)
    start_s = time.perf_counter() - t0
    resets: list[float] = []
    first_resets: list[float] = []  # each worker's first reset (first use of the engine in that process)
    steps: list[float] = []
    errors = [0]
    lock = threading.Lock()
    # episode j of group g runs on worker (g + j) % workers: a group spreads over `group` different workers
    barrier = threading.Barrier(args.workers)

    def run(k: int) -> None:
        rng = random.Random(seed * 1000 + k)
        first = True
        for g, game in enumerate(games):
            barrier.wait()
            mine = [j for j in range(args.group) if (g + j) % args.workers == k]
            for _j in mine:
                rs, st = [], []
                try:
                    play(envs[k], game, rng, args.episode_steps, rs, st)
                except Exception:  # EnvError: counted, as the rollout would
                    with lock:
                        errors[0] += 1
                with lock:
                    if first:
                        first_resets.extend(rs)
                    resets.extend(rs)
                    steps.extend(st)
                first = False

    t0 = time.perf_counter()
    threads = [threading.Thread(target=run, args=(k,)) for k in range(args.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    infos = [e.cache_info() for e in envs]
    for e in envs:
        e.close()
    return {"pool_start_s": round(start_s, 2), "seconds": round(wall, 1), "episodes": len(resets),
            "errors": errors[0], "reset": summary(resets), "reset_first_per_worker": summary(first_resets),
            "step": summary(steps),
            "steps_per_s": round(len(steps) / wall, 1),
            "translations": sum(i.get("disk_misses", 0) for i in infos),
            "disk_hits": sum(i.get("disk_hits", 0) for i in infos),
            "memory_hits": sum(i.get("hits", 0) for i in infos)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help="data root (default: generate --tasks games into a tmp dir)")
    ap.add_argument("--split", default="train")
    ap.add_argument("--tasks", type=int, default=16, help="games (tasks) per phase")
    ap.add_argument("--group", type=int, default=8, help="episodes per task (n_samples_per_prompt)")
    ap.add_argument("--workers", type=int, default=8, help="Ray env workers in the pool")
    ap.add_argument("--ray-cpus", type=float, default=2, help="CPUs given to the local Ray instance")
    ap.add_argument("--episode-steps", type=int, default=10)
    ap.add_argument("--local-episodes", type=int, default=12)
    ap.add_argument("--cache-dir", help="node-wide translation cache for the run (default: a fresh tmp dir)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from agents.alfworld.panels import list_games

    data = args.data
    gen_s = None
    if data is None:
        from agents.alfworld.generator import generate

        data = tempfile.mkdtemp(prefix="bench_alfworld_")
        t0 = time.perf_counter()
        generate(data, args.split, args.tasks, seed=args.seed)
        gen_s = round(time.perf_counter() - t0, 1)
    games = [g for g, _ in list_games(data, args.split)][: args.tasks]
    if not games:
        print(f"no games under {data}/json_2.1.1/{args.split}", file=sys.stderr)
        return 1
    cache_dir = args.cache_dir or tempfile.mkdtemp(prefix="bench_alfworld_cache_")
    os.environ["GACA_ALFWORLD_CACHE"] = cache_dir
    result: dict = {"tasks": len(games), "group": args.group, "workers": args.workers, "ray_cpus": args.ray_cpus,
                    "episode_steps": args.episode_steps, "data": data, "generate_s": gen_s,
                    "cpu_count": os.cpu_count(), "loadavg_start": [round(x, 2) for x in os.getloadavg()]}

    # ---- in-process adapter (no disk cache): cold (translation) and warm (in-memory cache) resets, steps
    from agents.alfworld.env import AlfworldEnv

    os.environ["GACA_ALFWORLD_CACHE"] = "0"
    env = AlfworldEnv(data_dir=data, cache_size=max(32, len(games)))
    os.environ["GACA_ALFWORLD_CACHE"] = cache_dir
    rng = random.Random(args.seed)
    cold, warm, steps = [], [], []
    for g in games[: args.local_episodes]:
        play(env, g, rng, 0, cold, steps)
    for i in range(args.local_episodes):
        play(env, games[i % len(games)], rng, args.episode_steps, warm, steps)
    env.close()
    result["local"] = {"reset_translate": summary(cold), "reset_memory_cache": summary(warm),
                       "step": summary(steps)}

    # ---- group pattern on Ray workers
    import ray

    ray.init(num_cpus=args.ray_cpus, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"GACA_ALFWORLD_CACHE": cache_dir}})
    try:
        result["cold"] = group_phase(games, data, args, args.seed)
        result["warm"] = group_phase(games, data, args, args.seed + 1)
    finally:
        ray.shutdown()
    result["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
