"""Reading records back as the README's tables: the setting line, success per method and panel with intervals,
gains and paired differences, the learning targets, the validation curve, and the compare at chosen settings."""
from __future__ import annotations

import json
from pathlib import Path

from .files import PANELS, _label_of, _order, _read_jsonl, _read_panel
from .machine import machine_line


def setting_line(cfg: dict, cpu: str) -> str:
    """The setting every number of a record carries (data, subset, model, step cap, CPU)."""
    from agents.registry import DEFAULT_ENV, spec

    data = spec(cfg.get("env", DEFAULT_ENV)).quickstart.setting_data(cfg)  # the environment's own words
    return (f"{data}; {cfg.get('max_steps')}-step cap; the quickstart model of size `{cfg.get('model_size')}` "
            f"(SFT warm start); RL {cfg.get('rl_iterations')} iterations x {cfg.get('rl_tasks_per_iter')} tasks x "
            f"n={cfg.get('rl_n')}, lr {cfg.get('rl_lr')}, temperature {cfg.get('rl_temperature')}, validity rule "
            f"`{cfg.get('rl_validity')}`" + (" (reward shaping: off-list actions penalised)"
                                              if cfg.get("rl_validity") == "admissible" else "")
            + f"; evaluation temperature {cfg.get('eval_temperature')}" + _other_settings(cfg) + f"; CPU: {cpu}")


#: settings the setting line names itself, or that change how a run is executed but not its numbers
_NAMED_OR_INERT = {"env", "max_steps", "model_size", "rl_iterations", "rl_tasks_per_iter", "rl_n", "rl_lr",
                   "rl_temperature", "rl_validity", "eval_temperature", "methods", "rl_seeds", "num_envs",
                   "rl_env_backend", "eval_env_backend", "val_every", "heldout_games", "val_games", "unseen_games"}


def _other_settings(cfg: dict) -> str:
    """``; other settings than the plain command's: k v, ...`` for every setting of the record's runs that the line
    does not name and that differs from the plain ``bash scripts/quickstart.sh`` (e.g. the update size)."""
    if not cfg.get("env"):
        return ""
    other = [k for k in plain_command_differs(cfg) if k not in _NAMED_OR_INERT]
    if not other:
        return ""
    return "; other settings than the plain command's: " + ", ".join(f"{k} {cfg.get(k)}" for k in other)


def _method_seed(rec_dir: Path, label: str, runs: dict) -> tuple[str, int]:
    """(method, training seed) of an evaluated run's label: ``<method>_seed<N>``, or a plain command's ``after_rl``
    as the record's ``runs`` names it (a single collected run, before or without ``merge``)."""
    name = _label_of(label, runs.get(label, {}))
    if "_seed" not in name:
        raise ValueError(f"{rec_dir}: episodes/{label} is neither <method>_seed<N> nor a run whose method and seed "
                         "the record's runs name")
    method, seed = name.rsplit("_seed", 1)
    return method, int(seed)


def _runs(rec_dir: Path) -> dict:
    """The record's ``runs`` (label -> method, seed, timings)."""
    return json.loads((rec_dir / "record.json").read_text()).get("runs", {})


def _matrices(rec_dir: Path, panel: str):
    """{method: (seeds x games) success matrix} and the warm start's (1 x games), over the same games."""
    from gaca_openrlhf.report.stats import success_matrix

    ep_root = rec_dir / "episodes"
    warm_file = ep_root / "warm_start" / f"{panel}.jsonl"
    if not warm_file.is_file():
        return None, {}
    warm, games = success_matrix({0: _read_panel(warm_file)})
    by_method: dict[str, dict[int, list]] = {}
    runs = _runs(rec_dir)
    for d in sorted(ep_root.iterdir()):
        if d.name == "warm_start" or not (d / f"{panel}.jsonl").is_file():
            continue
        method, seed = _method_seed(rec_dir, d.name, runs)
        by_method.setdefault(method, {})[seed] = _read_panel(d / f"{panel}.jsonl")
    mats = {m: success_matrix(v, games)[0] for m, v in by_method.items()}
    return warm, mats


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
    commits = [c.strip()[:7] for c in str(rec.get("git_commit")).split(",")]  # a merged record lists its parts'
    lines = [f"Record `results/{rec_dir.name}` ({rec.get('what') or 'run'}; commit{'s' if len(commits) > 1 else ''} "
             f"{', '.join(commits)}, "
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
    from ..choice import choose, chosen

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
    cfg = json.loads(json.dumps(cfg))  # as a record stores it: a live config's tuples would never equal the lists
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
        lines += ["", f"Learning target (the plain `bash scripts/quickstart.sh` runs this record's setting: its "
                      f"{method.upper()} run of training seed 0 above, on the CPU and dtypes the setting names): mean gain on the test panel (valid_seen) >= +{100 * TARGET_GAIN:.0f} "
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
    runs = _runs(rec_dir)
    for d in sorted(ep_root.iterdir()):
        if d.name != "warm_start":
            method, _ = _method_seed(rec_dir, d.name, runs)
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
