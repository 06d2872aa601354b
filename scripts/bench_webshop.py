#!/usr/bin/env python
"""Benchmark the local WebShop server: startup time and memory, search latency, steps/s under concurrency.

For each catalog size it starts ``python -m webshop_server --production`` in its own process, then measures:

* startup: seconds from launch until ``/health`` answers, and the server's resident memory (RSS) after startup
  and after the load phases;
* search: p50/p99 latency of ``search[...]`` steps over HTTP (goal instructions as queries, one client), and the
  p50 of the same step as a no-op (everything but the search: HTTP client, waitress, Flask, page, JSON);
* throughput: agent steps per second with N concurrent clients (each: reset, then up to 15 steps of searches
  and clicks, repeated for ``--duration`` seconds), with error counts and step latency percentiles.

    python scripts/bench_webshop.py                       # 1k and 100k products, 16 clients
    python scripts/bench_webshop.py --sizes 1000 --clients 16 --duration 10 --out bench.json
    # WebShop's real files (or a generated catalog in their format): cold start (builds the on-disk cache),
    # warm start (cache reused), peak RSS of each, search latency, oracle purchases, throughput
    flock /tmp/gaca-heavy.lock python scripts/bench_webshop.py --data-dir /tmp/ws_full --generate 1181436 \
        --human-fraction 0.0034 --sizes ''
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from webshop_server.testing import free_port, wait_healthy  # noqa: E402


def rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    try:
        import psutil

        return psutil.Process(pid).memory_info().rss / 2**20
    except Exception:  # noqa: BLE001
        return float("nan")


def pct(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")


def bench_search(url: str, n: int) -> dict:
    http = requests.Session()
    sid = http.post(url + "/api/reset", json={"goal_index": 0}, timeout=60).json()["session_id"]
    queries = []
    n_goals = min(500, http.get(url + "/api/stats", timeout=60).json()["goals"])
    for i in range(n):
        r = http.post(url + "/api/reset", json={"goal_index": i % n_goals}, timeout=60).json()
        queries.append(r["instruction"].split(", and price lower than")[0])
        http.post(url + "/api/close", json={"session_id": r["session_id"]}, timeout=60)
    lat, noop = [], []
    for q in queries:
        t = time.perf_counter()
        r = http.post(url + "/api/step", json={"session_id": sid, "action": f"search[{q}]"}, timeout=60)
        lat.append(time.perf_counter() - t)
        assert r.status_code == 200, r.text
        # the same request without the search: a no-op answered with this results page (HTTP client, waitress,
        # Flask, session lookup, page render, JSON), so p50 minus noop p50 is about the search's share
        t = time.perf_counter()
        r = http.post(url + "/api/step", json={"session_id": sid, "action": "noop"}, timeout=60)
        noop.append(time.perf_counter() - t)
        assert r.status_code == 200 and not r.json()["info"]["executed"], r.text
    return {"n": n, "p50_ms": 1000 * statistics.median(lat), "p99_ms": 1000 * pct(lat, 0.99),
            "mean_ms": 1000 * statistics.fmean(lat), "noop_p50_ms": 1000 * statistics.median(noop)}


def bench_throughput(url: str, clients: int, duration: float) -> dict:
    stop = time.monotonic() + duration
    lock = threading.Lock()
    lat: list[float] = []
    errors: list[str] = []
    episodes = [0]

    def worker(k: int) -> None:
        rng = random.Random(k)
        http = requests.Session()
        while time.monotonic() < stop:
            try:
                state = http.post(url + "/api/reset", json={"split": "test", "index": rng.randrange(500)},
                                  timeout=60).json()
                sid = state["session_id"]
                for _ in range(15):
                    acts = state["available_actions"]
                    clickables = [c for c in acts["clickables"] if c not in ("search",)]
                    if acts["has_search_bar"] or not clickables or rng.random() < 0.15:
                        action = "search[" + rng.choice(
                            ["green tea", "office chair", "running shoes", "hdmi cable", "protein bars gluten free",
                             "face moisturizer", "backpack water resistant"]) + "]"
                    else:
                        action = f"click[{rng.choice(clickables)}]"
                    t = time.perf_counter()
                    r = http.post(url + "/api/step", json={"session_id": sid, "action": action}, timeout=60)
                    dt = time.perf_counter() - t
                    with lock:
                        lat.append(dt)
                        if r.status_code != 200:
                            errors.append(f"{r.status_code} {r.text[:100]}")
                    if r.status_code != 200:
                        break
                    state = r.json()
                    if state["done"] or time.monotonic() >= stop:
                        break
                http.post(url + "/api/close", json={"session_id": sid}, timeout=60)
                with lock:
                    episodes[0] += 1
            except Exception as exc:  # noqa: BLE001
                with lock:
                    errors.append(repr(exc))
        http.close()

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        list(pool.map(worker, range(clients)))
    wall = time.perf_counter() - t0
    return {"clients": clients, "seconds": wall, "steps": len(lat), "steps_per_s": len(lat) / wall,
            "episodes": episodes[0], "errors": len(errors), "error_examples": errors[:3],
            "step_p50_ms": 1000 * statistics.median(lat) if lat else None, "step_p99_ms": 1000 * pct(lat, 0.99)}


def peak_rss_mb(pid: int) -> float:
    """VmHWM: the process's peak resident set size so far."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def bench_oracle(url: str, n: int) -> dict:
    """Scripted expert (search the instruction, page, open the goal product, pick its options, buy) on test goals."""
    from webshop_server.testing import expert_episode

    http = requests.Session()
    scores, found = [], 0
    n = min(n, http.get(url + "/api/stats", timeout=60).json()["splits"]["test"])
    for i in range(n):
        r = http.post(url + "/api/reset", json={"split": "test", "index": i}, timeout=60).json()
        sid = r["session_id"]
        goal = http.get(url + "/api/goal", params={"session_id": sid}, timeout=60).json()

        def step(action: str, sid: str = sid) -> dict:
            a = http.post(url + "/api/step", json={"session_id": sid, "action": action}, timeout=60)
            assert a.status_code == 200, a.text
            return a.json()

        answers = expert_episode(step, r, goal)
        found += answers[-1]["info"].get("asin") == goal["asin"]
        scores.append(float(answers[-1]["info"].get("score") or 0.0))
    return {"n": n, "goal_product_bought": found, "score_1": sum(s == 1.0 for s in scores),
            "mean_score": statistics.fmean(scores) if scores else None}


def bench_search_inprocess(cache_root: str, n: int) -> dict:
    """Search alone (no HTTP, no page rendering) on the cached catalog: per-query thread CPU time and wall time,
    goal instructions as queries (as agents search)."""
    from webshop_server.store import DiskCatalog

    (entry,) = [d for d in os.listdir(cache_root) if not d.startswith(".") and ".tmp" not in d][:1]
    catalog = DiskCatalog(os.path.join(cache_root, entry), "bench")
    engine = catalog.search_engine
    queries = [i["instruction"] for s in catalog.goal_sources for i in s.get("instructions", [])[:1]][:n]
    if not queries:  # synthetic goal mode
        queries = [s["instruction_text"] for s in catalog.goal_sources[:n]]
    for q in queries[:20]:  # warm the page cache
        engine.search(q)
    cpu, wall = [], []
    for q in queries:
        t, w = time.thread_time(), time.perf_counter()
        engine.search(q)
        cpu.append(time.thread_time() - t)
        wall.append(time.perf_counter() - w)
    return {"n": len(queries), "cpu_p50_ms": 1000 * statistics.median(cpu), "cpu_p90_ms": 1000 * pct(cpu, 0.9),
            "wall_p50_ms": 1000 * statistics.median(wall), "wall_p90_ms": 1000 * pct(wall, 0.9)}


def start_server(cmd: list[str], url: str, timeout: float) -> tuple[subprocess.Popen, float]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_healthy(url, timeout=timeout)
    except TimeoutError:
        proc.kill()
        raise SystemExit(f"server did not start: {proc.communicate(timeout=30)[1][-3000:]}")
    return proc, time.perf_counter() - t0


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def bench_data_dir(args: argparse.Namespace) -> dict:
    """Cold start (cache built), warm start (cache reused), then the load phases on the warm server."""
    import shutil

    if args.generate and not os.path.exists(os.path.join(args.data_dir, "items_shuffle.json")):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "webshop_server", "--write-data", args.data_dir, "--num-products",
                        str(args.generate), "--seed", str(args.seed), "--human-fraction", str(args.human_fraction)],
                       cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        print(f"generated {args.generate} products in {time.perf_counter() - t:.0f}s", flush=True)
    cache = args.index_cache or os.path.join(args.data_dir, ".bench_cache")
    if args.cold:
        shutil.rmtree(cache, ignore_errors=True)
    out: dict = {"data_dir": args.data_dir, "catalog": args.catalog}
    for phase in ("warm",) if args.warm_only else ("cold", "warm"):
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        cmd = [sys.executable, "-m", "webshop_server", "--host", "127.0.0.1", "--port", str(port), "--production",
               "--data-dir", args.data_dir, "--catalog", args.catalog, "--index-cache", cache, "--seed",
               str(args.seed), "--threads", str(args.threads), "--expose-goals"]
        if args.tagger:
            cmd += ["--tagger", args.tagger]
        proc, startup = start_server(cmd, url, args.startup_timeout)
        try:
            stats = requests.get(url + "/api/stats", timeout=60).json()
            r = {"startup_s": startup, "rss_mb": rss_mb(proc.pid), "peak_rss_mb": peak_rss_mb(proc.pid),
                 "products": stats["products"], "goals": stats["goals"]}
            print(f"{phase} start: {stats['products']} products, {stats['goals']} goals, ready in {startup:.1f}s, "
                  f"RSS {r['rss_mb']:.0f} MB, peak RSS {r['peak_rss_mb']:.0f} MB", flush=True)
            if phase == "warm":
                r["search"] = bench_search(url, args.searches)
                print(f"search p50 {r['search']['p50_ms']:.2f} ms p99 {r['search']['p99_ms']:.2f} ms "
                      f"(HTTP step, one client; the same step as a no-op: p50 {r['search']['noop_p50_ms']:.2f} ms)"
                      f"; load average {os.getloadavg()[0]:.1f}", flush=True)
                r["oracle"] = bench_oracle(url, args.oracle)
                print(f"oracle: {r['oracle']}", flush=True)
                r["throughput"] = bench_throughput(url, args.clients, args.duration)
                t = r["throughput"]
                print(f"{t['clients']} clients: {t['steps_per_s']:.0f} steps/s, step p50 {t['step_p50_ms']:.1f} ms "
                      f"p99 {t['step_p99_ms']:.1f} ms, errors {t['errors']}", flush=True)
                r["peak_rss_mb_end"] = peak_rss_mb(proc.pid)
                print(f"peak RSS after the load phases {r['peak_rss_mb_end']:.0f} MB", flush=True)
        finally:
            stop_server(proc)
        out[phase] = r
    out["search_inprocess"] = bench_search_inprocess(cache, args.searches)
    sr = out["search_inprocess"]
    print(f"search alone (in process, {sr['n']} queries): CPU p50 {sr['cpu_p50_ms']:.2f} ms p90 "
          f"{sr['cpu_p90_ms']:.2f} ms, wall p50 {sr['wall_p50_ms']:.2f} ms p90 {sr['wall_p90_ms']:.2f} ms", flush=True)
    return out


def bench_size(n: int, args: argparse.Namespace) -> dict:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "webshop_server", "--host", "127.0.0.1", "--port", str(port), "--production",
           "--num-products", str(n), "--seed", str(args.seed), "--threads", str(args.threads)]
    if args.tagger:
        cmd += ["--tagger", args.tagger]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_healthy(url, timeout=args.startup_timeout)
        startup = time.perf_counter() - t0
        stats = requests.get(url + "/api/stats", timeout=60).json()
        rss_start = rss_mb(proc.pid)
        search = bench_search(url, args.searches)
        through = bench_throughput(url, args.clients, args.duration)
        rss_end = rss_mb(proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
    return {"products": n, "goals": stats["goals"], "startup_s": startup, "catalog_index_goals_s": stats["load_seconds"],
            "rss_mb_after_startup": rss_start, "rss_mb_after_load": rss_end, "search": search, "throughput": through}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,100000", help="comma-separated catalog sizes")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--duration", type=float, default=10.0, help="seconds of the throughput phase")
    ap.add_argument("--searches", type=int, default=200)
    ap.add_argument("--threads", type=int, default=16, help="waitress threads")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tagger", choices=("auto", "spacy", "heuristic"), default=None)
    ap.add_argument("--startup-timeout", type=float, default=900.0)
    ap.add_argument("--out", help="write the results as JSON")
    ap.add_argument("--data-dir", help="benchmark WebShop's data files in DIR (cold + warm start)")
    ap.add_argument("--catalog", choices=("auto", "full", "small"), default="auto")
    ap.add_argument("--index-cache", help="cache folder (default DIR/.bench_cache)")
    ap.add_argument("--cold", action="store_true", help="delete the cache first (measure a cold start)")
    ap.add_argument("--warm-only", action="store_true", help="only the warm start (the cache exists)")
    ap.add_argument("--generate", type=int, default=0,
                    help="with --data-dir: first write a generated catalog of N products there (if absent)")
    ap.add_argument("--human-fraction", type=float, default=0.0034,
                    help="with --generate: share of products with human instructions (about 3 each: 0.0034 gives "
                         "about WebShop's 12087 human instructions at 1.18M)")
    ap.add_argument("--oracle", type=int, default=50, help="scripted expert episodes on test goals")
    args = ap.parse_args()
    results = {"host": {"cpus": os.cpu_count(), "python": sys.version.split()[0],
                        "loadavg_start": os.getloadavg()}, "runs": []}
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start", flush=True)
    if args.data_dir:
        results["data_dir"] = bench_data_dir(args)
    for n in [int(x) for x in args.sizes.split(",") if x]:
        r = bench_size(n, args)
        results["runs"].append(r)
        t = r["throughput"]
        print(f"{n:>7} products ({r['goals']} goals): startup {r['startup_s']:.1f}s "
              f"(catalog+index+goals {r['catalog_index_goals_s']:.1f}s), RSS {r['rss_mb_after_startup']:.0f} MB "
              f"-> {r['rss_mb_after_load']:.0f} MB | search p50 {r['search']['p50_ms']:.1f} ms "
              f"p99 {r['search']['p99_ms']:.1f} ms | {t['clients']} clients: {t['steps_per_s']:.0f} steps/s, "
              f"step p50 {t['step_p50_ms']:.1f} ms p99 {t['step_p99_ms']:.1f} ms, errors {t['errors']}", flush=True)
    results["host"]["loadavg_end"] = os.getloadavg()
    print(f"load average {os.getloadavg()[0]:.1f} at the end", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
