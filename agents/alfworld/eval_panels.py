"""ALFWorld's evaluation panels, resolved the same way on every machine: a panel JSON file (``--panel
path/to/eval_id.json``), or a standard name of :data:`agents.alfworld.panels.STANDARD` (``eval_id`` = 128 games of
valid_seen drawn with seed 0, ``eval_ood`` = all of valid_unseen, ``train``) looked up as
``<panel-dir>/<name>.json`` or ``<data>/panels/<name>.json`` and otherwise built from the data root exactly as
``python -m agents.alfworld panels`` builds it. Also: whether games are generated ones, and RL task lists."""
from __future__ import annotations

import json
import os
import random

from agents.base import Panel, PanelError


def _task_type(data_root: str | None, game: str) -> str:
    if not data_root:
        return ""
    path = os.path.join(data_root, game, "traj_data.json")
    try:
        with open(path) as f:
            return str(json.load(f).get("task_type", ""))
    except (OSError, ValueError):
        return ""


def alfworld_panel(panel: str, data_root: str | None, panel_dir: str | None = None, seed: int = 0) -> Panel:
    """The panel ``panel`` (file or standard name) of the games under ``data_root`` (see the module doc)."""
    from agents.alfworld.panels import STANDARD, build_panel, load_panel

    if data_root is not None and not os.path.isdir(data_root):
        raise PanelError(f"ALFWorld data root {data_root!r} does not exist (set --data or $ALFWORLD_DATA)")
    candidates = []
    if panel.endswith(".json") or os.path.sep in panel:
        candidates.append(panel)
    for folder in (panel_dir, os.path.join(data_root, "panels") if data_root else None):
        if folder:
            candidates.append(os.path.join(folder, f"{panel}.json"))
    path = next((c for c in candidates if os.path.isfile(c)), None)
    if path is not None:
        try:
            raw = load_panel(path)
        except (OSError, ValueError) as e:
            raise PanelError(f"cannot read ALFWorld panel {path}: {e}") from e
        games = [str(g) for g in raw["games"]]
        meta = {"source": os.path.abspath(path), "split": raw.get("split"), "selection": raw.get("selection")}
        name = raw.get("name") or os.path.splitext(os.path.basename(path))[0]
    elif panel in STANDARD:
        if not data_root:
            raise PanelError(f"ALFWorld panel {panel!r} is built from a data root: pass --data DIR or set "
                             "$ALFWORLD_DATA (or pass a panel JSON file)")
        split, size = STANDARD[panel]
        raw = build_panel(data_root, panel, split, size=size, seed=seed)
        games, name = raw["games"], panel
        meta = {"source": f"built from {os.path.abspath(data_root)}", "split": split, "selection": raw["selection"]}
        if not games:
            raise PanelError(f"ALFWorld panel {panel!r}: no playable games in split {split!r} under {data_root} "
                             f"(generate some with `python -m agents.alfworld generate --out {data_root} "
                             f"--split {split} --num-games N`)")
    else:
        raise PanelError(f"unknown ALFWorld panel {panel!r}: give a panel JSON file or one of {sorted(STANDARD)} "
                         f"(looked for {candidates or 'no files'})")
    if not games:
        raise PanelError(f"ALFWorld panel {panel!r} has no games")
    if data_root:
        missing = [g for g in games if not os.path.isabs(g) and not os.path.exists(os.path.join(data_root, g))]
        if missing:
            raise PanelError(f"{len(missing)} game(s) of panel {name!r} are not under data root {data_root}, "
                             f"e.g. {missing[0]!r}")
    types = {g: _task_type(data_root, g) for g in games}
    return Panel(name=name, tasks=games, task_types={g: t for g, t in types.items() if t}, meta=meta)


def resolve(panel: str, *, data_root: str | None = None, panel_dir: str | None = None,
            num_tasks: int | None = None, panel_seed: int = 0) -> Panel:
    """:func:`alfworld_panel`, its first ``num_tasks`` games when given."""
    p = alfworld_panel(panel, data_root, panel_dir, seed=panel_seed)
    if num_tasks is not None:
        if num_tasks <= 0:
            raise PanelError(f"--num-tasks must be positive, got {num_tasks}")
        p.tasks = p.tasks[:num_tasks]
        p.meta["first_n"] = num_tasks
    return p


def alfworld_generated(data_root: str | None, games: list[str] | None = None) -> bool:
    """Whether ALFWorld games are this project's generated ones (not the real ALFWorld data): the data root per
    ``agents.alfworld.is_generated``, or any of ``games`` whose ``traj_data.json`` carries the generator's entry."""
    from agents.alfworld.assets import is_generated

    if data_root and is_generated(data_root):
        return True
    for game in games or []:
        path = os.path.join(data_root or "", game, "traj_data.json")
        try:
            with open(path) as f:
                if "generator" in json.load(f):
                    return True
        except (OSError, ValueError):
            continue
    return False


def alfworld_tasks(data: str, split: str, limit: int = 0, seed: int = 0) -> list[str]:
    """The games of ``split`` under ``data`` in a seeded shuffle, the first ``limit`` (0: all): RL's task list."""
    from agents.alfworld.panels import list_games

    games = [g[0] if isinstance(g, (tuple, list)) else g for g in list_games(data, split)]
    if not games:
        raise SystemExit(f"no ALFWorld games under {data} ({split}): run `python -m agents.alfworld generate` first")
    random.Random(seed).shuffle(games)
    return games[:limit] if limit else games
