"""Per-episode learning signals of the samples generator (``trainer/samples.py``): the off-list share, the share of
task groups with mixed outcomes, the dynamic filter of groups without outcome contrast, and ``episodes.jsonl``
(``trainer/episode_log.py``). The vLLM engines are stubbed (scripted episodes, as in test_samples_edges); the
dataloader is real. Expected values are worked out by hand."""
import json
import math
from types import SimpleNamespace

import pytest

from gaca_openrlhf.trainer.episode_log import FIELDS, EpisodeLog, episode_records
from gaca_openrlhf.trainer.samples import StepSamplesGenerator, episode_stats
from test_samples_edges import _args, _ep, _step, prompt_loader  # same folder (rootdir import mode)


def _listed(*flags):
    return [dict(_step(t), listed=f) for t, f in enumerate(flags)]


def test_off_list_share_counts_only_steps_with_a_list():
    """Steps: listed True, False, None (the env gave no list), False -> 2 off-list of 3 judged. Catches None counted
    as off-list (3/4) or as listed (2/4), and failed episodes' steps counted."""
    eps = [_ep(_listed(True, False)), _ep(_listed(None, False)), _ep(_listed(False, False), failed=True)]
    assert episode_stats(eps)["rollout/off_list_frac"] == pytest.approx(2 / 3)


def test_mixed_outcome_share_by_hand():
    """Groups: 0 scores (1, 0) mixed; 1 scores (0, 0) uniform; 2 scores (1, failed 0): one surviving episode, not
    mixed. 1 of 3. Catches failed episodes' scores counted (group 2 would be mixed: 2/3)."""
    eps = [dict(_ep([_step()], score=s, failed=f), group_id=g) for g, s, f in
           [(0, 1.0, False), (0, 0.0, False), (1, 0.0, False), (1, 0.0, False), (2, 1.0, False), (2, 0.0, True)]]
    assert episode_stats(eps)["rollout/mixed_outcome_group_frac"] == pytest.approx(1 / 3)
    assert "rollout/mixed_outcome_group_frac" not in episode_stats([_ep([_step()])])  # no group ids: not guessed


class Scripted(StepSamplesGenerator):
    def __init__(self, scores, dynamic_filtering):
        """Task i's episodes have the scores ``scores[i]`` (None: failed), one step each."""
        args = _args(len(scores), dynamic_filtering=dynamic_filtering)
        super().__init__(SimpleNamespace(args=args), prompt_loader(len(scores)), None, None, [])
        self.scores = scores

    def _run_episodes(self, prompts, labels, images, **generate_kwargs):
        i = {p: k for k, p in enumerate(prompts)}
        return [[dict(_ep([_step()], score=s or 0.0, won=bool(s), failed=s is None), prompt=p)
                 for s in self.scores[i[p]]] for p in prompts]


SCORES = [[1.0, 0.0], [1.0, 1.0], [1.0, 1.0], [1.0, None, 0.0]]  # mixed, uniform, uniform, mixed (one failed)


def test_dynamic_filtering_drops_groups_without_contrast_before_advantages():
    """Catches: the flag ignored (8 samples instead of 4), a group with a failed episode judged on its failed score,
    the rollout stats computed after filtering (success 6/8 over all non-failed episodes, not 2/4 over the kept ones)."""
    gen = Scripted(SCORES, dynamic_filtering=True)
    samples, *_ = gen.generate_samples()
    assert sorted({int(s.info["gaca/group_id"]) for s in samples}) == [0, 3] and len(samples) == 4
    st = gen.last_stats
    assert st["rollout/filtered_groups"] == 2.0 and st["rollout/filter_pass_rate"] == 0.5
    assert st["rollout/success_rate"] == pytest.approx(6 / 8) and st["rollout/mixed_outcome_group_frac"] == 0.5
    assert [e["filtered"] for e in gen.last_episodes] == [False, False, True, True, True, True, False, False, False]

    off = Scripted(SCORES, dynamic_filtering=False)
    samples, *_ = off.generate_samples()
    assert len(samples) == 8 and "rollout/filtered_groups" not in off.last_stats


def test_every_group_uniform_leaves_no_samples():
    gen = Scripted([[0.0, 0.0], [1.0, 1.0]], dynamic_filtering=True)
    samples, *_ = gen.generate_samples()
    assert samples == [] and gen.last_stats["rollout/filter_pass_rate"] == 0.0


def test_episode_records_by_hand(tmp_path):
    """Catches a field dropped or renamed, length counted from the wrong list, None-listed steps counted as off."""
    ep = dict(_ep(_listed(True, False, None), won=True, score=1.0, task_type="pick"), prompt="games/t1/trial_0",
              group_id=4, traj_id=1)
    ep["steps"][2]["reward"] = 10.0
    rec = episode_records(3, [ep])
    assert rec == [{"iteration": 3, "group": 4, "traj": 1, "task": "games/t1/trial_0", "task_type": "pick",
                    "won": True, "score": 1.0, "length": 3, "failed": False, "filtered": False, "off_list": 1,
                    "reward": 10.0}]
    assert tuple(rec[0]) == FIELDS


def test_episode_log_follows_the_resume_rule(tmp_path):
    """A fresh run never appends to an earlier run's file; a resume keeps the lines up to its checkpoint."""
    ep = dict(_ep([_step()]), group_id=0, traj_id=0)
    log = EpisodeLog(str(tmp_path))
    log.start(0)
    for it in (1, 2, 3):
        log.write(it, [ep, ep])
    EpisodeLog(str(tmp_path)).start(2)  # resumed after iteration 2
    lines = [json.loads(x) for x in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in lines] == [1, 1, 2, 2]
    EpisodeLog(str(tmp_path)).start(0)  # a fresh run
    assert (tmp_path / "episodes.jsonl").read_text() == ""


def test_the_training_loop_writes_every_iterations_episodes(tmp_path):
    """GacaPPOTrainer.fit (model side stubbed, test_trainer_loop.Loop): 3 iterations of 2 tasks x 2 episodes ->
    12 lines numbered like metrics.jsonl. Catches the log written with the pre-increment step (0, 1, 2) or not at all."""
    from test_trainer_loop import Loop

    Loop(tmp_path).fit()
    lines = [json.loads(x) for x in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in lines] == [1] * 4 + [2] * 4 + [3] * 4
    assert [(r["group"], r["traj"]) for r in lines[4:8]] == [(2, 0), (2, 1), (3, 0), (3, 1)]
    assert lines[0]["task"] == "task-0" and lines[0]["length"] == 1
