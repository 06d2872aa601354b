"""Validation during training (issue 37): the rollout engines play a fixed validation panel every N iterations.

``train_ppo --eval.dataset TASKS`` (a task file like the training prompts, of games disjoint from the test panels:
with real ALFWorld data, held-out *training* games, since ``valid_seen``/``valid_unseen`` are the test panels) makes
the trainer run every task of it ``--eval.n_samples_per_prompt`` times (default 1) at ``--eval.temperature``
(default 0.4, the evaluation temperature of verl-agent's recipe and of ``gaca_openrlhf.eval``) after every
``--eval.steps`` iterations (default 5, verl-agent's ``test_freq``) and after the last one. The episodes use the
training rollout's executor and prompts, with seeds fixed across rounds: ``derive_seed(run seed, "validation",
game_identity(task), k)`` for the task's k-th episode of the round (the game's identity, not its path: moving the
data folder changes no seed) (``rollout.config.VALIDATION_ROUND_KEY`` marks a validation request), so two
rounds differ only by the weights. Their figures go into the iteration's ``metrics.jsonl`` record as ``val/*``
(:func:`validation_stats`) and the best checkpoint is chosen on ``val/success_rate`` (OpenRLHF's
``save_best_checkpoint``: ``best_global_step<N>``), never on a test panel.
"""
from __future__ import annotations

from collections import defaultdict
from typing import List

#: the metric the best checkpoint is chosen on
BEST_METRIC = "val/success_rate"
#: defaults of OpenRLHF's ``--eval.*`` options under the step trainer (verl-agent: test_freq 5, val temperature 0.4)
EVAL_DEFAULTS = {"eval.steps": 5, "eval.temperature": 0.4, "eval.n_samples_per_prompt": 1}


def validation_due(iteration: int, every: int, last: bool) -> bool:
    """Whether the validation panel is played after ``iteration`` (1-based): every ``every`` iterations and after the
    last one; never when ``every`` <= 0."""
    return every > 0 and (iteration % every == 0 or last)


def validation_stats(episodes: List[dict]) -> dict:
    """``val/*`` figures of one validation round.

    Every episode counts: one that ended in an environment failure is lost whatever the environment last reported
    (``val/failed_episodes`` says how many), so a broken worker cannot raise the figure the best checkpoint is
    chosen on. ``val/success_rate``, ``val/score`` (mean final score), ``val/num_steps`` (mean episode length),
    ``val/num_episodes``, ``val/failed_episodes`` and ``val/success_rate/<task type>`` where episodes name theirs.
    """
    n = len(episodes)
    won = [bool(e.get("won")) and not e.get("failed") for e in episodes]
    score = [0.0 if e.get("failed") else float(e.get("score", 0.0)) for e in episodes]
    stats = {
        "val/num_episodes": float(n),
        "val/failed_episodes": float(sum(bool(e.get("failed")) for e in episodes)),
        "val/success_rate": sum(won) / n if n else float("nan"),
        "val/score": sum(score) / n if n else float("nan"),
        "val/num_steps": sum(len(e.get("steps", [])) for e in episodes) / n if n else float("nan"),
    }
    by_type = defaultdict(list)
    for e, w in zip(episodes, won):
        if e.get("task_type"):
            by_type[e["task_type"]].append(float(w))
    for task_type, wins in sorted(by_type.items()):
        stats[f"val/success_rate/{task_type}"] = sum(wins) / len(wins)
    return stats
