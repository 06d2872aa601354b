"""The source of ``scratch_env``, a minimal environment that exists only in a test's temporary folder.

``install(tmp_path, monkeypatch)`` writes the package to ``tmp_path/scratch_env/`` and registers it by ONE line, the
``GACA_ENVIRONMENTS`` variable (``scratch=scratch_env.spec``), with ``tmp_path`` on ``sys.path`` and ``PYTHONPATH``.
The variable, not an in-process ``agents.registry.register`` call, because the commands under test start children
that must see the environment too: the quickstart runs every phase as a subprocess and ``train_ppo`` steps the
environment inside Ray actors; a variable (and the path) is inherited by all of them, a ``register`` call is not.

The environment: task ``n`` asks to press a button ``1 + n % 3`` times and then ``stop``; actions ``press`` and
``stop``; reward 1 on a correct stop. Its spec defines what a real environment does: adapter and prompt, integer
panels, a task-file subcommand, an SFT demonstrator (the optimal policy) and quickstart hooks.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

NAME = "scratch"

SPEC_SOURCE = r'''
"""A minimal environment registered from outside the repository (tests only)."""
from __future__ import annotations

import json

from agents.base import EnvSpec, EnvStep, QuickstartHooks
from agents.prompts import PromptTemplate

PROMPT = PromptTemplate(
    first="Task: {task}\nObservation: {observation}\nAdmissible actions: [{admissible_actions}].\n"
          "Answer with one action inside <action> </action> tags.",
    later="Task: {task}\nYou took {step_count} step(s); the last {history_length}: {history}\n"
          "Step {current_step}, observation: {observation}\nAdmissible actions: [{admissible_actions}].\n"
          "Answer with one action inside <action> </action> tags.",
)
ACTIONS = ["press", "stop"]


class ScratchEnv:
    name = "scratch"

    def __init__(self, max_steps: int = 5):
        self.max_steps, self.target, self.count, self.steps = max_steps, 1, 0, 0

    def _step(self, text, reward=0.0, done=False, won=False):
        return EnvStep(observation=text, anchor=f"count {self.count}", admissible_actions=list(ACTIONS), reward=reward,
                       done=done, won=won, info={"task_type": "press", "score": float(won)})

    def reset(self, task):
        self.target, self.count, self.steps = 1 + int(task) % 3, 0, 0
        return f"press the button {self.target} time(s), then stop.", self._step("The counter shows 0.")

    def step(self, action, valid=True):
        self.steps += 1
        if valid and action == "press":
            self.count += 1
        if valid and action == "stop":
            won = self.count == self.target
            return self._step("Stopped.", 1.0 if won else 0.0, True, won)
        return self._step(f"The counter shows {self.count}.", done=self.steps >= self.max_steps)

    def close(self):
        pass


def make_env(**config):
    return ScratchEnv(**config)


def sft_demos(args, progress):
    from agents.demos import render_episode

    steps = []
    for i in range(args.num):
        env = make_env()
        task, obs = env.reset(i)
        observations, admissibles, actions = [], [], []
        for action in ["press"] * env.target + ["stop"]:
            observations.append(obs.observation)
            admissibles.append(obs.admissible_actions)
            actions.append(action)
            obs = env.step(action)
        steps += render_episode("scratch", task, observations, admissibles, actions, task_id=str(i),
                                history_k=args.history_k)
        if progress:
            progress(i + 1, args.num)
    return steps, {"episodes": args.num, "won": args.num}


def add_sft_args(parser):
    parser.add_argument("--num", type=int, required=True, help="demonstrate tasks 0 .. N-1")


def data_phase(cfg, st, out, con, tools):
    n = max(cfg.train_games, cfg.rl_tasks_per_iter)
    tools.write_tasks(list(range(n)), str(out / "data" / "train_tasks.jsonl"))
    st.train_tasks = str(out / "data" / "train_tasks.jsonl")
    st.panel = "test"
    st.extra_panels = {"val": "val"} if cfg.val_games > 0 else {}
    return f"{n} train tasks"


QUICKSTART = QuickstartHooks(
    data_title="scratch tasks",
    data_phase=data_phase,
    sft_source=lambda cfg, st: ["scratch", "--num", str(cfg.train_games)],
    eval_args=lambda cfg, st: (["--panel", st.panel, "--num-tasks", str(cfg.heldout_games)]
                               + [f"--extra-panel={k}={v}" for k, v in sorted(st.extra_panels.items())]),
    rl_env_args=lambda cfg, st: ["--env.kwargs", json.dumps({"max_steps": cfg.max_steps})],
    report_data=lambda cfg, st: f"Scratch counter tasks, {cfg.train_games} train tasks.",
    setting_data=lambda cfg: "scratch counter tasks",
    out_suffix="_scratch",
)

SPEC = EnvSpec(name="scratch", label="Scratch", make_env=make_env, prompt=PROMPT, eval_prompt_max_len=512,
               eval_num_envs=2, panel_help="any name (integer tasks)", add_sft_args=add_sft_args,
               sft_demos=sft_demos, quickstart=QUICKSTART)
'''


def install(tmp_path: Path, monkeypatch) -> Path:
    """Write ``scratch_env`` under ``tmp_path`` and register it by one line (see the module doc)."""
    pkg = tmp_path / "scratch_env"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "spec.py").write_text(SPEC_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    repo = str(Path(__file__).resolve().parents[2])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(x for x in (str(tmp_path), repo,
                                                                   os.environ.get("PYTHONPATH", "")) if x))
    monkeypatch.setenv("GACA_ENVIRONMENTS", f"{NAME}=scratch_env.spec")  # <- the one registry line
    for mod in [m for m in sys.modules if m == "scratch_env" or m.startswith("scratch_env.")]:
        monkeypatch.delitem(sys.modules, mod)
    return pkg
