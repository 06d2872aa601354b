"""``--resume``: a finished evaluation or RL run in the output folder is reused only when it was produced from the
same model (saved after it), with the same settings and, for evaluations, on exactly the same panel tasks."""
from __future__ import annotations

import json
import shlex
from pathlib import Path

from gaca_openrlhf.bench.quickstart.config import QuickstartConfig
from gaca_openrlhf.bench.quickstart.state import State
from gaca_openrlhf.cli.options import with_new_names
from gaca_openrlhf.trainer.run_options import deprecated_flags


def panel_digests(cfg: QuickstartConfig, st: State, panels: dict[str, str]) -> dict[str, str]:
    """name -> :func:`~gaca_openrlhf.eval.panels.tasks_digest` of each panel (``""``: the main one) as
    :func:`~.phases.eval_command` has :mod:`gaca_openrlhf.bench.evaluate` resolve it (panel files,
    ``EnvSpec.panel_files``: every task of the file; otherwise the first ``heldout_games`` tasks)."""
    from agents.registry import spec
    from gaca_openrlhf.eval.panels import resolve_panel, tasks_digest

    files = spec(cfg.env).panel_files
    return {name: tasks_digest(resolve_panel(cfg.env, arg, data_root=st.data if files else None,
                                             num_tasks=None if files else cfg.heldout_games).tasks)
            for name, arg in panels.items()}


def reusable_eval(cfg: QuickstartConfig, out_dir: Path, model: str, seeds, extra_panels=None,
                  panel_arg: str | None = None, digests: dict[str, str] | None = None) -> bool:
    """``--resume``: every seed's result is in ``out_dir``, written after ``model`` was, with this run's settings;
    with ``digests`` (panel name -> :func:`panel_digests`) also on exactly these panels' tasks -- a panel file
    regenerated with other games keeps its path, so the path alone does not tell."""
    model_file = Path(model) / "config.json"
    if not model_file.is_file():
        return False
    want = {"model": model, "env": cfg.env, "temperature": cfg.eval_temperature, "max_steps": cfg.max_steps,
            "max_tokens": cfg.max_new_tokens, "num_tasks": cfg.heldout_games, "episodes_per_task": 1}
    extra_panels = extra_panels or {}
    files = [(out_dir / f"seed{seed}.json", seed, "", panel_arg) for seed in seeds]
    files += [(out_dir / name / f"seed{seed}.json", seed, name, path) for name, path in sorted(extra_panels.items())
              for seed in seeds]
    for f, seed, name, panel_arg in files:
        if not f.is_file() or f.stat().st_mtime < model_file.stat().st_mtime:
            return False
        try:
            got = json.loads(f.read_text()).get("config", {})
        except json.JSONDecodeError:
            return False
        expect = dict(want, seed=seed) if panel_arg is None else {**want, "seed": seed, "panel_arg": panel_arg}
        if panel_arg is not None:
            expect.pop("num_tasks")
        if digests is not None:
            expect["tasks_sha1"] = digests[name]
        if any(got.get(k) != v for k, v in expect.items()):
            return False
    return True


#: train_ppo flags that change what a run prints, not what it trains: a run recorded without them is reused
DISPLAY_ONLY_FLAGS = ("--run.progress_lines",)


def same_train_command(recorded: list[str], cmd: list[str]) -> bool:
    """Whether two ``train_ppo`` argument lists run the same: equal once every deprecated option name is spelt with
    its new name (``--gaca.mini_batch_steps`` is ``--run.mini_batch_steps``: train_ppo's own alias table) and the
    display-only flags (:data:`DISPLAY_ONLY_FLAGS`) left out, so a run recorded before a rename is not trained again."""
    renamed = deprecated_flags()
    return _without_display_flags(with_new_names(recorded, renamed)) == _without_display_flags(with_new_names(cmd, renamed))


def _without_display_flags(args: list[str]) -> list[str]:
    """``args`` without the :data:`DISPLAY_ONLY_FLAGS` and their values."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in DISPLAY_ONLY_FLAGS:
            skip = True
            continue
        out.append(a)
    return out


def reusable_run(cfg: QuickstartConfig, run_dir: Path, cmd: list[str], warm: str) -> bool:
    """``--resume``: ``run_dir`` holds a finished run of ``cmd`` (same method, seed, sizes, warm start path; old
    option names count as their new ones, :func:`same_train_command`), saved after the warm start was (a warm start
    trained again since makes every run of it stale)."""
    from gaca_openrlhf.bench.report import read_metrics

    done, warm_cfg, recorded = run_dir / "config.json", Path(warm) / "config.json", run_dir / "command.txt"
    try:  # the interpreter's path is not part of the run: a venv reached through another path runs the same command
        recorded_args = shlex.split(recorded.read_text())[1:] if recorded.is_file() else None
    except ValueError:  # a command.txt cut off mid-write
        recorded_args = None
    if not (recorded_args is not None and same_train_command(recorded_args, cmd[1:])
            and done.is_file() and warm_cfg.is_file() and done.stat().st_mtime >= warm_cfg.stat().st_mtime
            and any(run_dir.glob("*.safetensors"))):
        return False
    # the model is saved after the last iteration; a run killed while saving has no complete metrics either
    return len(read_metrics(run_dir / "metrics.jsonl")) >= cfg.rl_iterations
