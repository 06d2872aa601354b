"""Edges of the policy actor mixin (``trainer/actors.py``) found by mutation testing. OpenRLHF's ``fit`` and the
DeepSpeed engine are replaced by small fakes here (the real ones need the Ray actor set-up; the real engine runs in
test_minibatch_deepspeed.py and the e2e tests); what is checked is the mixin's own logic."""
import math
from types import SimpleNamespace

import pytest
import torch

from gaca_openrlhf.trainer import actors
from gaca_openrlhf.trainer.actors import EMPTY_TOKEN_WEIGHT, StepPolicyMixin, _guard_empty_micro_batches, \
    rotate_hf_checkpoints
from gaca_openrlhf.trainer.minibatch import MiniBatchPlan, plan_minibatches


class BaseActor:
    """Stands in for OpenRLHF's PolicyModelActor.fit: records the scheduler it saw, makes 3 optimizer steps."""

    def fit(self, kl_ctl=0):
        self.seen = dict(scheduler=self.actor.model.lr_scheduler, kl=kl_ctl)
        if self.raise_in_fit:
            raise RuntimeError("boom")
        self.actor.model.global_steps += 3
        return {"policy_loss": 0.5}


class Actor(StepPolicyMixin, BaseActor):
    pass


def _actor(raise_in_fit=False):
    a = Actor()
    a.raise_in_fit = raise_in_fit
    a.actor = SimpleNamespace(model=SimpleNamespace(global_steps=10, lr_scheduler="sched"))
    a.trainer = SimpleNamespace(training_step=lambda *args: {"args": args, "num_action_tokens": 3})
    return a


def test_fit_holds_the_lr_for_the_iteration_and_counts_optimizer_steps():
    a = _actor()
    status = a.fit(0.1)
    assert a.seen == {"scheduler": None, "kl": 0.1}  # detached while training
    assert a.actor.model.lr_scheduler == "sched"  # and put back
    assert {k: status[k] for k in ("policy_loss", "train/optimizer_steps")} == {"policy_loss": 0.5,
                                                                                 "train/optimizer_steps": 3.0}
    assert math.isnan(status["train/grad_norm_mean"]) and math.isnan(status["train/grad_norm_max"])  # no step ran
    step = a.trainer.training_step
    assert step.__gaca_guard__ is True
    a.fit()
    assert a.trainer.training_step is step  # wrapped once, not once per iteration
    assert a.seen["kl"] == 0  # default KL coefficient
    assert step("exp", 0.2, 7)["args"] == ("exp", 0.2, 7, None)  # the wrapped step still trains


class MicroStepsBase:
    """OpenRLHF's fit as far as grad norms go: one training_step call per micro-batch, the optimizer stepping on
    every second call (gradient accumulation 2), each call reporting ``actor_grad_norm`` as DeepSpeed holds it."""

    def fit(self, kl_ctl=0):
        for i in range(len(self.reported)):
            self.trainer.training_step("exp", kl_ctl, i)
        return {}


class MicroStepsActor(StepPolicyMixin, MicroStepsBase):
    pass


def _inner_step(actor):
    def training_step(experience, kl_ctl, i, loss_batch_info=None):
        if i % 2 == 1:  # the accumulation boundary
            actor.actor.model.global_steps += 1
        return {"metrics": {"actor_grad_norm": actor.reported[i]}, "weights": {"actor_grad_norm": None},
                "num_action_tokens": 3}
    return training_step


def test_grad_norm_mean_and_max_over_the_iterations_updates_only():
    """Catches: every micro-step's norm counted (the stale 10s between updates: mean 7, max 10), only the last
    update's (OpenRLHF's actor_grad_norm: 8), or the list not reset between iterations (second mean 3.0)."""
    a = MicroStepsActor()
    a.actor = SimpleNamespace(model=SimpleNamespace(global_steps=0, lr_scheduler="sched"))
    a.trainer = SimpleNamespace(training_step=_inner_step(a))
    a.reported = [10.0, 1.0, 10.0, 3.0, 10.0, 8.0]  # updates after calls 1, 3, 5: norms 1, 3, 8
    first = a.fit()
    assert first["train/optimizer_steps"] == 3.0
    assert (first["train/grad_norm_mean"], first["train/grad_norm_max"]) == (4.0, 8.0)
    a.reported = [10.0, 2.0, 10.0, 2.0]
    second = a.fit()
    assert (second["train/grad_norm_mean"], second["train/grad_norm_max"]) == (2.0, 2.0)


def test_fit_puts_the_scheduler_back_after_an_error():
    a = _actor(raise_in_fit=True)
    with pytest.raises(RuntimeError):
        a.fit()
    assert a.actor.model.lr_scheduler == "sched"


def test_rotation_edge_cases(tmp_path):
    """max_num 0 keeps everything; files and near-miss names are not checkpoints; step numbers sort as numbers."""
    for name in ("global_step9_hf", "global_step10_hf", "global_step100_hf", "global_step5_hf_old"):
        (tmp_path / name).mkdir()
    (tmp_path / "global_step1_hf").write_text("a file, not a checkpoint")
    assert rotate_hf_checkpoints(str(tmp_path), 0) == [] and len(list(tmp_path.iterdir())) == 5
    assert rotate_hf_checkpoints(str(tmp_path), 5) == []  # fewer than max_num: nothing removed
    removed = rotate_hf_checkpoints(str(tmp_path), 1)
    assert sorted(p.rsplit("/", 1)[1] for p in removed) == ["global_step10_hf", "global_step9_hf"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["global_step100_hf", "global_step1_hf", "global_step5_hf_old"]


def test_uneven_split_message():
    a = StepPolicyMixin()
    a.strategy = SimpleNamespace(accumulated_gradient=None)
    a.actor = SimpleNamespace(model=SimpleNamespace(train_micro_batch_size_per_gpu=lambda: 2, dp_world_size=2))
    with pytest.raises(ValueError, match=r"^10 samples cannot form 2 updates of micro batch 2 x 2 ranks$"):
        a.set_iteration_batch(MiniBatchPlan(num_samples=10, updates=2, padded=10, per_update=5, grad_accum=1))


def test_guard_float_nan_and_untouched_cases():
    """A float NaN token metric becomes 0.0; sample-weighted metrics and non-empty micro-batches are untouched;
    no loss_batch_info passes through."""
    seen = {}

    def empty(experience, kl_ctl, step, loss_batch_info=None):
        seen["info"] = loss_batch_info
        return {"metrics": {"clip": float("nan"), "reward": float("nan")}, "weights": {"clip": "token",
                                                                                        "reward": "sample"},
                "num_action_tokens": 0}

    status = _guard_empty_micro_batches(empty)(None, 0.0, 0)
    assert seen["info"] is None and status["metrics"]["clip"] == 0.0 and math.isnan(status["metrics"]["reward"])
    assert status["num_action_tokens"] == EMPTY_TOKEN_WEIGHT == 1e-6

    def full(experience, kl_ctl, step, loss_batch_info=None):
        return {"metrics": {"clip": torch.tensor(float("nan"))}, "weights": {"clip": "token"}, "num_action_tokens": 5}

    passed = {}

    def record(experience, kl_ctl, step, loss_batch_info=None):
        passed.update(args=(experience, kl_ctl, step), info=loss_batch_info)
        return {"metrics": {}, "weights": {}, "num_action_tokens": 0}

    _guard_empty_micro_batches(record)("exp", 0.3, 9, {"dp_size": 2, "batch_num_tokens": torch.tensor(0.0),
                                                        "global_batch_size": torch.tensor(0.0)})
    assert passed["args"] == ("exp", 0.3, 9) and passed["info"]["dp_size"] == 2  # other keys kept
    info = {"batch_num_tokens": torch.tensor(7.0), "global_batch_size": torch.tensor(4.0)}
    status = _guard_empty_micro_batches(full)(None, 0.0, 0, info)
    assert math.isnan(float(status["metrics"]["clip"])) and status["num_action_tokens"] == 5


def test_hf_checkpoints_rotated_on_save_by_rank_zero(tmp_path, monkeypatch):
    class Saver:
        def save_checkpoint(self, tag, client_states=None, metric_value=None, metric_key=None):
            self.saved = (tag, client_states, metric_value, metric_key)

    class A(StepPolicyMixin, Saver):
        pass

    for step in (1, 2, 3):
        (tmp_path / f"global_step{step}_hf").mkdir()
    printed = []
    a = A()
    a.strategy = SimpleNamespace(args=SimpleNamespace(ckpt=SimpleNamespace(save_hf=True, path=str(tmp_path), max_num=2)),
                                 print=printed.append)
    monkeypatch.setattr(actors.torch.distributed, "get_rank", lambda: 0)
    a.save_checkpoint("tag", {"k": 1}, metric_value=0.5, metric_key="m")
    tag, states, value, key = a.saved
    assert (tag, value, key) == ("tag", 0.5, "m")
    # the caller's client state, plus the torch RNG state a resume restores (OpenRLHF shuffles micro-batches with it)
    assert states.keys() == {"k", actors.TORCH_RNG_KEY} and states["k"] == 1
    assert actors.torch.equal(states[actors.TORCH_RNG_KEY], actors.torch.get_rng_state())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["global_step2_hf", "global_step3_hf"]
    assert printed == [f"[gaca] removed old HF checkpoint {tmp_path}/global_step1_hf (--ckpt.max_num 2)"]
    monkeypatch.setattr(actors.torch.distributed, "get_rank", lambda: 1)  # other ranks leave the folders alone
    a.save_checkpoint("tag2")
    assert len(list(tmp_path.iterdir())) == 2 and len(printed) == 1
    a.strategy.args.ckpt.max_num = 1
    a.strategy.args.ckpt.save_hf = False
    monkeypatch.setattr(actors.torch.distributed, "get_rank", lambda: 0)
    a.save_checkpoint("tag3")
    assert len(list(tmp_path.iterdir())) == 2  # no HF copies saved: nothing to rotate


def test_best_checkpoint_keeps_latest_on_the_regular_one_and_one_best_hf_copy(tmp_path, monkeypatch):
    """A best checkpoint (validation) saved after the iteration's regular one: 'latest' still names the regular one
    (DeepSpeed, faked here, rewrites it to the best tag), and only the newest best HF copy is kept. Catches: a resume
    pointed at the best copy, best HF copies piling up (~15 GB each for 7B)."""
    actor_dir = tmp_path / "_actor"
    actor_dir.mkdir()

    class Saver:
        def save_checkpoint(self, tag, client_states=None, metric_value=None, metric_key=None):
            (actor_dir / "latest").write_text(tag)  # as DeepSpeed's save_checkpoint(save_latest=True) does
            (tmp_path / f"{tag}_hf").mkdir()

    class A(StepPolicyMixin, Saver):
        pass

    a = A()
    a.strategy = SimpleNamespace(args=SimpleNamespace(ckpt=SimpleNamespace(save_hf=True, path=str(tmp_path), max_num=5)),
                                 print=lambda *x: None)
    monkeypatch.setattr(actors.torch.distributed, "get_rank", lambda: 0)
    a.save_checkpoint("best_global_step1")  # before any regular checkpoint: the best one is the only, and latest
    assert (actor_dir / "latest").read_text() == "best_global_step1"
    a.save_checkpoint("global_step2")
    a.save_checkpoint("best_global_step2")
    assert (actor_dir / "latest").read_text() == "global_step2"
    assert sorted(p.name for p in tmp_path.glob("*_hf")) == ["best_global_step2_hf", "global_step2_hf"]


def test_iteration_batch_sizes_are_integers():
    engine = SimpleNamespace(train_micro_batch_size_per_gpu=lambda: 2, dp_world_size=2, micro_steps=3, train=None)
    engine.set_train_batch_size = lambda n: setattr(engine, "train", n)
    a = StepPolicyMixin()
    a.strategy = SimpleNamespace(accumulated_gradient=None)
    a.actor = SimpleNamespace(model=engine)
    assert a.set_iteration_batch(plan_minibatches(24, micro=2, dp=2, mini_batch_steps=12)) == 3
    assert type(engine.train) is int and engine.train == 12 and type(a.strategy.accumulated_gradient) is int


def test_a_resumed_actor_restores_the_checkpoint_s_torch_rng_state(monkeypatch):
    import torch

    class Base:
        def init_model_from_pretrained(self, strategy, pretrain, max_steps=None, vllm_engines=None):
            return "loaded"

    class A(StepPolicyMixin, Base):
        pass

    torch.manual_seed(123)
    saved = torch.get_rng_state()
    expected = torch.rand(3)  # what the uninterrupted run draws next
    torch.manual_seed(7)  # the resumed process's own state
    a = A()
    a.actor = None
    a.checkpoint_states = {actors.TORCH_RNG_KEY: saved}
    monkeypatch.setattr(actors, "install_chunked_forward", lambda actor, chunk: False)
    strategy = SimpleNamespace(args=SimpleNamespace(run=SimpleNamespace(logprob_chunk_size=0)), print=print)
    assert a.init_model_from_pretrained(strategy, "m") == "loaded"
    assert torch.equal(torch.rand(3), expected)
    a.checkpoint_states = {}  # a fresh run: its seeded state is left alone
    torch.manual_seed(7)
    fresh = torch.rand(3)
    torch.manual_seed(7)
    a.init_model_from_pretrained(strategy, "m")
    assert torch.equal(torch.rand(3), fresh)
