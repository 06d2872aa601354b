"""Fixed evaluation panels: which tasks an evaluation runs, resolved the same way on every machine.

- ALFWorld: a panel of :mod:`agents.alfworld.panels` -- a panel JSON file (``--panel path/to/eval_id.json``), or a
  standard name (``eval_id`` = 128 games of valid_seen drawn with seed 0, ``eval_ood`` = all of valid_unseen,
  ``train``) looked up as ``<panel-dir>/<name>.json`` or ``<data>/panels/<name>.json`` and otherwise built from the
  data root exactly as ``python -m agents.alfworld panels`` builds it.
- WebShop: a goal split (``test`` = goals 0-499, ``eval`` = 500-1499, ``train`` = 1500+); the panel is its first
  ``--num-tasks`` goals, as ``test:0``, ``test:1``, ... (``agents.webshop.env.parse_task``).
- toy (development only): ``--num-tasks`` integer tasks.

Every problem (no data root, no such panel, an empty split) raises :class:`PanelError` with a message that says
what to do.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

#: WebShop goal splits (webshop_server.goals): name -> number of goals (None: open-ended)
WEBSHOP_SPLITS = {"test": 500, "eval": 1000, "train": None}


@dataclass(frozen=True)
class EvalProtocol:
    """The GACA paper's evaluation protocol (verl-agent's): ALFWorld's in-distribution panel of 128 valid_seen
    games, sampling temperature 0.4, one evaluation per seed over 3 seeds, success reported as the mean and the
    population standard deviation over the seeds; the best checkpoint (highest mean success) is reported next to
    the final one."""

    alfworld_panel: str = "eval_id"
    num_tasks: int = 128
    temperature: float = 0.4
    seeds: tuple = (0, 1, 2)


PAPER_PROTOCOL = EvalProtocol()


class PanelError(ValueError):
    """A panel could not be resolved (missing data, unknown name, empty panel)."""


@dataclass
class Panel:
    """name: panel name; tasks: task ids passed to ``env.reset``; task_types: task id -> type known up front
    (ALFWorld panels list them; otherwise filled from the env's info during the run); meta: provenance."""

    name: str
    tasks: list[str]
    task_types: dict[str, str] = field(default_factory=dict)
    meta: dict = field(default_factory=dict)


def _alfworld_task_type(data_root: str | None, game: str) -> str:
    if not data_root:
        return ""
    path = os.path.join(data_root, game, "traj_data.json")
    try:
        with open(path) as f:
            return str(json.load(f).get("task_type", ""))
    except (OSError, ValueError):
        return ""


def alfworld_panel(panel: str, data_root: str | None, panel_dir: str | None = None, seed: int = 0) -> Panel:
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
    types = {g: _alfworld_task_type(data_root, g) for g in games}
    return Panel(name=name, tasks=games, task_types={g: t for g, t in types.items() if t}, meta=meta)


def webshop_panel(panel: str, num_tasks: int | None) -> Panel:
    if panel not in WEBSHOP_SPLITS:
        raise PanelError(f"unknown WebShop panel {panel!r}: use a goal split, one of {list(WEBSHOP_SPLITS)}")
    size = WEBSHOP_SPLITS[panel]
    if num_tasks is None:
        if size is None:
            raise PanelError("the WebShop train split is open-ended: pass --num-tasks N")
        num_tasks = size
    if num_tasks <= 0:
        raise PanelError(f"--num-tasks must be positive, got {num_tasks}")
    if size is not None and num_tasks > size:
        raise PanelError(f"WebShop split {panel!r} has {size} goals, asked for {num_tasks}")
    tasks = [f"{panel}:{i}" for i in range(num_tasks)]
    return Panel(name=f"{panel}[:{num_tasks}]", tasks=tasks, meta={"split": panel, "first_n": num_tasks})


def toy_panel(num_tasks: int | None) -> Panel:
    n = num_tasks or 4
    return Panel(name=f"toy[:{n}]", tasks=[str(i) for i in range(n)], meta={"first_n": n})


def alfworld_generated(data_root: str | None, games: list[str] | None = None) -> bool:
    """Whether ALFWorld games are this project's generated ones (not the real ALFWorld data): the data root per
    ``agents.alfworld.is_generated``, or any of ``games`` whose ``traj_data.json`` carries the generator's entry."""
    try:
        from agents.alfworld.assets import is_generated
    except ImportError:  # older tree without the helper: the per-game check below still decides
        is_generated = None
    if is_generated is not None and data_root and is_generated(data_root):
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


def tasks_digest(tasks: list[str]) -> str:
    """A short digest of a panel's task list: two evaluations with the same digest ran the same tasks in the same
    order (``--resume`` must not reuse results of a panel whose file was regenerated with other games)."""
    import hashlib

    return hashlib.sha1("\n".join(tasks).encode("utf-8")).hexdigest()[:16]


def resolve_panel(env: str, panel: str, *, data_root: str | None = None, panel_dir: str | None = None,
                  num_tasks: int | None = None, panel_seed: int = 0) -> Panel:
    """The panel of ``env`` named ``panel`` (see module doc); ``num_tasks`` keeps the first N tasks."""
    if env == "alfworld":
        p = alfworld_panel(panel, data_root, panel_dir, seed=panel_seed)
        if num_tasks is not None:
            if num_tasks <= 0:
                raise PanelError(f"--num-tasks must be positive, got {num_tasks}")
            p.tasks = p.tasks[:num_tasks]
            p.meta["first_n"] = num_tasks
        return p
    if env == "webshop":
        return webshop_panel(panel, num_tasks)
    if env == "toy":
        return toy_panel(num_tasks)
    raise PanelError(f"unknown environment {env!r}: alfworld | webshop | toy")
