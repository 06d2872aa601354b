"""Reading runs: ``<run>/metrics.jsonl`` (one JSON record per iteration) and evaluation results (``eval*.json``).

Robust to what real runs leave behind: malformed or truncated lines (skipped and counted), ``null``/NaN/missing
keys (NaN), non-numeric values (ignored), resumed runs that append the same iteration again (the last record
of an iteration wins), records without ``iteration`` (numbered by position), rollout rounds the trainer skipped
because every episode failed (``rollout/skipped`` = 1: counted, kept out of the records).
"""
from __future__ import annotations

import glob
import json
import math
import os
from dataclasses import dataclass, field

NAN = float("nan")


def _num(value) -> float:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)  # "NaN", "Infinity" from other writers
        except ValueError:
            return NAN
    return NAN


@dataclass
class Run:
    name: str
    path: str
    records: list[dict] = field(default_factory=list)  # sorted by iteration, numeric values (NaN for null)
    bad_lines: int = 0
    evals: list[dict] = field(default_factory=list)  # loaded eval result files (+ "_file")
    warnings: list[str] = field(default_factory=list)

    @property
    def iterations(self) -> list[float]:
        return [r["iteration"] for r in self.records]

    def keys(self) -> set[str]:
        return {k for r in self.records for k in r}

    def series(self, key: str) -> tuple[list[float], list[float]]:
        """(iterations, values) with NaN where a record lacks the key."""
        return self.iterations, [r.get(key, NAN) for r in self.records]

    def finite(self, key: str) -> list[float]:
        return [v for v in self.series(key)[1] if math.isfinite(v)]


def read_metrics(path: str, skipped: list | None = None) -> tuple[list[dict], int]:
    """Records of a metrics.jsonl (numeric values only) and the number of unreadable lines.

    Records of skipped rollout rounds (``rollout/skipped``) are not iterations: they go to ``skipped`` (when a list
    is given) instead of the returned records."""
    by_iter: dict[float, dict] = {}
    bad = 0
    with open(path, errors="replace") as f:
        for pos, line in enumerate(f):
            line = line.strip()
            if not line:
                continue
            try:
                raw = json.loads(line)
            except ValueError:
                bad += 1
                continue
            if not isinstance(raw, dict):
                bad += 1
                continue
            rec = {}
            for k, v in raw.items():
                if v is None or isinstance(v, (int, float, bool)):
                    rec[k] = _num(v)
                elif isinstance(v, str):
                    x = _num(v)
                    if x == x or v.strip().lower() == "nan":  # numeric text only
                        rec[k] = x
            it = rec.get("iteration", NAN)
            if not math.isfinite(it):
                it = float(pos + 1)
            rec["iteration"] = it
            if rec.get("rollout/skipped", 0.0) > 0:
                if skipped is not None:
                    skipped.append(rec)
                continue
            by_iter[it] = rec  # a resumed run repeats iterations: the last one wins
    return [by_iter[k] for k in sorted(by_iter)], bad


def find_eval_files(run_dir: str) -> list[str]:
    pats = [os.path.join(run_dir, "eval*.json"), os.path.join(run_dir, "eval", "*.json"),
            os.path.join(run_dir, "eval*", "*.json")]
    files = sorted({os.path.abspath(p) for pat in pats for p in glob.glob(pat) if os.path.isfile(p)})
    return files


def read_eval(path: str) -> dict | None:
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or "success_rate" not in data:
        return None
    data["_file"] = path
    return data


def load_run(name: str, run_dir: str) -> Run:
    run = Run(name=name, path=os.path.abspath(run_dir))
    if not os.path.isdir(run_dir):
        raise FileNotFoundError(f"run {name!r}: folder {run_dir!r} does not exist")
    metrics = os.path.join(run_dir, "metrics.jsonl")
    if os.path.isfile(metrics):
        skipped: list[dict] = []
        run.records, run.bad_lines = read_metrics(metrics, skipped)
        if run.bad_lines:
            run.warnings.append(f"{run.bad_lines} unreadable line(s) in {metrics} skipped")
        if skipped:
            run.warnings.append(f"{len(skipped)} rollout round(s) left no step samples (every episode failed) and "
                                "made no update; see their records (rollout/skipped) in " + metrics)
    else:
        run.warnings.append(f"no metrics.jsonl in {run_dir}")
    for path in find_eval_files(run_dir):
        data = read_eval(path)
        if data is None:
            run.warnings.append(f"{path}: not an evaluation result, skipped")
        else:
            run.evals.append(data)
    return run


def parse_run_arg(text: str) -> tuple[str, str]:
    """``NAME=DIR`` (or just ``DIR``: the folder name is the run name)."""
    if "=" in text:
        name, path = text.split("=", 1)
        if not name or not path:
            raise ValueError(f"bad --run {text!r}: use NAME=DIR")
        return name, path
    return os.path.basename(os.path.normpath(text)), text
