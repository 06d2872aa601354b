#!/usr/bin/env python
"""Benchmark the vectorized advantage estimators: time and peak memory for 10^3 .. 10^6 step samples.

    python scripts/bench_advantages.py                      # 1e3..1e6 steps, grpo/gigpo/gaca/hgpo/empg, one thread
    python scripts/bench_advantages.py --estimators gaca --loop-max 100000

Batches are synthetic ALFWorld-like (8 rollouts per task, 50-step trajectories; gaca_openrlhf.advantages.synthetic),
plus the paper's 16x8x50 and the 128x8x50 batch. "ms" is the best of --repeats calls (after one warm-up call);
"peak MB" is the rise of the peak resident memory during one call, measured in a child process whose large
allocations are mmap-backed (Linux VmHWM, reset via /proc/self/clear_refs; ru_maxrss growth elsewhere). "loop ms" is one run of the plain-Python
loop reference on the same batch (sizes up to --loop-max) and "speedup" loop / vectorized; "x gigpo" is the time
relative to GiGPO's on the same batch (HGPO/EMPG target: within 3x).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

from gaca_openrlhf.advantages import AdvantageConfig, compute_advantages  # noqa: E402
from gaca_openrlhf.advantages.reference_loop import reference_advantages  # noqa: E402
from gaca_openrlhf.advantages.synthetic import synthetic_batch  # noqa: E402

# (label, tasks, rollouts, steps per trajectory): every trajectory has exactly `steps` steps.
SIZES = [
    ("1e3", 5, 8, 25),
    ("16x8x50", 16, 8, 50),
    ("1e4", 25, 8, 50),
    ("128x8x50", 128, 8, 50),
    ("1e5", 250, 8, 50),
    ("1e6", 2500, 8, 50),
]


def _vm_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def peak_mb(fn) -> float:
    """Rise of the peak RSS while running fn(), in MiB."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM to the current RSS
        before = _vm_kb("VmRSS")
        fn()
        after = _vm_kb("VmHWM")
        if before is not None and after is not None:
            return max(0, after - before) / 1024
    except OSError:
        pass
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    fn()
    return max(0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024


def memory_probe(label: str, estimators: list[str]) -> None:
    """Child process: print {estimator: peak MB} for one batch size as JSON."""
    _, tasks, rollouts, steps = next(s for s in SIZES if s[0] == label)
    batch = synthetic_batch(tasks, rollouts, steps, seed=0, full_length=True)
    compute_advantages(batch, AdvantageConfig(estimator=estimators[0]))  # first call loads lazy kernels
    print(json.dumps({name: peak_mb(lambda: compute_advantages(batch, AdvantageConfig(estimator=name)))
                      for name in estimators}))


def peak_mb_in_child(label: str, estimators: list[str], threads: int) -> dict[str, float]:
    # glibc keeps freed heap memory resident, which would hide the peak of a repeated call: the child serves large
    # blocks by mmap (returned to the OS on free), so the VmHWM rise measures the call's own live tensors. This
    # slows allocation down, hence timing happens in the parent with the default allocator.
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    cmd = [sys.executable, os.path.abspath(__file__), "--memory-probe", label, "--estimators", ",".join(estimators),
           "--threads", str(threads)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--estimators", default="grpo,gigpo,gaca,hgpo,empg", help="comma-separated registered names")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-steps", type=float, default=1e6, help="skip sizes above this many steps")
    parser.add_argument("--loop-max", type=float, default=1e5, help="time the Python loop up to this many steps")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1 = one core)")
    parser.add_argument("--memory-probe", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    estimators = [e.strip() for e in args.estimators.split(",")]
    if args.memory_probe:
        memory_probe(args.memory_probe, estimators)
        return 0

    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s)")
    print(f"{'batch':>9} {'steps':>8} {'estimator':>14} {'ms':>9} {'peak MB':>8} {'loop ms':>9} {'speedup':>8} "
          f"{'x gigpo':>8}")
    for label, tasks, rollouts, steps in SIZES:
        batch = synthetic_batch(tasks, rollouts, steps, seed=0, full_length=True)
        n = len(batch)
        if n > args.max_steps:
            continue
        mem = peak_mb_in_child(label, estimators, args.threads)
        lists = None
        seconds: dict[str, float] = {}
        for name in estimators:
            cfg = AdvantageConfig(estimator=name)
            compute_advantages(batch, cfg)  # warm-up
            best = float("inf")
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                compute_advantages(batch, cfg)
                best = min(best, time.perf_counter() - t0)
            seconds[name] = best
            loop_txt = speed_txt = "-"
            if n <= args.loop_max:
                if lists is None:
                    lists = [x.tolist() for x in (batch.group_id, batch.traj_id, batch.step_index, batch.anchor_id,
                                                  batch.reward, batch.valid, batch.nll)]
                t0 = time.perf_counter()
                reference_advantages(*lists, cfg=cfg, entropy=batch.entropy.tolist())
                loop = time.perf_counter() - t0
                loop_txt, speed_txt = f"{loop * 1e3:.1f}", f"{loop / best:.1f}x"
            mem_txt = f"{mem[name]:.1f}" if name in mem else "?"
            ratio = f"{best / seconds['gigpo']:.2f}" if "gigpo" in seconds else "-"  # target for hgpo/empg: <= 3
            print(f"{label:>9} {n:>8} {cfg.estimator:>14} {best * 1e3:>9.2f} {mem_txt:>8} {loop_txt:>9} {speed_txt:>8} "
                  f"{ratio:>8}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
