"""Pass/fail summary of a finished training run (``examples/gpu/smoke.sh`` calls it; usable on any run).

    python examples/gpu/smoke_check.py SAVE_PATH [--iterations 2] [--max-logprob-gap 0.1] [--mini-batch-steps N]

Reads ``SAVE_PATH/metrics.jsonl`` (one line per iteration), the checkpoints under ``SAVE_PATH/ckpt`` and, after a
rehearsal, ``SAVE_PATH/rehearsal.json``. Prints one PASS/FAIL line per check and exits 1 if any failed.
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


def checks(save_path: str, iterations: int, max_gap: float, mini_batch_steps: int = 0) -> list[tuple[bool, str]]:
    """(passed, description) for each check."""
    rows = load_metrics(save_path)
    out: list[tuple[bool, str]] = []

    def add(ok: bool, text: str) -> None:
        out.append((bool(ok), text))

    add(len(rows) >= iterations, f"metrics.jsonl holds {len(rows)} iterations (need {iterations})")
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
        add(bool(engines) and all(p["generate"] > 0 and p["update_weights"] >= iterations for p in per),
            f"rehearsal: every vLLM engine generated and received each weight sync: {per}")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("save_path")
    p.add_argument("--iterations", type=int, default=2)
    p.add_argument("--max-logprob-gap", type=float, default=0.1)
    p.add_argument("--mini-batch-steps", type=int, default=0,
                   help="default: --gaca.mini_batch_steps of SAVE_PATH/command.sh (0: skip that check)")
    a = p.parse_args(argv)
    if not a.mini_batch_steps:
        a.mini_batch_steps = int(command_option(a.save_path, "--gaca.mini_batch_steps") or 0)
    results = checks(a.save_path, a.iterations, a.max_logprob_gap, a.mini_batch_steps)
    for ok, text in results:
        print(f"[{'PASS' if ok else 'FAIL'}] {text}")
    passed = all(ok for ok, _ in results)
    print(f"SMOKE {'PASS' if passed else 'FAIL'}: {sum(ok for ok, _ in results)}/{len(results)} checks ({a.save_path})")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
