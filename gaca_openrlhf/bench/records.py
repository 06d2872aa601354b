"""Committed run records (``results/``) and the README tables rendered from them.

Every number the README states about a CPU run comes from a small folder under ``results/`` that this module wrote
from a quickstart output folder and can read back without it:

    results/<name>/record.json                 what ran: command, commit, CPU, date, setting, seeds, runs, wall times
    results/<name>/episodes/<label>/<panel>.jsonl   one line per evaluation episode (task, seed, won, steps, ...)
    results/<name>/metrics/<label>.jsonl       the RL run's metrics.jsonl (one record per iteration)

``<label>`` is ``warm_start`` or ``<method>_seed<training seed>``; ``<panel>`` is ``test`` (valid_seen),
``test_unseen`` (valid_unseen), ``val`` (the validation panel, final model) or ``val_step<N>`` (the validation panel
after N RL iterations: the learning curve).

    python -m gaca_openrlhf.bench.records collect OUT_DIR results/NAME --what "one line"
    python -m gaca_openrlhf.bench.records merge results/NAME results/NAME/part1 results/NAME/part2 ...
    python -m gaca_openrlhf.bench.records render [--write]   # README tables from results/ (--write: update README)

``render`` replaces the text between ``<!-- results:NAME -->`` and ``<!-- /results:NAME -->`` in README.md with the
table of ``results/NAME``; without ``--write`` it exits 1 when the README disagrees (tests/gaca_openrlhf/bench/
test_records.py runs it). ``<!-- audit:NAME -->`` blocks get a committed credit audit's ``audit.md``.
``<!-- choice:KEY:NAME1,NAME2 -->`` blocks get the choice of setting KEY on the
validation panel among those records (:mod:`.choice`); ``<!-- chosen:KEY:NAME1,NAME2 -->`` blocks the compare with
each method at its chosen value (:func:`render_chosen`). Games are paired by their identity (task folder/trial), not
by where a machine keeps its data. Intervals: :mod:`gaca_openrlhf.report.stats` (crossed bootstrap over training seeds and
test games, fixed bootstrap seed, so the same records always render the same text).
"""
from __future__ import annotations

import argparse
import json
import platform
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PANELS = (("test", "test: valid_seen"), ("test_unseen", "test: valid_unseen"), ("val", "validation"))
EPISODE_KEYS = ("task", "task_type", "seed", "won", "steps", "valid_steps", "repeat_steps", "listed_steps",
                "admissible_steps", "failed")
METHOD_ORDER = ("grpo", "gigpo", "gaca", "hgpo", "empg")


def simd_label(flags: set[str]) -> str:
    """The widest matrix path among a CPU's ``/proc/cpuinfo`` flags, named as the records name CPU families: ``AMX``
    (Intel tile units, bf16), ``AVX512-bf16`` (AVX512 with bf16 dot products, e.g. AMD Zen 4), ``AVX512``, ``AVX2``.
    Each is named only when its own flag is there: an AVX512-bf16 CPU without AMX is not an AMX machine."""
    if "amx_bf16" in flags or "amx_tile" in flags:
        return "AMX"
    if "avx512_bf16" in flags:
        return "AVX512-bf16"
    if "avx512f" in flags:
        return "AVX512"
    return "AVX2" if "avx2" in flags else "no AVX2"


def cpu_model() -> str:
    """This machine's CPU model name and its matrix path (:func:`simd_label`; what decides the CPU backend's
    training dtype and, through rounding, the numbers a run gives)."""
    name = platform.processor() or ""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        name = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")), name)
        flags = next((ln.split(":", 1)[1].split() for ln in lines if ln.startswith("flags")), [])
        simd = simd_label(set(flags))
    except OSError:
        simd = "?"
    return f"{name} ({simd})"


def machine_line(cpu: str, dtypes: dict | None) -> str:
    """The CPU and, where the run recorded them (run.json's ``dtypes``, since 2026-12-04), the dtype each phase
    computed in: results move with both (the CPU backend trains in bf16 on AVX512-bf16/AMX CPUs, fp32 elsewhere)."""
    if not dtypes:
        return cpu
    return cpu + "; dtypes: " + ", ".join(f"{phase} {dtypes[phase]}" for phase in ("sft", "rl", "eval") if phase in dtypes)


# ------------------------------------------------------------------------------------------------ collect
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


def _label_of(label: str, info: dict) -> str:
    """A run's label as a multi-seed record names it: the plain command's ``after_rl`` becomes
    ``<method>_seed<N>`` (its record's ``runs`` entry names both)."""
    if label == "after_rl" and info.get("method") is not None and info.get("seed") is not None:
        return f"{info['method']}_seed{info['seed']}"
    return label


def merge(sources, dest, what: str = "") -> dict:
    """One record of several: the same setting run by separate invocations, one training seed (or a few) each, as
    ``collect`` wrote them (``results/<name>/<part>``). The parts must share the setting (every config key but
    ``rl_seeds``), the CPU, the dtypes and the warm start, episode by episode on every panel; no run may be in two
    parts. Writes ``dest/record.json``, ``dest/episodes`` and ``dest/metrics`` (replacing only those: the parts may
    live inside ``dest``); the plain command's ``after_rl`` label becomes ``<method>_seed<N>``."""
    sources, dest = [Path(x) for x in sources], Path(dest)
    if len(sources) < 2:
        raise ValueError("merge needs at least two records")
    recs = [json.loads((src / "record.json").read_text()) for src in sources]
    first = recs[0]
    for src, rec in zip(sources[1:], recs[1:]):
        keys = sorted(k for k in set(first.get("config", {})) | set(rec.get("config", {}))
                      if k != "rl_seeds" and first["config"].get(k) != rec["config"].get(k))
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
    commits = list(dict.fromkeys(str(r.get("git_commit")) for r in recs))
    record = {
        "what": what or first.get("what", ""), "command": first.get("command"),
        "commands": [r.get("command") for r in recs], "parts": [src.name for src in sources],
        "git_commit": commits[0] if len(commits) == 1 else ", ".join(c[:7] for c in commits),
        "git_dirty": any(bool(r.get("git_dirty")) for r in recs),
        "started_utc": min(str(r.get("started_utc")) for r in recs), "cpu": first.get("cpu"),
        "cpus": first.get("cpus"), "dtypes": first.get("dtypes"), "seeds": {"rl": seeds},
        "config": dict(first.get("config", {}), rl_seeds=seeds), "packages": first.get("packages"), "runs": runs,
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


# ------------------------------------------------------------------------------------------------ render
def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def setting_line(cfg: dict, cpu: str) -> str:
    """The setting every number of a record carries (data, subset, model, step cap, CPU)."""
    from agents.registry import DEFAULT_ENV, spec

    data = spec(cfg.get("env", DEFAULT_ENV)).quickstart.setting_data(cfg)  # the environment's own words
    return (f"{data}; {cfg.get('max_steps')}-step cap; the quickstart model of size `{cfg.get('model_size')}` "
            f"(SFT warm start); RL {cfg.get('rl_iterations')} iterations x {cfg.get('rl_tasks_per_iter')} tasks x "
            f"n={cfg.get('rl_n')}, lr {cfg.get('rl_lr')}, temperature {cfg.get('rl_temperature')}, validity rule "
            f"`{cfg.get('rl_validity')}`" + (" (reward shaping: off-list actions penalised)"
                                              if cfg.get("rl_validity") == "admissible" else "")
            + f"; evaluation temperature {cfg.get('eval_temperature')}; CPU: {cpu}")


def _read_panel(path: Path) -> list[dict]:
    """A panel's episodes with ``task`` reduced to the game's identity (:func:`.choice.game_id`), so that records
    written on machines with another data folder pair game by game; two games with one identity are an error."""
    from .choice import game_id

    episodes = _read_jsonl(path)
    tasks = {str(ep["task"]) for ep in episodes}
    ids = {game_id(t) for t in tasks}
    if len(ids) != len(tasks):
        raise ValueError(f"{path}: {len(tasks)} games but {len(ids)} game identities (task folder/trial)")
    return [dict(ep, task=game_id(ep["task"])) for ep in episodes]


def _matrices(rec_dir: Path, panel: str):
    """{method: (seeds x games) success matrix} and the warm start's (1 x games), over the same games."""
    from gaca_openrlhf.report.stats import success_matrix

    ep_root = rec_dir / "episodes"
    warm_file = ep_root / "warm_start" / f"{panel}.jsonl"
    if not warm_file.is_file():
        return None, {}
    warm, games = success_matrix({0: _read_panel(warm_file)})
    by_method: dict[str, dict[int, list]] = {}
    for d in sorted(ep_root.iterdir()):
        if d.name == "warm_start" or not (d / f"{panel}.jsonl").is_file():
            continue
        method, seed = d.name.rsplit("_seed", 1)
        by_method.setdefault(method, {})[int(seed)] = _read_panel(d / f"{panel}.jsonl")
    mats = {m: success_matrix(v, games)[0] for m, v in by_method.items()}
    return warm, mats


def _order(methods) -> list[str]:
    return sorted(methods, key=lambda m: (METHOD_ORDER.index(m) if m in METHOD_ORDER else 99, m))


def _table_lines(panels, mats_by_panel: dict, label=str.upper) -> list[str]:
    """The success table (warm start, then one row per method: success and gain on each panel) and the paired
    differences between methods; ``mats_by_panel``: {panel: (warm matrix, {method: matrix})}."""
    from gaca_openrlhf.report.stats import difference, interval

    header = "| | training seeds | " + " | ".join(
        f"{title} ({mats_by_panel[p][0].shape[1]} games): success % [95% CI] / gain (points)" for p, title in panels)
    lines = [header + " |", "|---|---|" + "---|" * len(panels)]
    all_methods: set = set()
    for p, _ in panels:
        all_methods |= set(mats_by_panel[p][1])
    warm_cells = [interval(mats_by_panel[p][0]).fmt_level() for p, _ in panels]
    lines.append("| warm start | - | " + " | ".join(warm_cells) + " |")
    for m in _order(all_methods):
        cells, seeds = [], "-"
        for p, _ in panels:
            warm, mats = mats_by_panel[p]
            if m not in mats:
                cells.append("-")
                continue
            seeds = str(mats[m].shape[0])
            cells.append(f"{interval(mats[m]).fmt_level()} / {difference(mats[m], warm).fmt()}")
        lines.append(f"| {label(m)} | {seeds} | " + " | ".join(cells) + " |")
    methods = _order(all_methods)
    pairs = [(a, b) for i, a in enumerate(methods) for b in methods[:i]]
    if pairs:
        lines += ["", "Paired differences (points; games shared, seeds resampled per method): "
                  + "; ".join(f"{label(a)} - {label(b)}: " + ", ".join(
                      f"{title} {difference(mats_by_panel[p][1][a], mats_by_panel[p][1][b]).fmt()}"
                      for p, title in panels if a in mats_by_panel[p][1] and b in mats_by_panel[p][1])
                      for a, b in pairs) + "."]
    return lines


def _panels(rec_dir: Path) -> list[tuple[str, str]]:
    return [(p, title) for p, title in PANELS if (rec_dir / "episodes" / "warm_start" / f"{p}.jsonl").is_file()]


def render_record(rec_dir) -> str:
    """Markdown of one record: setting, success per method and panel with intervals, gains, paired differences."""
    rec_dir = Path(rec_dir)
    rec = json.loads((rec_dir / "record.json").read_text())
    cfg = rec.get("config", {})
    panels = _panels(rec_dir)
    lines = [f"Record `results/{rec_dir.name}` ({rec.get('what') or 'run'}; commit {str(rec.get('git_commit'))[:7]}, "
             f"started {rec.get('started_utc')}). Setting: {setting_line(cfg, machine_line(rec.get('cpu', '?'), rec.get('dtypes')))}.",
             ""]
    mats_by_panel = {p: _matrices(rec_dir, p) for p, _ in panels}
    lines += _table_lines(panels, mats_by_panel)
    grpo_walls = [v["rl_wall_s"] for v in rec.get("runs", {}).values()
                  if v.get("method") == "grpo" and v.get("rl_wall_s")]
    lines += target_lines(cfg, mats_by_panel, max(grpo_walls) / 60 if grpo_walls else None, rec.get("cpu", ""))
    lines += val_curve_lines(rec_dir, rec.get("config", {}).get("rl_iterations"))
    walls = [v.get("rl_wall_s") for v in rec.get("runs", {}).values() if v.get("rl_wall_s")]
    evals = [v.get("eval_wall_s") for v in rec.get("runs", {}).values() if v.get("eval_wall_s")]
    if walls or evals:
        lines += ["", f"Compute: {len(walls)} RL runs, {sum(walls) / 60:.0f} min of RL "
                  f"({min(walls) / 60:.1f}-{max(walls) / 60:.1f} min each); {len(evals)} evaluations, "
                  f"{sum(evals) / 60:.0f} min; {rec.get('cpus')} CPU cores." if walls else
                  f"Compute: {len(evals)} evaluations, {sum(evals) / 60:.0f} min; {rec.get('cpus')} CPU cores."]
    return "\n".join(lines)


def render_chosen(results, names: list[str], key: str) -> str:
    """The compare with each method at its own value of ``key`` chosen on the validation panel (:mod:`.choice`):
    a method's row holds every training seed of the record of its chosen value; the test panels, the warm start
    (which every record must share, episode by episode) and the paired differences as in :func:`render_record`."""
    from .choice import choose, chosen

    results = Path(results)
    missing = [n for n in names if not (results / n / "record.json").is_file()]
    if missing:
        raise FileNotFoundError(f"the compare at the chosen {key} cites results/{missing[0]}, "
                                "which has no record.json")
    picks = {m: chosen(opts) for m, opts in choose([results / n for n in names], key).items()}
    if not picks:
        return f"Compare at the chosen `{key}`: no method has a training seed in every record of the choice yet."
    dirs = [results / n for n in names]
    panels = [pt for pt in _panels(dirs[0]) if all(pt in _panels(d) for d in dirs[1:])]

    def outcomes(d: Path, panel: str):  # the warm start's (game, won) pairs, independent of the data folder
        eps = _read_panel(d / "episodes" / "warm_start" / f"{panel}.jsonl")
        return sorted((ep["task"], bool(ep["won"])) for ep in eps)

    mats_by_panel = {}
    for p, _ in panels:
        for d in dirs[1:]:
            if outcomes(d, p) != outcomes(dirs[0], p):
                raise ValueError(f"results/{d.name} and results/{dirs[0].name} have different warm starts on panel "
                                 f"{p!r}: not one compare")
        warm = _matrices(dirs[0], p)[0]
        mats_by_panel[p] = (warm, {m: _matrices(results / o.record, p)[1][m] for m, o in picks.items()})
    rec = json.loads((dirs[0] / "record.json").read_text())
    setting = setting_line(dict(rec.get("config", {}), **{key: "chosen per method"}),
                           machine_line(rec.get("cpu", "?"), rec.get("dtypes")))
    lines = [f"Compare with each method at its `{key}` chosen on the validation panel ("
             + ", ".join(f"{m.upper()} {picks[m].value} from `results/{picks[m].record}`" for m in _order(picks))
             + f"); every training seed of that record; setting as in `results/{dirs[0].name}` but for {key}: "
             f"{setting}. The validation column is the panel the choice was made on, not a test.", ""]
    lines += _table_lines(panels, mats_by_panel, label=lambda m: f"{m.upper()} ({key} {picks[m].value})")
    return "\n".join(lines)


#: the learning target of issue 24: the plain quickstart's mean gain on the test panel, over >= this many training
#: seeds, at least TARGET_GAIN with the interval's lower bound above 0
TARGET_SEEDS, TARGET_GAIN = 5, 0.10
#: issue 35's budget for GRPO's target: RL minutes per training seed on 2 AVX2 cores in fp32
RL_MINUTES_PER_SEED = 45


def plain_command_differs(cfg: dict) -> list[str]:
    """The settings in which a record's runs differ from the plain ``bash scripts/quickstart.sh`` (for its env), other
    than which methods and training seeds ran; [] when its runs of the plain command's method are plain runs."""
    from dataclasses import asdict

    from gaca_openrlhf.bench.quickstart.config import plain_config, recorded_setting

    plain = json.loads(json.dumps(asdict(plain_config(cfg["env"]) if cfg.get("env") else plain_config())))
    return sorted(k for k, v in plain.items()
                  if k not in ("methods", "rl_seeds") and recorded_setting(cfg, k) != v)


def _verdict(mat, warm):
    """(verdict, gain) of the learning target on a (training seeds x games) success matrix against the warm start."""
    from gaca_openrlhf.report.stats import difference

    gain = difference(mat, warm)
    seeds = mat.shape[0]
    if seeds < TARGET_SEEDS:
        return f"not judged yet ({seeds} of {TARGET_SEEDS} training seeds)", gain
    return ("met" if gain.mean >= TARGET_GAIN and gain.lo > 0 else "not met"), gain


def target_lines(cfg: dict, mats_by_panel: dict, rl_minutes: float | None = None, cpu: str = "") -> list[str]:
    """The learning targets judged on a record's first test panel, mean gain over training seeds with its interval:
    the plain command's method when the record's runs are the plain command's (issue 24), and GRPO at whatever
    recipe the record ran (issue 35: if the baseline learns, the pipeline learns), with the RL minutes per seed."""
    from gaca_openrlhf.bench.quickstart.config import PRESETS

    method = PRESETS["full"].methods[0]
    warm, mats = mats_by_panel.get("test", (None, {}))
    if warm is None:
        return []
    lines = []
    if method in mats and not plain_command_differs(cfg):
        verdict, gain = _verdict(mats[method], warm)
        lines += ["", f"Learning target (the plain `bash scripts/quickstart.sh` is the {method.upper()} run of training "
                      f"seed 0 above, same command): mean gain on the test panel (valid_seen) >= +{100 * TARGET_GAIN:.0f} "
                      f"points over >= {TARGET_SEEDS} training seeds with the interval's lower bound above 0: "
                      f"**{verdict}** ({method.upper()} over {mats[method].shape[0]} training seeds: {gain.fmt()} "
                      f"points)."]
    if "grpo" in mats and rl_minutes is not None:
        verdict, gain = _verdict(mats["grpo"], warm)
        lines += ["", f"Baseline target (issue 35, this record's recipe): GRPO's mean gain on the test panel "
                      f"(valid_seen) >= +{100 * TARGET_GAIN:.0f} points over >= {TARGET_SEEDS} training seeds with the "
                      f"interval's lower bound above 0, at most {RL_MINUTES_PER_SEED} min of RL per seed on 2 AVX2 cores "
                      f"(fp32): **{verdict}** (GRPO over {mats['grpo'].shape[0]} training seeds: {gain.fmt()} points; "
                      f"RL up to {rl_minutes:.0f} min per seed on {cpu or 'an unnamed CPU'}"
                      + (")." if "AVX2" in cpu and "AVX512" not in cpu else
                         ", not an AVX2-only CPU: the RL time on AVX2 is not measured by this record).")]
    return lines


def val_curve_lines(rec_dir: Path, final_iteration) -> list[str]:
    """Validation success per method after 0 (warm start), N, ... RL iterations: mean over training seeds and the
    panel's games with the 95 % interval; only seeds evaluated at every listed iteration enter a method's row."""
    from gaca_openrlhf.report.stats import interval, success_matrix

    ep_root = rec_dir / "episodes"
    steps = sorted({int(f.stem[8:]) for f in ep_root.glob("*/val_step*.jsonl")})
    warm = ep_root / "warm_start" / "val.jsonl"
    if not steps or not warm.is_file():
        return []
    warm_matrix, games = success_matrix({0: _read_jsonl(warm)})
    cols = steps + ([int(final_iteration)] if final_iteration else [])
    rows = []
    by_method: dict = {}
    for d in sorted(ep_root.iterdir()):
        if d.name != "warm_start":
            method, seed = d.name.rsplit("_seed", 1)
            files = [d / f"val_step{s}.jsonl" for s in steps] + [d / "val.jsonl"]
            if all(f.is_file() for f in files):
                by_method.setdefault(method, []).append(files)
    warm_cell = interval(warm_matrix).fmt_level()
    for m in _order(by_method):
        runs = by_method[m]
        cells = [interval(success_matrix({i: _read_jsonl(r[k]) for i, r in enumerate(runs)}, games)[0]).fmt_level()
                 for k in range(len(cols))]
        rows.append(f"| {m.upper()} | {len(runs)} | {warm_cell} | " + " | ".join(cells) + " |")
    if not rows:
        return []
    return ["", f"Validation panel ({len(games)} games) during RL: success % [95% CI] after N iterations "
            "(0 = warm start):", "",
            "| | training seeds | 0 | " + " | ".join(map(str, cols)) + " |",
            "|---|---|---|" + "---|" * len(cols), *rows]


def plot_record(rec_dir) -> Path | None:
    """``results/NAME/curves.png``: training success per iteration (mean +- SD over training seeds, per method) and
    the validation curve (mean +- SD over training seeds of each seed's success on the panel), drawn from the record
    alone."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from gaca_openrlhf.report.stats import success_matrix

    rec_dir = Path(rec_dir)
    curves: dict = {}
    for f in sorted((rec_dir / "metrics").glob("*.jsonl")):
        method = f.stem.rsplit("_seed", 1)[0]
        recs = [r for r in _read_jsonl(f) if not r.get("rollout/skipped")]
        curves.setdefault(method, []).append([r.get("rollout/success_rate") for r in recs])
    if not curves:
        return None
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for m in _order(curves):
        n = min(len(c) for c in curves[m])
        arr = np.array([[np.nan if v is None else v for v in c[:n]] for c in curves[m]], dtype=float)
        x = np.arange(1, n + 1)
        mean, sd = np.nanmean(arr, axis=0), np.nanstd(arr, axis=0)
        ax1.plot(x, 100 * mean, label=f"{m.upper()} ({arr.shape[0]} seeds)")
        ax1.fill_between(x, 100 * (mean - sd), 100 * (mean + sd), alpha=0.2)
    ax1.set(xlabel="RL iteration", ylabel="training success (%)", title="Training success (mean +- SD over seeds)")
    ax1.legend()
    ep = rec_dir / "episodes"
    steps = sorted({int(f.stem[8:]) for f in ep.glob("*/val_step*.jsonl")})
    final = json.loads((rec_dir / "record.json").read_text()).get("config", {}).get("rl_iterations")
    if (ep / "warm_start" / "val.jsonl").is_file():
        _, games = success_matrix({0: _read_jsonl(ep / "warm_start" / "val.jsonl")})
        warm = success_matrix({0: _read_jsonl(ep / "warm_start" / "val.jsonl")}, games)[0].mean()
        for m in _order(curves):
            runs = [d for d in sorted(ep.iterdir()) if d.name.rsplit("_seed", 1)[0] == m
                    and all((d / f"val_step{k}.jsonl").is_file() for k in steps) and (d / "val.jsonl").is_file()]
            if not runs:
                continue
            # per point: each training seed's success over the panel's games, then mean and SD over seeds (the band)
            per_seed = [np.full(len(runs), warm)] + [
                success_matrix({i: _read_jsonl(d / f"{name}.jsonl") for i, d in enumerate(runs)}, games)[0].mean(axis=1)
                for name in [f"val_step{k}" for k in steps] + ["val"]]
            ys, sds = np.array([p.mean() for p in per_seed]), np.array([p.std() for p in per_seed])
            xs = [0] + steps + [final]
            ax2.plot(xs, 100 * ys, marker="o", label=f"{m.upper()} ({len(runs)} seeds)")
            ax2.fill_between(xs, 100 * (ys - sds), 100 * (ys + sds), alpha=0.15)
        ax2.set(xlabel="RL iteration", ylabel="validation success (%)",
                title=f"Validation panel ({len(games)} games; mean +- SD over seeds)")
        ax2.legend()
    fig.tight_layout()
    out = rec_dir / "curves.png"
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


MARK = re.compile(r"(<!-- results:([\w.-]+) -->\n)(.*?)(<!-- /results:\2 -->)", re.S)
#: a setting chosen on the validation panel among records (:mod:`.choice`): ``<!-- choice:KEY:NAME1,NAME2 -->``
CHOICE_MARK = re.compile(r"(<!-- choice:(\w+):([\w.,-]+) -->\n)(.*?)(<!-- /choice:\2 -->)", re.S)
#: the compare at each method's chosen setting (:func:`render_chosen`): ``<!-- chosen:KEY:NAME1,NAME2 -->``
CHOSEN_MARK = re.compile(r"(<!-- chosen:(\w+):([\w.,-]+) -->\n)(.*?)(<!-- /chosen:\2 -->)", re.S)


#: a committed credit audit (``python -m gaca_openrlhf.diagnostics.audit_command --out results/NAME``): its own
#: ``audit.md``, written from its ``audit.json``: ``<!-- audit:NAME -->``
AUDIT_MARK = re.compile(r"(<!-- audit:([\w./-]+) -->\n)(.*?)(<!-- /audit:\2 -->)", re.S)


def render_audit(rec_dir: Path) -> str:
    """The README section of a committed audit: its ``audit.md`` (heading levels lowered under the README's)."""
    if not (rec_dir / "audit.json").is_file() or not (rec_dir / "audit.md").is_file():
        raise FileNotFoundError(f"README cites the audit {rec_dir}, which has no audit.json + audit.md")
    lines = (rec_dir / "audit.md").read_text().strip().splitlines()
    return "\n".join("###" + ln if ln.startswith("#") else ln for ln in lines)


def render_readme(text: str, results: Path) -> str:
    """``text`` with every marked block replaced by its record's table (and every choice block by its choice, every
    audit block by its audit's markdown)."""
    def sub(m: re.Match) -> str:
        rec_dir = results / m.group(2)
        if not (rec_dir / "record.json").is_file():
            raise FileNotFoundError(f"README cites results/{m.group(2)}, which has no record.json")
        return m.group(1) + render_record(rec_dir) + "\n" + m.group(4)

    def sub_choice(m: re.Match) -> str:
        from .choice import render_choice

        table = render_choice(results, m.group(3).split(","), m.group(2), order=_order)
        return m.group(1) + table + "\n" + m.group(5)

    def sub_chosen(m: re.Match) -> str:
        return m.group(1) + render_chosen(results, m.group(3).split(","), m.group(2)) + "\n" + m.group(5)

    def sub_audit(m: re.Match) -> str:
        return m.group(1) + render_audit(results / m.group(2)) + "\n" + m.group(4)

    text = AUDIT_MARK.sub(sub_audit, text)
    return CHOSEN_MARK.sub(sub_chosen, CHOICE_MARK.sub(sub_choice, MARK.sub(sub, text)))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m gaca_openrlhf.bench.records", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect", help="copy a quickstart output folder's records into results/NAME")
    c.add_argument("out_dir")
    c.add_argument("dest")
    c.add_argument("--what", default="")
    m = sub.add_parser("merge", help="one record of several parts of one setting (one training seed each, ...)")
    m.add_argument("dest")
    m.add_argument("sources", nargs="+")
    m.add_argument("--what", default="")
    r = sub.add_parser("render", help="README tables from results/ (exit 1 when they disagree, unless --write)")
    r.add_argument("--write", action="store_true")
    r.add_argument("--readme", default=str(ROOT / "README.md"))
    r.add_argument("--results", default=str(ROOT / "results"))
    r.add_argument("--show", default=None, metavar="NAME", help="print one record's table")
    args = p.parse_args(argv)
    if args.cmd == "collect":
        rec = collect(args.out_dir, args.dest, args.what)
        print(f"collected {len(rec['runs'])} labels into {args.dest}")
        return 0
    if args.cmd == "merge":
        try:
            rec = merge(args.sources, args.dest, args.what)
        except (ValueError, OSError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(f"merged {len(args.sources)} records ({len(rec['runs'])} labels) into {args.dest}")
        return 0
    if args.show:
        print(render_record(Path(args.results) / args.show))
        return 0
    readme = Path(args.readme)
    old = readme.read_text()
    new = render_readme(old, Path(args.results))
    if new == old:
        print("README tables agree with results/")
        return 0
    if args.write:
        for name in MARK.findall(old):
            plot_record(Path(args.results) / name[1])
        readme.write_text(new)
        print(f"updated {readme}")
        return 0
    print("README tables disagree with results/: run `python -m gaca_openrlhf.bench.records render --write`",
          file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
