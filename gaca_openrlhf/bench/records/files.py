"""What a record folder holds and how its files are read: the panels, the episode fields kept, the methods' order,
and the episode readers (games reduced to their identity, so records from machines with other data folders pair)."""
from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PANELS = (("test", "test: valid_seen"), ("test_unseen", "test: valid_unseen"), ("val", "validation"))
EPISODE_KEYS = ("task", "task_type", "seed", "won", "steps", "valid_steps", "repeat_steps", "listed_steps",
                "admissible_steps", "failed")
METHOD_ORDER = ("grpo", "gigpo", "gaca", "hgpo", "empg")


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _read_panel(path: Path) -> list[dict]:
    """A panel's episodes with ``task`` reduced to the game's identity (:func:`.choice.game_id`), so that records
    written on machines with another data folder pair game by game; two games with one identity are an error."""
    from ..choice import game_id

    episodes = _read_jsonl(path)
    tasks = {str(ep["task"]) for ep in episodes}
    ids = {game_id(t) for t in tasks}
    if len(ids) != len(tasks):
        raise ValueError(f"{path}: {len(tasks)} games but {len(ids)} game identities (task folder/trial)")
    return [dict(ep, task=game_id(ep["task"])) for ep in episodes]



def _order(methods) -> list[str]:
    return sorted(methods, key=lambda m: (METHOD_ORDER.index(m) if m in METHOD_ORDER else 99, m))


def _label_of(label: str, info: dict) -> str:
    """A run's label as a multi-seed record names it: the plain command's ``after_rl`` becomes
    ``<method>_seed<N>`` (its record's ``runs`` entry names both)."""
    if label == "after_rl" and info.get("method") is not None and info.get("seed") is not None:
        return f"{info['method']}_seed{info['seed']}"
    return label
