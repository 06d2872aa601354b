"""What the phases hand each other (:class:`State`), and the wall-time file of a finished RL run or evaluation."""
from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

#: in an RL run folder and an evaluation folder: the seconds that phase took (a --resume report shows them)
WALL_TIME_FILE = "wall_s.txt"


@dataclass
class State:
    """What the phases hand each other."""

    data: str = ""
    train_tasks: str = ""  # RL's task file
    rl_data: str = ""  # the game root RL's task ids are relative to (the SFT games' root or the RL pool's)
    panel: str = ""  # the test panel (valid_seen / WebShop test goals): the reported number
    extra_panels: dict = field(default_factory=dict)  # name -> panel file: "test_unseen", "val" (validation)
    server_url: str = ""  # the environment's server, when its data phase started one
    warm: str = ""
    sft: dict = field(default_factory=dict)
    evals: dict = field(default_factory=dict)  # label -> {seed: result path}
    runs: dict = field(default_factory=dict)  # label -> run dir
    server: subprocess.Popen | None = None
    catalog_generated: bool = False
    resume: bool = False  # --resume: reuse finished RL runs and evaluations in the output folder
    reused: list = field(default_factory=list)  # the phases --resume reused, recorded in run.json
    reused_wall_s: dict = field(default_factory=dict)  # phase -> seconds it took when it ran (where recorded)

    def note_reused(self, phase: str, folder: Path) -> None:
        self.reused.append(phase)
        try:
            self.reused_wall_s[phase] = float((folder / WALL_TIME_FILE).read_text())
        except (OSError, ValueError):
            pass  # written by a version that did not record it
