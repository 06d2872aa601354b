"""One setting chosen on the validation panel across committed records (issue 24: every default is chosen on the
validation panel, never on a test panel).

A choice compares records (``results/<name>``, :mod:`.records`) whose runs differ in one setting ``key`` of their
quickstart config (e.g. ``rl_lr``) and in nothing else that changes numbers. For each method it

1. takes the training seeds that *every* record has for that method (a 5-seed record gets no advantage over a
   1-seed one, and the comparison is paired by seed as well as by game),
2. reads only the ``val`` panel (the final model's validation episodes; the test panels are never opened), and
3. picks the value with the highest mean validation success; a tie goes to the first record (the current default).

Beside each value: its mean with the 95 % crossed-bootstrap interval and its difference to the first record's
(paired by game; :mod:`gaca_openrlhf.report.stats`), so the reader sees whether the choice rests on more than noise.

In README.md the block between ``<!-- choice:KEY:NAME1,NAME2,... -->`` and ``<!-- /choice:KEY -->`` is this table,
rendered by ``python -m gaca_openrlhf.bench.records render`` with the records' tables.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

#: config fields that may differ between the records of a choice: which methods and seeds ran, and settings that
#: change no number (evaluation batch width, where env workers run)
NEUTRAL = frozenset({"rl_seeds", "methods", "num_envs", "rl_env_backend", "eval_env_backend"})
PANEL = "val"


@dataclass(frozen=True)
class Option:
    """One value of the setting for one method: validation success over ``seeds`` (an Interval) and its difference
    to the first record's value on the same seeds and games (None for the first)."""

    value: object
    record: str
    success: object
    vs_first: object


def game_id(task: str) -> str:
    """A validation game's identity independent of where its data folder lives (``GACA_CACHE`` differs between
    machines): its task folder and trial, the last two parts of the path (the same identity evaluation seeds are
    derived from: :func:`gaca_openrlhf.seeding.game_identity`)."""
    from gaca_openrlhf.seeding import game_identity

    return game_identity(task)


def _val_episodes(rec_dir: Path, method: str, seed: int) -> list[dict]:
    path = rec_dir / "episodes" / f"{method}_seed{seed}" / f"{PANEL}.jsonl"
    return [dict(ep, task=game_id(ep["task"])) for ep in
            (json.loads(x) for x in path.read_text().splitlines() if x.strip())]


def _seeds(rec_dir: Path) -> dict[str, set[int]]:
    """{method: training seeds with validation episodes} of one record."""
    out: dict[str, set[int]] = {}
    for d in sorted((rec_dir / "episodes").iterdir()):
        if d.name != "warm_start" and "_seed" in d.name and (d / f"{PANEL}.jsonl").is_file():
            method, seed = d.name.rsplit("_seed", 1)
            out.setdefault(method, set()).add(int(seed))
    return out


def check_comparable(configs: dict[str, dict], key: str) -> None:
    """Raise ValueError unless the records differ in ``key`` (each its own value) and in nothing else but
    :data:`NEUTRAL` fields: a choice between records that differ twice would credit one setting with the other's
    effect."""
    names = list(configs)
    values = [configs[n].get(key) for n in names]
    if any(v is None for v in values):
        raise ValueError(f"record(s) {[n for n, v in zip(names, values) if v is None]} have no setting {key!r}")
    if len(set(map(repr, values))) != len(values):
        raise ValueError(f"two records share the same {key}: {dict(zip(names, values))}")
    from gaca_openrlhf.bench.quickstart.config import recorded_setting

    first = configs[names[0]]
    for n in names[1:]:
        other = configs[n]
        diff = sorted(k for k in set(first) | set(other)
                      if k not in NEUTRAL and k != key and recorded_setting(first, k) != recorded_setting(other, k))
        if diff:
            raise ValueError(f"records {names[0]} and {n} differ in {diff} besides {key}: not a choice of {key}")


def choose(rec_dirs, key: str) -> dict[str, list[Option]]:
    """{method: its options in the records' order} for the methods every record has; the chosen one is
    :func:`chosen` of that list."""
    from gaca_openrlhf.report.stats import difference, interval, success_matrix

    rec_dirs = [Path(d) for d in rec_dirs]
    if len(rec_dirs) < 2:
        raise ValueError("a choice needs at least two records")
    configs = {d.name: json.loads((d / "record.json").read_text()).get("config", {}) for d in rec_dirs}
    check_comparable(configs, key)
    seeds_by_rec = [_seeds(d) for d in rec_dirs]
    methods = set.intersection(*[set(s) for s in seeds_by_rec])
    out: dict[str, list[Option]] = {}
    for m in methods:
        shared = sorted(set.intersection(*[s[m] for s in seeds_by_rec]))
        if not shared:
            continue  # no training seed that every record ran for this method: nothing to compare fairly
        games = None
        mats = []
        for d in rec_dirs:
            mat, games = success_matrix({s: _val_episodes(d, m, s) for s in shared}, games)
            mats.append(mat)
        out[m] = [Option(configs[d.name][key], d.name, interval(mat), None if i == 0 else difference(mat, mats[0]))
                  for i, (d, mat) in enumerate(zip(rec_dirs, mats))]
    return out


def chosen(options: list[Option]) -> Option:
    """The option with the highest mean validation success; the first (the current default) on a tie."""
    return max(options, key=lambda o: o.success.mean)  # max keeps the first of equal ones


def render_choice(results, names: list[str], key: str, order=sorted) -> str:
    """Markdown table of a choice of ``key`` among ``results/<names>``: methods (in ``order``) x values, the chosen
    value per method."""
    results = Path(results)
    missing = [n for n in names if not (results / n / "record.json").is_file()]
    if missing:
        raise FileNotFoundError(f"the choice of {key} cites results/{missing[0]}, which has no record.json")
    table = choose([results / n for n in names], key)
    if not table:
        return (f"Choice of `{key}` on the validation panel among {', '.join(f'`results/{n}`' for n in names)}: "
                "no method has a training seed in every record yet.")
    first = next(iter(table.values()))
    lines = [f"Choice of `{key}` on the validation panel (final model; training seeds every record has for the "
             f"method; a tie keeps the first, the current default): records "
             + ", ".join(f"`results/{o.record}` ({key} {o.value})" for o in first) + ".", "",
             "| | training seeds | " + " | ".join(f"{key} {o.value}: success % [95% CI] / vs {first[0].value}"
                                                   for o in first) + " | chosen |",
             "|---|---|" + "---|" * len(first) + "---|"]
    for m in order(table):
        opts = table[m]
        cells = [o.success.fmt_level() + ("" if o.vs_first is None else f" / {o.vs_first.fmt()}") for o in opts]
        lines.append(f"| {m.upper()} | {opts[0].success.seeds} | " + " | ".join(cells)
                     + f" | {chosen(opts).value} |")
    return "\n".join(lines)
