"""Pass/fail summary of a finished training run (``examples/gpu/smoke.sh`` calls it; usable on any run).

    python examples/gpu/smoke_check.py SAVE_PATH [--iterations 2] [--max-logprob-gap 0.1] [--mini-batch-steps N]
        [--label LEG] [--resumed-from K --before METRICS_BEFORE_RESUME]
    python examples/gpu/smoke_check.py --memory LEG=CSV [--memory LEG=CSV ...]

Reads ``SAVE_PATH/metrics.jsonl`` (one line per iteration), the checkpoints under ``SAVE_PATH/ckpt`` and, after a
rehearsal, ``SAVE_PATH/rehearsal.json``. Prints one PASS/FAIL line per check and exits 1 if any failed.
``--resumed-from K``: the run was resumed (``RESUME=1``) from its checkpoint after iteration K; ``--before`` is a copy
of its ``metrics.jsonl`` taken before the resume, whose records must come through unchanged. ``--memory``: the peak
memory per GPU of each leg's ``nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv,noheader,nounits``
samples, and over all legs (information, no check).
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import os
import shlex
import sys


def load_metrics(save_path: str) -> list[dict]:
    path = os.path.join(save_path, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def command_option(save_path: str, option: str) -> str | None:
    """The last value of ``option`` in ``SAVE_PATH/command.sh`` (written by the launch scripts), if any."""
    path = os.path.join(save_path, "command.sh")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        argv = shlex.split(f.read())
    values = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == option]
    return values[-1] if values else None


def resume_checks(save_path: str, iterations: int, resumed_from: int, before: list[dict]) -> list[tuple[bool, str]]:
    """A run resumed from its checkpoint after iteration ``resumed_from`` and trained up to ``iterations``: its
    ``metrics.jsonl`` holds each iteration once, the first run's records (``before``) unchanged, nothing dropped."""
    rows = load_metrics(save_path)
    its = [r.get("iteration") for r in rows]
    want = list(range(1, iterations + 1))
    def same(rs: list[dict]) -> list[str]:  # compared as JSON text: a NaN equals itself there
        return [json.dumps(r, sort_keys=True) for r in rs]

    kept = rows[:resumed_from]
    dropped = sorted(os.path.basename(p) for p in glob.glob(os.path.join(save_path, "metrics.jsonl.dropped-*")))
    return [
        (its == want, f"metrics.jsonl iterations {its}: each of {want} once, in order (iteration {iterations} trained, "
                      f"no record of the first run repeated or lost)"),
        (len(before) == resumed_from and same(kept) == same(before),
         f"iterations 1-{resumed_from} are the first run's {len(before)} records, unchanged (training continued from "
         f"its checkpoint instead of starting over)"),
        (not dropped, f"no metrics records set aside by the resume: {dropped or 'none'}"),
    ]


def checks(save_path: str, iterations: int, max_gap: float, mini_batch_steps: int = 0,
           resumed_from: int = 0, before: list[dict] | None = None) -> list[tuple[bool, str]]:
    """(passed, description) for each check; with ``resumed_from``, also :func:`resume_checks`."""
    rows = load_metrics(save_path)
    out: list[tuple[bool, str]] = []

    def add(ok: bool, text: str) -> None:
        out.append((bool(ok), text))

    add(len(rows) >= iterations, f"metrics.jsonl holds {len(rows)} iterations (need {iterations})")
    if resumed_from:
        out += resume_checks(save_path, iterations, resumed_from, before or [])
    if not rows:
        return out
    failed = [r.get("rollout/failed_episodes") for r in rows]
    add(all(v == 0 for v in failed), f"rollout/failed_episodes per iteration: {failed} (need all 0)")
    kl = [r.get("kl") for r in rows]
    add(all(isinstance(v, (int, float)) and math.isfinite(v) for v in kl), f"kl logged every iteration: {kl}")
    add(any(isinstance(v, (int, float)) and v != 0 for v in kl[1:] or kl),
        "kl non-zero after the first update (the policy moved away from the reference)")
    gaps = [r.get("sync/logprob_gap") for r in rows]
    add(all(isinstance(v, (int, float)) and 0 <= v < max_gap for v in gaps),
        f"sync/logprob_gap after each weight sync: {[round(g, 4) if g is not None else None for g in gaps]} "
        f"(limit {max_gap})")
    if mini_batch_steps:
        want = [math.ceil(r.get("rollout/num_step_samples", 0) / mini_batch_steps) for r in rows]
        got = [r.get("train/optimizer_steps") for r in rows]
        add(got == want, f"optimizer steps per iteration {got} = ceil(step samples / {mini_batch_steps}) {want}")
    ds_ckpts = sorted(glob.glob(os.path.join(save_path, "ckpt", "_actor", "global_step*")))
    hf_ckpts = sorted(glob.glob(os.path.join(save_path, "ckpt", "global_step*_hf")))
    add(bool(ds_ckpts), f"DeepSpeed checkpoints: {[os.path.basename(p) for p in ds_ckpts]}")
    add(bool(hf_ckpts) and all(os.path.exists(os.path.join(p, "config.json")) for p in hf_ckpts),
        f"HF checkpoints: {[os.path.basename(p) for p in hf_ckpts]}")
    add(os.path.exists(os.path.join(save_path, "config.json")), "final HF model saved in SAVE_PATH")
    rehearsal = os.path.join(save_path, "rehearsal.json")
    if os.path.exists(rehearsal):
        with open(rehearsal) as f:
            rep = json.load(f)
        engines = rep.get("engines", [])
        per = [{c: sum(1 for x in e["calls"] if x["call"] == c) for c in ("sleep", "wake_up", "update_weights")}
               | {"generate": e.get("generate_calls", 0)} for e in engines]
        syncs = iterations - resumed_from  # rehearsal.json is the last (the resumed) run's
        add(bool(engines) and all(p["generate"] > 0 and p["update_weights"] >= syncs for p in per),
            f"rehearsal: every vLLM engine generated and received each weight sync: {per}")
    return out


def read_memory_csv(path: str) -> dict[int, tuple[int, int | None]]:
    """GPU index -> (peak MiB used, MiB total) of nvidia-smi's ``index, memory.used[, memory.total]`` lines; lines
    that are not numbers (an error message, ``[N/A]``) are skipped."""
    peaks: dict[int, tuple[int, int | None]] = {}
    if not os.path.exists(path):
        return peaks
    with open(path) as f:
        for line in f:
            try:
                fields = [int(float(x)) for x in line.split(",")]
            except ValueError:
                continue
            if len(fields) < 2:
                continue
            gpu, used, total = fields[0], fields[1], fields[2] if len(fields) > 2 else None
            peak = peaks.get(gpu, (0, None))[0]
            peaks[gpu] = (max(peak, used), total)
    return peaks


def memory_summary(legs: list[tuple[str, str]]) -> list[str]:
    """A table of the peak MiB used per GPU in each leg (name, CSV path) and over all legs."""
    per_leg = [(name, read_memory_csv(path)) for name, path in legs]
    gpus = sorted({g for _, peaks in per_leg for g in peaks})
    if not gpus:
        return [f"memory sampling: no samples in {', '.join(p for _, p in legs)}"]
    width = max(len(n) for n, _ in per_leg + [("overall", {})])

    def row(name: str, cells: list[str]) -> str:
        return f"  {name:<{width}} " + " ".join(f"{c:>7}" for c in cells)

    lines = ["memory: peak MiB used per GPU of this node (nvidia-smi every 1 s)", row("leg", [f"GPU{g}" for g in gpus])]
    for name, peaks in per_leg:
        lines.append(row(name, [str(peaks[g][0]) if g in peaks else "-" for g in gpus]))
    overall = {g: max(p[g][0] for _, p in per_leg if g in p) for g in gpus}
    lines.append(row("overall", [str(overall[g]) for g in gpus]))
    totals = {g: next((p[g][1] for _, p in per_leg if g in p and p[g][1]), None) for g in gpus}
    if any(totals.values()):
        lines.append(row("of", [str(totals[g]) if totals[g] else "?" for g in gpus]))
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("save_path", nargs="?")
    p.add_argument("--iterations", type=int, default=2)
    p.add_argument("--max-logprob-gap", type=float, default=0.1)
    p.add_argument("--mini-batch-steps", type=int, default=0,
                   help="default: --gaca.mini_batch_steps of SAVE_PATH/command.sh (0: skip that check)")
    p.add_argument("--label", default="", help="prefix of each line (smoke.sh: the leg); no SMOKE line at the end")
    p.add_argument("--resumed-from", type=int, default=0, help="the run was resumed after this iteration")
    p.add_argument("--before", default=None, help="with --resumed-from: metrics.jsonl as it was before the resume")
    p.add_argument("--memory", action="append", default=[], metavar="LEG=CSV",
                   help="print the peak memory per GPU of each leg's nvidia-smi samples (no checks)")
    a = p.parse_args(argv)
    if a.memory:
        legs = [tuple(m.split("=", 1)) if "=" in m else (os.path.basename(m), m) for m in a.memory]
        print("\n".join(memory_summary(legs)))
        return 0
    if not a.save_path:
        p.error("SAVE_PATH is required (or --memory)")
    if a.resumed_from and not a.before:
        p.error("--resumed-from needs --before (metrics.jsonl as it was before the resume)")
    if not a.mini_batch_steps:
        a.mini_batch_steps = int(command_option(a.save_path, "--gaca.mini_batch_steps") or 0)
    before = []
    if a.before and os.path.exists(a.before):
        with open(a.before) as f:
            before = [json.loads(line) for line in f if line.strip()]
    results = checks(a.save_path, a.iterations, a.max_logprob_gap, a.mini_batch_steps, a.resumed_from, before)
    prefix = f"{a.label}: " if a.label else ""
    for ok, text in results:
        print(f"[{'PASS' if ok else 'FAIL'}] {prefix}{text}")
    passed = all(ok for ok, _ in results)
    if not a.label:
        print(f"SMOKE {'PASS' if passed else 'FAIL'}: {sum(ok for ok, _ in results)}/{len(results)} checks "
              f"({a.save_path})")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
