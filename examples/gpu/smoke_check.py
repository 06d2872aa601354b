"""Pass/fail summary of a finished training run (``examples/gpu/smoke.sh`` calls it; usable on any run).

    python examples/gpu/smoke_check.py SAVE_PATH [--iterations 2] [--max-logprob-gap 0.5] [--mini-batch-steps N]
        [--sync-gap-ratio 5] [--sync-gap-floor 0.1] [--label LEG] [--resumed-from K --before METRICS_BEFORE_RESUME]
    python examples/gpu/smoke_check.py --memory LEG=CSV [--memory LEG=CSV ...] [--phases RUN_DIR ...]

Reads ``SAVE_PATH/metrics.jsonl`` (one line per iteration), the checkpoints under ``SAVE_PATH/ckpt`` and, after a
rehearsal, ``SAVE_PATH/rehearsal.json``. Prints one PASS/FAIL line per check and exits 1 if any failed.
``--resumed-from K``: the run was resumed (``RESUME=1``) from its checkpoint after iteration K; ``--before`` is a copy
of its ``metrics.jsonl`` taken before the resume, whose records must come through unchanged. ``--memory``: the peak
memory per GPU of each leg's ``nvidia-smi --query-gpu=timestamp,index,memory.used,memory.total
--format=csv,noheader,nounits`` samples, and over all legs; with ``--phases RUN_DIR``, also per iteration phase
(rollout, experience, training, sync, other), from the phase windows the trainer writes into each metrics.jsonl record
(information, no check).
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


def command_option(save_path: str, *options: str) -> str | None:
    """The last value given to any of ``options`` in ``SAVE_PATH/command.sh`` (written by the launch scripts), if any:
    the spellings of one option (``--run.mini_batch_steps`` and its deprecated ``--gaca.mini_batch_steps``) count as
    one, the last occurrence of either winning, as in train_ppo's parser; ``--opt value`` and ``--opt=value``."""
    path = os.path.join(save_path, "command.sh")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        argv = shlex.split(f.read())
    values = []
    for i, a in enumerate(argv):
        name, eq, value = a.partition("=")
        if name not in options:
            continue
        if eq:
            values.append(value)
        elif i + 1 < len(argv):
            values.append(argv[i + 1])
    return values[-1] if values else None


#: the spellings of the mini-batch option in a launch command: its name, and the deprecated one it had before the
#: trainer's options moved to --run.* (gaca_openrlhf/trainer/run_options.py)
MINI_BATCH_OPTIONS = ("--run.mini_batch_steps", "--gaca.mini_batch_steps")


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


#: a sync gap passes when it is within max(GAP_FLOOR, GAP_RATIO x its baseline) (README "Smoke test"): numerical
#: noise between bf16 vLLM and DeepSpeed kernels is a few hundredths of a nat on average, a broken sync (stale or
#: garbage weights, another model or dtype) gives gaps of nats
GAP_RATIO, GAP_FLOOR = 5.0, 0.1


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _fmt(vals) -> list:
    return [round(v, 4) if _num(v) and math.isfinite(v) else v for v in vals]


def sync_checks(rows: list[dict], max_gap: float = 0.0, ratio: float = GAP_RATIO,
                floor: float = GAP_FLOOR) -> list[tuple[bool, str]]:
    """The weight sync, judged against the rollout-time baseline rather than a constant.

    ``sync/logprob_gap_rollout`` (the trainer's experience pass vs vLLM's rollout log-probs, thousands of tokens,
    same weights) is the numerical disagreement of the two engines with *correct* weights: the baseline.
    ``sync/logprob_gap`` (a probe of <= 4 prompts x 16 tokens right after the sync, at temperature 1.0) is a small
    sample of the same quantity on the new weights, so it is allowed ``ratio`` times its iteration's baseline (at
    least ``floor``; under ``max_gap`` when given: the training's own hard limit). The next iteration's rollout-time
    gap measures the synced weights over thousands of tokens: it must stay within ``ratio`` times iteration 1's,
    where vLLM and the trainer both loaded the weights from disk (no sync yet)."""
    out: list[tuple[bool, str]] = []
    base = [r.get("sync/logprob_gap_rollout") for r in rows]
    gaps = [r.get("sync/logprob_gap") for r in rows]
    limits = [max(floor, ratio * b) if _num(b) and math.isfinite(b) else floor for b in base]
    if max_gap:
        limits = [min(lim, max_gap) for lim in limits]
    ok = all(_num(g) and 0 <= g <= lim for g, lim in zip(gaps, limits))
    out.append((ok, f"weight sync, probe: sync/logprob_gap right after each sync {_fmt(gaps)} within "
                    f"max({floor:g}, {ratio:g} x the iteration's rollout-time gap sync/logprob_gap_rollout "
                    f"{_fmt(base)}){f', at most {max_gap:g}' if max_gap else ''}: limits {_fmt(limits)}"))
    if len(rows) >= 2:
        ref = base[0]
        lim = max(floor, ratio * ref) if _num(ref) and math.isfinite(ref) else floor
        later = base[1:]
        ok = _num(ref) and all(_num(b) and 0 <= b <= lim for b in later)
        out.append((ok, f"weight sync, rollouts: rollout-time gap after each sync {_fmt(later)} (thousands of tokens "
                        f"on the synced weights) within max({floor:g}, {ratio:g} x iteration 1's {_fmt([ref])[0]}, "
                        f"before any sync): limit {_fmt([lim])[0]}"))
    return out


def checks(save_path: str, iterations: int, max_gap: float, mini_batch_steps: int = 0,
           resumed_from: int = 0, before: list[dict] | None = None, gap_ratio: float = GAP_RATIO,
           gap_floor: float = GAP_FLOOR) -> list[tuple[bool, str]]:
    """(passed, description) for each check; with ``resumed_from``, also :func:`resume_checks`. ``max_gap``: the
    hard limit of the sync probe (0: none), ``gap_ratio``/``gap_floor``: :func:`sync_checks`."""
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
    out += sync_checks(rows, max_gap, gap_ratio, gap_floor)
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


def read_memory_samples(path: str) -> list[tuple[float | None, int, int, int | None]]:
    """(Unix time or None, GPU index, MiB used, MiB total or None) of each nvidia-smi line
    ``[timestamp, ]index, memory.used[, memory.total]`` (smoke.sh queries the timestamp first: nvidia-smi's
    ``YYYY/MM/DD HH:MM:SS.mmm``, the node's local time); lines that are not numbers (an error message, ``[N/A]``)
    are skipped."""
    samples = []
    if not os.path.exists(path):
        return samples
    with open(path) as f:
        for line in f:
            parts = [x.strip() for x in line.split(",")]
            t = _nvidia_smi_time(parts[0]) if parts and "/" in parts[0] else None
            if t is not None:
                parts = parts[1:]
            try:
                fields = [int(float(x)) for x in parts]
            except ValueError:
                continue
            if len(fields) < 2:
                continue
            samples.append((t, fields[0], fields[1], fields[2] if len(fields) > 2 else None))
    return samples


def _nvidia_smi_time(text: str) -> float | None:
    """Unix seconds of nvidia-smi's ``timestamp`` field (local time), None if it is not one."""
    import datetime

    for fmt in ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S"):
        try:
            return datetime.datetime.strptime(text, fmt).timestamp()
        except ValueError:
            continue
    return None


def read_memory_csv(path: str) -> dict[int, tuple[int, int | None]]:
    """GPU index -> (peak MiB used, MiB total) of the samples in ``path`` (:func:`read_memory_samples`)."""
    peaks: dict[int, tuple[int, int | None]] = {}
    for _, gpu, used, total in read_memory_samples(path):
        peaks[gpu] = (max(peaks.get(gpu, (0, None))[0], used), total)
    return peaks


#: the phases of an iteration whose wall-clock windows the trainer writes into each metrics.jsonl record as
#: ``timing/unix_<phase>_start`` / ``_end`` (gaca_openrlhf/trainer/metrics.py, PHASES; a test keeps them equal)
PHASES = ("rollout", "experience", "training", "sync")
OTHER_PHASE = "other"  # start-up, model loads, checkpoint saves, evaluation: no iteration phase


def phase_windows(records: list[dict]) -> list[tuple[float, float, str]]:
    """(start, end, phase) of every phase window in ``records`` (metrics.jsonl lines), in time order."""
    out = []
    for r in records:
        for phase in PHASES:
            start, end = r.get(f"timing/unix_{phase}_start"), r.get(f"timing/unix_{phase}_end")
            if isinstance(start, (int, float)) and isinstance(end, (int, float)) and end >= start:
                out.append((float(start), float(end), phase))
    return sorted(out)


def phase_peaks(samples: list[tuple[float | None, int, int, int | None]],
                windows: list[tuple[float, float, str]]) -> dict[str, dict[int, int]]:
    """Phase -> GPU -> peak MiB used among the timed ``samples`` inside that phase's windows (those in none:
    :data:`OTHER_PHASE`); samples without a time are left out."""
    import bisect

    starts = [w[0] for w in windows]
    peaks: dict[str, dict[int, int]] = {}
    for t, gpu, used, _ in samples:
        if t is None:
            continue
        i = bisect.bisect_right(starts, t) - 1
        # a sample on the boundary of two windows belongs to the later one; overlapping windows do not occur
        phase = windows[i][2] if i >= 0 and t <= windows[i][1] else OTHER_PHASE
        by_gpu = peaks.setdefault(phase, {})
        by_gpu[gpu] = max(by_gpu.get(gpu, 0), used)
    return peaks


def phase_summary(samples, records: list[dict]) -> list[str]:
    """The per-phase table of :func:`phase_peaks` (rows in iteration order, then ``other``), or one line saying why
    there is none."""
    windows = phase_windows(records)
    if not windows:
        return ["memory per phase: n/a (no phase windows in metrics.jsonl: a trainer older than this script)"]
    peaks = phase_peaks(samples, windows)
    if not peaks:
        return ["memory per phase: n/a (no timed nvidia-smi samples)"]
    gpus = sorted({g for by_gpu in peaks.values() for g in by_gpu})
    rows = [p for p in (*PHASES, OTHER_PHASE) if p in peaks]
    width = max(len(p) for p in rows + ["phase"])
    lines = ["memory per phase: peak MiB used per GPU (nvidia-smi samples inside each phase's windows)",
             f"  {'phase':<{width}} " + " ".join(f"{'GPU' + str(g):>7}" for g in gpus)]
    for p in rows:
        lines.append(f"  {p:<{width}} " + " ".join(f"{peaks[p].get(g, '-'):>7}" for g in gpus))
    return lines


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
    p.add_argument("--max-logprob-gap", type=float, default=0.0,
                   help="hard limit of sync/logprob_gap (smoke.sh: the training's --run.max_logprob_gap; 0: none)")
    p.add_argument("--sync-gap-ratio", type=float, default=GAP_RATIO,
                   help="a sync gap may be this many times its rollout-time baseline (sync/logprob_gap_rollout)")
    p.add_argument("--sync-gap-floor", type=float, default=GAP_FLOOR,
                   help="a sync gap under this always passes (numerical noise)")
    p.add_argument("--mini-batch-steps", type=int, default=0,
                   help="default: --run.mini_batch_steps (or its old name --gaca.mini_batch_steps) of "
                        "SAVE_PATH/command.sh (0: skip that check)")
    p.add_argument("--label", default="", help="prefix of each line (smoke.sh: the leg); no SMOKE line at the end")
    p.add_argument("--resumed-from", type=int, default=0, help="the run was resumed after this iteration")
    p.add_argument("--before", default=None, help="with --resumed-from: metrics.jsonl as it was before the resume")
    p.add_argument("--memory", action="append", default=[], metavar="LEG=CSV",
                   help="print the peak memory per GPU of each leg's nvidia-smi samples (no checks)")
    p.add_argument("--phases", action="append", default=[], metavar="RUN_DIR",
                   help="with --memory: also the peaks per iteration phase, from the phase windows of each "
                        "RUN_DIR/metrics.jsonl")
    a = p.parse_args(argv)
    if a.memory:
        legs = [tuple(m.split("=", 1)) if "=" in m else (os.path.basename(m), m) for m in a.memory]
        print("\n".join(memory_summary(legs)))
        if a.phases:
            samples = [s for _, path in legs for s in read_memory_samples(path)]
            print("\n".join(phase_summary(samples, [r for run in a.phases for r in load_metrics(run)])))
        return 0
    if not a.save_path:
        p.error("SAVE_PATH is required (or --memory)")
    if a.resumed_from and not a.before:
        p.error("--resumed-from needs --before (metrics.jsonl as it was before the resume)")
    if not a.mini_batch_steps:
        a.mini_batch_steps = int(command_option(a.save_path, *MINI_BATCH_OPTIONS) or 0)
    before = []
    if a.before and os.path.exists(a.before):
        with open(a.before) as f:
            before = [json.loads(line) for line in f if line.strip()]
    results = checks(a.save_path, a.iterations, a.max_logprob_gap, a.mini_batch_steps, a.resumed_from, before,
                     a.sync_gap_ratio, a.sync_gap_floor)
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
