"""Writing records: ``collect`` copies what the README needs from a quickstart output folder into ``results/NAME``;
``merge`` makes one record of parts of one setting (single-seed runs, or methods run apart, as a compare)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from .files import EPISODE_KEYS, PANELS, _label_of, _read_panel
from .machine import cpu_model


def _episodes(eval_dir: Path) -> list[dict]:
    out = []
    for f in sorted(eval_dir.glob("seed*.json")):
        data = json.loads(f.read_text())
        out += [{k: ep.get(k) for k in EPISODE_KEYS} for ep in data.get("episodes", [])]
    return out


def collect(out_dir, dest, what: str = "") -> dict:
    """Copy what the README needs from a quickstart output folder into ``dest`` (replaced if it exists)."""
    out_dir, dest = Path(out_dir), Path(dest)
    run = json.loads((out_dir / "run.json").read_text())
    if dest.exists():
        shutil.rmtree(dest)
    labels = sorted(p.name for p in (out_dir / "eval").iterdir() if p.is_dir()) if (out_dir / "eval").is_dir() else []
    runs = {}
    for label in labels:
        ev = out_dir / "eval" / label
        panels = {"test": ev, **{p: ev / p for p, _ in PANELS[1:] if (ev / p).is_dir()}}
        # the validation curve: intermediate checkpoints on the validation panel (quickstart --val-every)
        panels.update({f"val_step{d.name[4:]}": d for d in sorted((ev / "val_curve").glob("step*")) if d.is_dir()})
        for panel, folder in panels.items():
            eps = _episodes(folder)
            if eps:
                path = dest / "episodes" / label / f"{panel}.jsonl"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in eps))
        info = {"eval_wall_s": _read_float(ev / "wall_s.txt")}
        run_label = _run_of(out_dir, label)
        run_dir = out_dir / "runs" / run_label
        if (run_dir / "metrics.jsonl").is_file():
            (dest / "metrics").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(run_dir / "metrics.jsonl", dest / "metrics" / f"{run_label}.jsonl")
            method, seed = run_label.rsplit("_seed", 1)
            info.update(method=method, seed=int(seed), rl_wall_s=_read_float(run_dir / "wall_s.txt"),
                        command=(run_dir / "command.txt").read_text().strip() if (run_dir / "command.txt").is_file()
                        else "")
        runs[label] = info
    cfg = run.get("config", {})
    record = {
        "what": what, "command": run.get("command"), "git_commit": run.get("git_commit"),
        "git_dirty": run.get("git_dirty"), "started_utc": run.get("started_utc"),
        "cpu": run.get("cpu_model") or cpu_model() + " (read at collection)", "cpus": run.get("cpus"),
        "dtypes": run.get("dtypes"),
        "seeds": run.get("seeds"), "config": cfg, "packages": run.get("packages"), "runs": runs,
        "sft": {k: v for k, v in (run.get("sft") or {}).items() if not isinstance(v, (dict, list))},
    }
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "record.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return record


def merge(sources, dest, what: str = "") -> dict:
    """One record of several: the same setting run by separate invocations (one training seed or method each, or a
    few), as ``collect`` wrote them (``results/<name>/<part>``). The parts must share the setting (every config key
    but ``rl_seeds`` and ``methods``, which the merged record unites), the CPU, the dtypes and the warm start, episode
    by episode on every panel; no run may be in two parts. Writes ``dest/record.json``, ``dest/episodes`` and
    ``dest/metrics`` (replacing only those: the parts may live inside ``dest``); the plain command's ``after_rl``
    label becomes ``<method>_seed<N>``."""
    sources, dest = [Path(x) for x in sources], Path(dest)
    if len(sources) < 2:
        raise ValueError("merge needs at least two records")
    recs = [json.loads((src / "record.json").read_text()) for src in sources]
    first = recs[0]
    from gaca_openrlhf.bench.quickstart.config import recorded_setting

    for src, rec in zip(sources[1:], recs[1:]):
        # a setting added after a part ran is read at the value that part implicitly had (IMPLICIT_BEFORE)
        keys = sorted(k for k in set(first.get("config", {})) | set(rec.get("config", {}))
                      if k not in ("rl_seeds", "methods")
                      and recorded_setting(first["config"], k) != recorded_setting(rec["config"], k))
        if keys:
            raise ValueError(f"{src} and {sources[0]} differ in setting: {', '.join(keys)} (not one record)")
        for key in ("cpu", "dtypes"):
            if rec.get(key) != first.get(key):
                raise ValueError(f"{src} and {sources[0]} differ in {key}: {rec.get(key)!r} vs {first.get(key)!r} "
                                 "(runs of different CPU families or dtypes are never one record)")
        for panel in sorted(f.stem for f in (sources[0] / "episodes" / "warm_start").glob("*.jsonl")):
            mine = sorted((e["task"], bool(e["won"]), e.get("steps")) for e in
                          _read_panel(sources[0] / "episodes" / "warm_start" / f"{panel}.jsonl"))
            other = src / "episodes" / "warm_start" / f"{panel}.jsonl"
            if not other.is_file() or sorted((e["task"], bool(e["won"]), e.get("steps"))
                                             for e in _read_panel(other)) != mine:
                raise ValueError(f"{src} and {sources[0]} have different warm-start episodes on panel {panel!r}")
    for sub in ("episodes", "metrics"):
        if (dest / sub).exists():
            shutil.rmtree(dest / sub)
    runs: dict = {}
    for src, rec in zip(sources, recs):
        for label, info in rec.get("runs", {}).items():
            new = _label_of(label, info)
            if new == "warm_start" and "warm_start" in runs:
                continue  # the same warm start (checked above): kept once, from the first part
            if new in runs:
                raise ValueError(f"run {new} is in two records ({src} and another): not one seed per run")
            runs[new] = dict(info, part=src.name)
            if (src / "episodes" / label).is_dir():
                shutil.copytree(src / "episodes" / label, dest / "episodes" / new)
        for f in sorted((src / "metrics").glob("*.jsonl")) if (src / "metrics").is_dir() else []:
            (dest / "metrics").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, dest / "metrics" / f.name)
    seeds = sorted({info["seed"] for info in runs.values() if info.get("seed") is not None})
    methods = sorted({info["method"] for info in runs.values() if info.get("method")})
    commits = list(dict.fromkeys(str(r.get("git_commit")) for r in recs))
    record = {
        "what": what or first.get("what", ""), "command": first.get("command"),
        "commands": [r.get("command") for r in recs], "parts": [src.name for src in sources],
        "git_commit": commits[0] if len(commits) == 1 else ", ".join(c[:7] for c in commits),
        "git_dirty": any(bool(r.get("git_dirty")) for r in recs),
        "started_utc": min(str(r.get("started_utc")) for r in recs), "cpu": first.get("cpu"),
        "cpus": first.get("cpus"), "dtypes": first.get("dtypes"), "seeds": {"rl": seeds},
        "config": dict(first.get("config", {}), rl_seeds=seeds, methods=methods), "packages": first.get("packages"),
        "runs": runs,
        "sft": first.get("sft", {}),
    }
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "record.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return record


def _run_of(out_dir: Path, label: str) -> str:
    """The RL run folder (``runs/<method>_seed<N>``) an evaluation label belongs to: the label itself under
    ``--compare``; for the plain command's ``after_rl`` its one run (the quickstart's phase_eval pairs them alike)."""
    runs = sorted(p.name for p in (out_dir / "runs").glob("*_seed*") if p.is_dir()) if (out_dir / "runs").is_dir() \
        else []
    if label == "after_rl" and label not in runs and len(runs) == 1:
        return runs[0]
    return label


def _read_float(path: Path):
    try:
        return float(path.read_text())
    except (OSError, ValueError):
        return None
