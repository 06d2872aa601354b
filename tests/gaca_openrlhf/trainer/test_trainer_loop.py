"""GacaPPOTrainer.fit (the real loop) with the model side stubbed: data position on resume and fail-fast checks.

The rollouts come from the real StepSamplesGenerator over a real stateful dataloader with scripted episodes
(test_step_grouping.ScriptedGenerator); ``train_step`` (the Ray actor groups: experience pass, PPO update, weight
sync) is replaced by a stub that records which tasks each iteration trained on and returns a status.
"""
import copy
import json
from types import SimpleNamespace

import pytest

from gaca_openrlhf.trainer.episode_log import EpisodeLog
from gaca_openrlhf.trainer.metrics import MetricsWriter
from gaca_openrlhf.trainer.ppo_trainer import GacaPPOTrainer, WeightSyncError, check_sync_gap
from test_step_grouping import ScriptedGenerator  # same folder (pytest's rootdir import mode)

TASKS = {f"task-{i}": [1, 2] for i in range(6)}


class Loop(GacaPPOTrainer):
    def __init__(self, tmp_path, max_iterations=0, checkpoint=None, status=None, script=TASKS, eval_steps=0):
        self.args = SimpleNamespace(train=SimpleNamespace(num_episodes=1),
                                    run=SimpleNamespace(max_iterations=max_iterations, max_logprob_gap=0.1),
                                    eval=SimpleNamespace(steps=eval_steps, temperature=0.4, n_samples_per_prompt=1))
        self.eval_dataloader = None
        self.samples_generator = ScriptedGenerator(script, n_prompts=len(script), batch_size=2)
        self.prompts_dataloader = self.samples_generator.prompts_dataloader
        self.generate_kwargs, self.wandb_logger, self.tensorboard_logger = {}, None, None
        self.best_eval_metric_key, self.best_eval_metric_value, self._latest_eval_metric_value = "", float("-inf"), None
        self.metrics = MetricsWriter(str(tmp_path))
        self.episode_log = EpisodeLog(str(tmp_path))
        self.checkpoint, self.status = checkpoint, status or {"sync/logprob_gap": 0.001}
        self.trained, self.saved, self.syncs = [], [], 0

    def init_checkpoint_states(self):
        return self.checkpoint or {"episode": 0, "global_step": 0, "total_consumed_prompts": 0,
                                   "data_loader_state_dict": {}}

    def broadcast_to_vllm(self):
        self.syncs += 1

    def train_step(self, rollout_samples, global_step):
        self.trained.append(sorted({s.prompts[0] for s in rollout_samples}))
        return dict(self.status), global_step + 1

    def save_logs_and_checkpoints(self, global_step, logs_dict=None, client_states=None):
        self.saved.append(copy.deepcopy(client_states))


def test_resume_continues_at_the_saved_data_position(tmp_path):
    full = Loop(tmp_path / "full")
    full.fit()
    assert full.trained == [["task-0", "task-1"], ["task-2", "task-3"], ["task-4", "task-5"]]

    first = Loop(tmp_path / "run", max_iterations=1)
    first.fit()
    assert first.trained == [["task-0", "task-1"]] and first.saved[-1]["global_step"] == 1
    resumed = Loop(tmp_path / "run", checkpoint=first.saved[-1])
    resumed.fit()
    # the resumed run trains exactly the iterations the uninterrupted one did after iteration 1
    assert resumed.trained == full.trained[1:]
    assert resumed.syncs == 1  # the loaded weights go to vLLM before rolling out
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in lines] == [1, 2, 3]


def test_broken_weight_sync_stops_in_iteration_1(tmp_path):
    loop = Loop(tmp_path, status={"sync/logprob_gap": 0.6})
    with pytest.raises(WeightSyncError, match="broken weight sync"):
        loop.fit()
    assert len(loop.trained) == 1  # iteration 1, not after the run
    record = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[0])
    assert record["sync/logprob_gap"] == 0.6  # logged before stopping


def test_broken_env_setup_stops_in_iteration_1(tmp_path):
    from gaca_openrlhf.trainer.samples import EnvFailureError

    loop = Loop(tmp_path, script={"task-0": [None, None], "task-1": [None, 1]})
    with pytest.raises(EnvFailureError, match="iteration 1: 3/4 episodes failed"):
        loop.fit()
    assert loop.trained == []


def test_a_round_whose_episodes_all_fail_is_recorded_and_kept_out_of_the_report(tmp_path):
    from gaca_openrlhf.report.data import load_run

    script = {"task-0": [1, 2], "task-1": [2, 1], "task-2": [None, None], "task-3": [None, None],
              "task-4": [1, 1], "task-5": [None, None]}
    loop = Loop(tmp_path, script=script, status={"sync/logprob_gap": 0.001, "policy_loss": 0.5})
    loop.fit()
    assert loop.trained == [["task-0", "task-1"], ["task-4"]]  # round 2 made no update
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [(r["iteration"], r.get("rollout/skipped")) for r in lines] == [(1, None), (2, 1.0), (2, None)]
    assert lines[1]["rollout/failed_episodes"] == 4.0 and lines[1]["rollout/num_episodes"] == 0.0  # counts finished ones
    assert lines[1]["policy_loss"] is None and lines[1]["timing/rollout"] >= 0.0
    run = load_run("r", str(tmp_path))
    assert run.iterations == [1.0, 2.0] and run.records[1]["policy_loss"] == 0.5  # the real iteration 2
    assert any("1 rollout round(s) left no step samples" in w for w in run.warnings)


def test_a_skipped_last_round_does_not_become_an_iteration(tmp_path):
    from gaca_openrlhf.report.data import load_run

    (tmp_path / "metrics.jsonl").write_text(
        json.dumps({"iteration": 1, "policy_loss": 0.5}) + "\n"
        + json.dumps({"iteration": 2, "rollout/skipped": 1.0, "policy_loss": None}) + "\n")
    run = load_run("r", str(tmp_path))
    assert run.iterations == [1.0] and run.records[0]["policy_loss"] == 0.5


def test_sync_gap_check():
    check_sync_gap({"sync/logprob_gap": 0.05}, 0.1)
    check_sync_gap({}, 0.1)  # probe off
    check_sync_gap({"sync/logprob_gap": 3.0}, 0.0)  # check off
    with pytest.raises(WeightSyncError, match="0.2 > --run.max_logprob_gap 0.1"):
        check_sync_gap({"sync/logprob_gap": 0.2}, 0.1)
    with pytest.raises(WeightSyncError, match="NaN weights reached vLLM"):
        check_sync_gap({"sync/logprob_gap": float("nan"), "sync/logprob_gap_rollout": 0.01}, 0.1)
    with pytest.raises(WeightSyncError, match="experience forward was already NaN"):
        check_sync_gap({"sync/logprob_gap": float("nan"), "sync/logprob_gap_rollout": float("nan")}, 0.1)


class ValidatedLoop(Loop):
    """The loop with a validation panel: round r's episodes are scripted (won flags); best checkpoints recorded."""

    def __init__(self, tmp_path, rounds, **kw):
        super().__init__(tmp_path, **kw)
        self.eval_dataloader = object()  # a panel exists; run_validation below stands in for the engines
        self.generate_kwargs = {"temperature": 1.0, "max_new_tokens": 8}  # the rollout's: validation overrides one
        self.rounds, self.val_calls, self.best = list(rounds), [], []
        self.samples_generator.run_validation = self._run_validation

    def _run_validation(self, round_index, temperature, n_samples, generate_kwargs):
        self.val_calls.append((round_index, temperature, n_samples))
        return [dict(won=w, failed=f, score=float(w), steps=[{}] * 3) for w, f in self.rounds.pop(0)]

    def save_best_checkpoint(self, eval_metrics, global_step, client_states=None):
        self.best.append((global_step, eval_metrics))


def test_validation_every_n_iterations_and_after_the_last(tmp_path):
    """3 iterations, --eval.steps 2: validation after iterations 2 and 3 (the last), val/* in those records only,
    each round numbered, at the eval temperature; the best-checkpoint call gets val/success_rate; a failed episode
    counts as lost although it reported won. Catches: validation never run, run every iteration, the last iteration
    skipped, the figures not in the record, a failed-but-won episode counted as a win."""
    loop = ValidatedLoop(tmp_path, eval_steps=2, rounds=[[(True, False), (False, False)],
                                                           [(True, False), (True, True)]])
    loop.fit()
    assert loop.val_calls == [(1, 0.4, 1), (2, 0.4, 1)]
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in lines] == [1, 2, 3]
    assert "val/success_rate" not in lines[0]
    assert lines[1]["val/success_rate"] == 0.5 and lines[2]["val/success_rate"] == 0.5
    assert lines[2]["val/failed_episodes"] == 1.0
    assert loop.best == [(2, {"val/success_rate": 0.5}), (3, {"val/success_rate": 0.5})]


def test_no_validation_without_a_panel_or_with_steps_off(tmp_path):
    loop = ValidatedLoop(tmp_path / "off", eval_steps=0, rounds=[])
    loop.fit()
    assert loop.val_calls == [] and loop.best == []
    plain = Loop(tmp_path / "none", eval_steps=1)  # no --eval.dataset: no eval dataloader
    plain.fit()
    assert not any("val/success_rate" in x for x in (tmp_path / "none" / "metrics.jsonl").read_text().splitlines())
