"""``GacaPPOTrainer.fit`` details the loop tests (test_trainer_loop.py) leave open: the timing and status keys of
each metrics record, what is checkpointed, episodes over the data, early stop across episodes, and the loggers
closed at the end. Same stubbed loop (real StepSamplesGenerator over scripted episodes; train_step stubbed: the
model side needs Ray/DeepSpeed/vLLM). Each test names the one-line bug it catches."""
from __future__ import annotations

import json

from test_trainer_loop import TASKS, Loop  # same folder (rootdir import mode)


def _records(path):
    return [json.loads(x) for x in (path / "metrics.jsonl").read_text().splitlines()]


def test_record_timing_keys_and_checkpoint_state(tmp_path):
    """Catches: a timing key of the record renamed or filled from the wrong base timing (experience <-
    make_experience, training <- ppo_train, sync <- broadcast), the rollout/step time missing, the generated
    samples logged, or the checkpoint's client state (episode, step, consumed prompts, data position) wrong."""
    status = {"sync/logprob_gap": 0.001, "timing/make_experience": 1.5, "timing/ppo_train": 2.5,
              "timing/broadcast": 0.5, "generated_samples": ["text"], "policy_loss": 0.25}
    loop = Loop(tmp_path, status=status)
    logged = []
    loop.save_logs_and_checkpoints = lambda step, logs, client: logged.append((step, logs, client))
    loop.fit()
    recs = _records(tmp_path)
    assert len(recs) == 3 and [r["iteration"] for r in recs] == [1, 2, 3]
    for r in recs:
        assert (r["timing/experience"], r["timing/training"], r["timing/sync"]) == (1.5, 2.5, 0.5)
        assert r["timing/rollout"] >= 0 and r["timing/rollout"] <= r["timing/step_total"] < 600  # seconds, not epoch
        assert r["policy_loss"] == 0.25 and "generated_samples" not in r
    assert [s for s, _, _ in logged] == [1, 2, 3]
    assert all("generated_samples" not in logs and logs["timing/experience"] == 1.5 for _, logs, _ in logged)
    clients = [c for _, _, c in logged]
    assert [(c["episode"], c["global_step"], c["total_consumed_prompts"]) for c in clients] == \
        [(0, 1, 2), (0, 2, 4), (0, 3, 6)]
    assert all(set(c["data_loader_state_dict"]) for c in clients)  # the dataloader position is saved


def test_missing_base_timings_are_zero(tmp_path):
    """Catches: a missing base timing not recorded as 0.0."""
    loop = Loop(tmp_path, status={"sync/logprob_gap": 0.001})
    loop.fit()
    r = _records(tmp_path)[0]
    assert (r["timing/experience"], r["timing/training"], r["timing/sync"]) == (0.0, 0.0, 0.0)


def test_episodes_repeat_the_data_and_max_iterations_stops_across_episodes(tmp_path):
    """Catches: --train.num_episodes not looping over the data again, or --run.max_iterations not stopping in a
    later episode (the ``stop`` flag not ending the outer loop)."""
    loop = Loop(tmp_path / "a")
    loop.args.train.num_episodes = 2
    loop.fit()
    assert loop.trained == [["task-0", "task-1"], ["task-2", "task-3"], ["task-4", "task-5"]] * 2
    loop = Loop(tmp_path / "b", max_iterations=4)
    loop.args.train.num_episodes = 3
    loop.fit()
    assert len(loop.trained) == 4 and [r["iteration"] for r in _records(tmp_path / "b")] == [1, 2, 3, 4]


def test_loggers_closed_at_the_end(tmp_path):
    """Catches: the wandb / tensorboard loggers not closed when training ends (also when the last rollout round
    left no samples: ``break`` -> ``return``)."""
    closed = []

    class L:
        def __init__(self, name):
            self.name = name

        def close(self):
            closed.append(self.name)

    loop = Loop(tmp_path, script=dict(list(TASKS.items())[:2]))
    loop.wandb_logger, loop.tensorboard_logger = L("wandb"), L("tb")
    loop.fit()
    assert closed == ["wandb", "tb"]
    closed.clear()
    script = {"task-0": [1, 2], "task-1": [2, 1], "task-2": [None, None], "task-3": [None, None]}
    loop = Loop(tmp_path / "skip", script=script)
    loop.wandb_logger, loop.tensorboard_logger = L("wandb"), L("tb")
    loop.fit()
    assert len(loop.trained) == 1 and closed == ["wandb", "tb"]


def test_resume_starts_at_the_saved_episode_and_step(tmp_path):
    """Catches: the saved episode or global step ignored on resume (iterations renumbered from 1), the
    consumed-prompt count restarted, or the best-checkpoint state not restored."""
    ckpt = {"episode": 1, "global_step": 3, "total_consumed_prompts": 6, "data_loader_state_dict": {},
            "best_eval_metric_key": "eval/success", "best_eval_metric_value": 0.7}
    loop = Loop(tmp_path, checkpoint=ckpt)
    loop.args.train.num_episodes = 2
    logged = []
    loop.save_logs_and_checkpoints = lambda step, logs, client: logged.append(client)
    loop.fit()
    assert len(loop.trained) == 3  # episode 2 only
    assert [c["global_step"] for c in logged] == [4, 5, 6] and {c["episode"] for c in logged} == {1}
    assert [c["total_consumed_prompts"] for c in logged] == [8, 10, 12]
    assert [r["iteration"] for r in _records(tmp_path)] == [4, 5, 6]
    assert (loop.best_eval_metric_key, loop.best_eval_metric_value) == ("eval/success", 0.7)  # best-ckpt state


def test_incomplete_first_checkpoint_starts_at_iteration_1(tmp_path, monkeypatch):
    """Catches: a run killed while saving its first checkpoint (``ckpt/_actor`` without DeepSpeed's ``latest``: the
    loaded client states are ``{}``) crashing on resume with ``KeyError: 'episode'`` instead of starting again at
    iteration 1 with a warning."""
    from gaca_openrlhf.trainer import ppo_trainer

    warnings = []
    monkeypatch.setattr(ppo_trainer.logger, "warning", lambda msg, *a, **k: warnings.append(str(msg)))

    class Incomplete(Loop):
        def init_checkpoint_states(self):
            return {}  # what OpenRLHF hands over when DeepSpeed's load found no complete checkpoint

    loop = Incomplete(tmp_path)
    logged = []
    loop.save_logs_and_checkpoints = lambda step, logs, client: logged.append(client)
    loop.fit()
    assert loop.trained == [["task-0", "task-1"], ["task-2", "task-3"], ["task-4", "task-5"]]
    assert loop.syncs == 0  # nothing loaded, so no weights to send to vLLM before the first rollout
    assert [(c["episode"], c["global_step"], c["total_consumed_prompts"]) for c in logged] == \
        [(0, 1, 2), (0, 2, 4), (0, 3, 6)]
    assert [r["iteration"] for r in _records(tmp_path)] == [1, 2, 3]
    assert any("no complete checkpoint" in w and "iteration 1" in w for w in warnings), warnings


def test_complete_checkpoint_states_keeps_loaded_values():
    """Catches: the defaults overriding a loaded state, or a warning for a complete one."""
    from gaca_openrlhf.trainer.ppo_trainer import complete_checkpoint_states

    full = {"episode": 1, "global_step": 3, "total_consumed_prompts": 6, "data_loader_state_dict": {"a": 1},
            "best_eval_metric_key": "k"}
    assert complete_checkpoint_states(full) == full
    assert complete_checkpoint_states(None) == complete_checkpoint_states({}) == {
        "episode": 0, "global_step": 0, "total_consumed_prompts": 0, "data_loader_state_dict": {}}


def test_records_carry_the_phases_wall_clock_windows_in_order(tmp_path, monkeypatch):
    """Catches: the training or sync window not recorded by the real ppo_train / broadcast_to_vllm overrides, a
    window from a previous iteration carried over, the experience window not ending where training starts, the
    windows in another clock than Unix seconds, or them leaking into the console/tensorboard status (smoke_check.py
    maps nvidia-smi samples onto these windows for its per-phase memory peaks)."""
    import time
    from types import SimpleNamespace

    from gaca_openrlhf.trainer import ppo_trainer
    from gaca_openrlhf.trainer.metrics import PHASE_PREFIX, PHASES

    base = ppo_trainer.GacaPPOTrainer.__mro__[1]
    monkeypatch.setattr(base, "ppo_train", lambda self, steps: (time.sleep(0.02), {})[1])
    monkeypatch.setattr(base, "broadcast_to_vllm", lambda self: time.sleep(0.02))
    monkeypatch.setattr(ppo_trainer, "ray", SimpleNamespace(get=lambda ref: ref))

    class Phased(Loop):
        broadcast_to_vllm = ppo_trainer.GacaPPOTrainer.broadcast_to_vllm

        def train_step(self, rollout_samples, global_step):
            time.sleep(0.02)  # the experience pass
            self.ppo_train(global_step)
            if global_step != 1:  # iteration 2 has no weight sync: its record must not reuse iteration 1's
                self.broadcast_to_vllm()
            return dict(self.status), global_step + 1

    loop = Phased(tmp_path)
    loop._probe, loop._iter_plan = None, None
    loop.actor_model_group = SimpleNamespace(async_run_method=lambda **kw: "ref")
    logged = []
    loop.save_logs_and_checkpoints = lambda step, logs, client: logged.append(logs)
    before = time.time()
    loop.fit()
    after = time.time()
    recs = _records(tmp_path)
    for r in recs:
        t = {p: (r.get(f"{PHASE_PREFIX}{p}_start"), r.get(f"{PHASE_PREFIX}{p}_end")) for p in PHASES}
        assert before <= t["rollout"][0] <= t["rollout"][1] == t["experience"][0] <= after
        assert t["experience"][1] == t["training"][0] and t["training"][0] - t["experience"][0] >= 0.02
        assert t["training"][1] - t["training"][0] >= 0.02 and t["training"][1] <= after
        if r["iteration"] == 2:
            assert t["sync"] == (None, None)
        else:
            assert t["training"][1] <= t["sync"][0] and t["sync"][1] - t["sync"][0] >= 0.02 and t["sync"][1] <= after
    assert recs[2][f"{PHASE_PREFIX}rollout_start"] > recs[0][f"{PHASE_PREFIX}sync_end"]
    assert not any(k.startswith(PHASE_PREFIX) for logs in logged for k in logs)


def test_the_loop_publishes_each_phase_it_enters(tmp_path, monkeypatch):
    """Catches: a phase of the loop that publishes nothing (the driver's stall watch would take a long rollout or
    checkpoint for a stuck one, or miss a stuck one), a mark with the wrong iteration, the resume's weight sync not
    marked, or no final mark (trainer/progress.py)."""
    from types import SimpleNamespace

    from gaca_openrlhf.trainer import ppo_trainer

    base = ppo_trainer.GacaPPOTrainer.__mro__[1]
    monkeypatch.setattr(base, "ppo_train", lambda self, steps: {})
    monkeypatch.setattr(base, "broadcast_to_vllm", lambda self: None)
    monkeypatch.setattr(ppo_trainer, "ray", SimpleNamespace(get=lambda ref: ref))

    class Marks:
        def __init__(self):
            self.seen, self.iteration = [], 0

        def mark(self, phase, iteration=None):
            self.iteration = self.iteration if iteration is None else iteration
            self.seen.append((phase, self.iteration))

    class Phased(Loop):
        broadcast_to_vllm = ppo_trainer.GacaPPOTrainer.broadcast_to_vllm

        def train_step(self, rollout_samples, global_step):
            self.ppo_train(global_step)
            self.broadcast_to_vllm()
            return dict(self.status), global_step + 1

    ckpt = {"episode": 0, "global_step": 1, "total_consumed_prompts": 2, "data_loader_state_dict": {}}
    loop = Phased(tmp_path, max_iterations=3, checkpoint=ckpt)
    loop._probe, loop._iter_plan = None, None
    loop.actor_model_group = SimpleNamespace(async_run_method=lambda **kw: "ref")
    loop.save_logs_and_checkpoints = lambda step, logs, client: None
    loop.progress, loop._windows = Marks(), {}
    loop.fit()
    one = lambda k: [("rollout", k), ("training", k), ("sync", k), ("checkpoint", k)]  # noqa: E731
    assert loop.progress.seen == [("start", 1), ("resume_sync", 1), ("sync", 1), *one(2), *one(3), ("done", 3)]
