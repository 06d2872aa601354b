"""Checks of a multi-node rehearsal run (``REHEARSAL=1 NUM_NODES=2``): every node used, 0 failed episodes, all
iterations.

    python -m gaca_openrlhf.cpu.rehearsal_check SAVE_PATH --num-nodes 2 [--iterations 2]

Reads ``SAVE_PATH/rehearsal.json`` (written by :func:`gaca_openrlhf.cpu.rehearsal.write_report`: the Ray nodes of the
cluster and, per role, the node each policy rank, reference rank, vLLM engine, env worker and the trainer ran on) and
``SAVE_PATH/metrics.jsonl``. Prints one PASS/FAIL line per check, exits 1 if any failed. examples/gpu (``run_train``
in ``_common.sh``, via ``_rehearsal_cluster.sh``) runs it after the training of a multi-node rehearsal, so that run
fails unless the placement really spread over the nodes. Standard library only (no Ray): usable on any copy of a
run folder.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from typing import List, Optional, Sequence, Tuple

#: roles that must be spread over every node: one policy rank, one reference rank and one vLLM engine per GPU
#: bundle of OpenRLHF's colocated placement group, and the bundles span all nodes
SPREAD_ROLES = ("policy", "reference", "engines")

Check = Tuple[bool, str]


def _short(node_id: str) -> str:
    return (node_id or "?")[:8]


def node_checks(report: dict, num_nodes: int, env_name: Optional[str] = None) -> List[Check]:
    """(passed, description) per check of ``rehearsal.json``'s placement against ``num_nodes`` nodes."""
    out: List[Check] = []
    nodes = [n for n in report.get("nodes") or [] if n.get("alive", True)]
    ids = {n.get("node_id") for n in nodes}
    gpus = [n.get("gpus") for n in nodes]
    out.append((len(nodes) == num_nodes,
                f"Ray cluster: {len(nodes)} alive nodes (need {num_nodes}), logical GPUs per node {gpus}"))
    placement = report.get("placement")
    if not isinstance(placement, dict):
        out.append((False, "rehearsal.json records no placement (on which node each actor ran)"
                    + (f": {report['placement_error']}" if report.get("placement_error") else "")))
        return out
    for role in SPREAD_ROLES:
        where = placement.get(role) or []
        used = {n for n in where if n}
        ok = bool(where) and all(where) and used <= ids and len(used) == num_nodes
        out.append((ok, f"{role}: {len(where)} on nodes {[_short(n) for n in where]} -- {len(used)} distinct "
                        f"node(s) of the cluster (need all {num_nodes})"))
    trainer = placement.get("trainer") or []
    out.append((bool(trainer) and all(n in ids for n in trainer),
                f"trainer on node {[_short(n) for n in trainer]} of the cluster"))
    workers = placement.get("env_workers") or []
    counts = {_short(n): workers.count(n) for n in sorted(set(workers))}
    note = _workers_note(env_name)
    if note and not workers:
        out.append((True, f"env workers: none ({note})"))
    else:
        ok = bool(workers) and all(n in ids for n in workers)
        out.append((ok, f"env workers: {len(workers)} on nodes of the cluster, per node {counts}"
                        + (f" ({placement['env_workers_error']})" if placement.get("env_workers_error") else "")))
    return out


def metrics_checks(rows: List[dict], iterations: int, validated: bool = False) -> List[Check]:
    """The records' checks; ``validated`` (the run has a validation panel, ``--eval.dataset``): the last iteration's
    record carries the panel's ``val/*`` figures, none of its episodes failed."""
    failed = [r.get("rollout/failed_episodes") for r in rows]
    out = [(len(rows) == iterations, f"metrics.jsonl holds {len(rows)} iterations (need {iterations})"),
           (bool(rows) and all(v == 0 for v in failed),
            f"rollout/failed_episodes per iteration: {failed} (need all 0)")]
    if validated:
        last = rows[-1] if rows else {}
        val = {k: last[k] for k in ("val/success_rate", "val/num_episodes", "val/failed_episodes") if k in last}
        out.append((len(val) == 3 and val["val/num_episodes"] > 0 and val["val/failed_episodes"] == 0,
                    f"validation after the last iteration: {val or 'no val/* in its record'} (need episodes, 0 failed)"))
    return out


def _workers_note(env_name: Optional[str]) -> Optional[str]:
    """Why a rehearsal of ``env_name`` may place no env workers (``EnvSpec.rehearsal_workers_note``), or None."""
    if not env_name:
        return None
    from agents.registry import spec

    try:
        return spec(env_name).rehearsal_workers_note
    except KeyError:
        return None


def _option(save_path: str, name: str) -> Optional[str]:
    """The last value of option ``name`` in the run's ``command.sh`` (None: no such option or file)."""
    path = os.path.join(save_path, "command.sh")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        argv = shlex.split(f.read())
    values = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == name]
    return values[-1] if values else None


def _env_name(save_path: str) -> Optional[str]:
    return _option(save_path, "--env.name")


def checks(save_path: str, num_nodes: int, iterations: int) -> List[Check]:
    out: List[Check] = []
    path = os.path.join(save_path, "rehearsal.json")
    if not os.path.exists(path):
        out.append((False, f"{path} missing (not a rehearsal run, or it failed before writing it)"))
    else:
        with open(path) as f:
            out += node_checks(json.load(f), num_nodes, _env_name(save_path))
    rows = []
    metrics = os.path.join(save_path, "metrics.jsonl")
    if os.path.exists(metrics):
        with open(metrics) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    out += metrics_checks(rows, iterations, validated=_option(save_path, "--eval.dataset") is not None)
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("save_path")
    p.add_argument("--num-nodes", type=int, required=True)
    p.add_argument("--iterations", type=int, default=2)
    a = p.parse_args(argv)
    results = checks(a.save_path, a.num_nodes, a.iterations)
    for ok, text in results:
        print(f"[{'PASS' if ok else 'FAIL'}] rehearsal: {text}")
    passed = all(ok for ok, _ in results)
    print(f"REHEARSAL {a.num_nodes} NODES {'PASS' if passed else 'FAIL'}: {sum(ok for ok, _ in results)}/"
          f"{len(results)} checks ({a.save_path})")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
