"""``GacaPPOTrainer``'s own methods around OpenRLHF's loop: construction, ``train_step``, ``ppo_train``,
``broadcast_to_vllm`` and the post-sync log-prob probe.

The base class's work (OpenRLHF's PPOTrainer: Ray actor groups, DeepSpeed, vLLM engines) cannot run in a unit test;
it runs for real in the slow end-to-end tests. Here the base methods and the Ray handles are replaced by recorders
so that what the project's code adds is checked exactly: the values it passes on and the numbers it computes. Each
test names the one-line bug it catches.
"""
from __future__ import annotations

import types

import pytest
import ray
import torch

import gaca_openrlhf.trainer.ppo_trainer as pt
from gaca_openrlhf.trainer.minibatch import plan_minibatches
from gaca_openrlhf.trainer.ppo_trainer import GacaPPOTrainer
from gaca_openrlhf.trainer.progress import NoProgress
from gaca_openrlhf.trainer.run_shape import RunShape

BASE = GacaPPOTrainer.__mro__[1]  # OpenRLHF's PPOTrainer actor class


def ns(**kw):
    return types.SimpleNamespace(**kw)


class FakeRay:
    """``ray.get`` over plain values (the recorders return values, not object refs)."""

    def __init__(self):
        self.gets = []

    def get(self, x):
        self.gets.append(x)
        return x


@pytest.fixture
def fake_ray(monkeypatch):
    r = FakeRay()
    monkeypatch.setattr(pt, "ray", r)
    return r


def bare(**attrs):
    t = GacaPPOTrainer.__new__(GacaPPOTrainer)
    t._windows = {}  # what __init__ (and each iteration of fit) starts with
    for k, v in attrs.items():
        setattr(t, k, v)
    return t


# ----------------------------------------------------------------------------------------------- __init__


def test_init_wires_the_step_pieces(monkeypatch, tmp_path):
    """Catches: an argument of the samples generator or experience maker dropped or swapped (dataloaders,
    tokenizer, engines, planner, failure limits, KL controller, groups, dump dir, the run's shape), the estimator
    config not built for a step estimator (or built for OpenRLHF's), the LR-schedule length not from the prompt
    count, or the metrics folder not --run.metrics_dir (else the output dir)."""
    made = {}

    def base_init(self, pretrain, strategy, actor, critic, reward, ref, engines, **kw):
        made["base"] = (pretrain, strategy, actor, critic, reward, ref, engines, kw)
        self.args = args
        self.prompts_dataloader, self.eval_dataloader = list(range(10)), "eval-dl"
        self.tokenizer, self.kl_ctl = "tok", "klctl"

    monkeypatch.setattr(BASE, "__init__", base_init)
    monkeypatch.setattr(pt, "StepSamplesGenerator", lambda **kw: made.setdefault("gen", kw))
    monkeypatch.setattr(pt, "StepExperienceMaker", lambda *a, **kw: made.setdefault("maker", (a, kw)))
    monkeypatch.setattr(pt, "MetricsWriter", lambda path: made.setdefault("metrics", path))
    args = ns(
        gaca=ns(alpha=0.3), run=ns(dump_dir="/dump", metrics_dir=None, max_iterations=0),
        run_shape=RunShape(dp_size=2, step_estimator=True, micro_batch_size=2, mini_batch_steps=8),
        algo=ns(advantage=ns(estimator="gaca")),
        train=ns(micro_batch_size=2, batch_size=8, num_episodes=2, seed=7),
        actor=ns(num_nodes=1, num_gpus_per_node=2), ds=ns(ring_attn_size=1, tensor_parallel_size=1),
        rollout=ns(batch_size=4, n_samples_per_prompt=2),
        env=ns(max_failed_frac=0.25, max_failed_iters=5), ckpt=ns(output_dir=str(tmp_path / "out")))
    strat = ns(args=args)
    torch.manual_seed(12345)
    t = GacaPPOTrainer("/m", strat, "actor", "critic", "reward", "ref", ["e"], temperature=0.5)
    # the driver is seeded from --train.seed before the base class builds the prompt loader (its shuffle draws
    # from torch's global generator there): unseeded, two runs of one seed trained on tasks in different orders
    drawn = torch.randint(0, 2**31, (3,))
    torch.manual_seed(7)
    assert torch.equal(drawn, torch.randint(0, 2**31, (3,)))
    assert made["base"] == ("/m", strat, "actor", "critic", "reward", "ref", ["e"], {"temperature": 0.5})
    # outside a Ray actor nobody watches its progress, and asking Ray who we are must not start a Ray (CI once
    # failed every later test that started its own)
    assert isinstance(t.progress, NoProgress) and not ray.is_initialized()
    gen = made["gen"]
    assert gen["strategy"] is strat and gen["prompts_dataloader"] == list(range(10))
    assert gen["eval_dataloader"] == "eval-dl" and gen["tokenizer"] == "tok" and gen["vllm_engines"] == ["e"]
    assert gen["max_failed_frac"] == 0.25 and gen["max_failed_iters"] == 5
    assert gen["plan_fn"] is t.plan_fn and t.plan_fn(10).padded == 16  # mini-batches of 8 over 2 ranks x 2
    a, kw = made["maker"]
    assert a == ("actor", "critic", "reward", "ref", "klctl", strat, "tok")
    assert kw["adv_config"].estimator == "gaca" and kw["adv_config"].alpha == 0.3 and kw["dump_dir"] == "/dump"
    assert kw["run_shape"] is args.run_shape and t.shape is args.run_shape  # the CLI's shape, not a new one
    assert t.max_steps == 6  # ceil(10 prompts / 4) x 2 episodes
    assert made["metrics"] == str(tmp_path / "out") and t._probe is None and t._last_gap == {}
    made.clear()
    args.run.metrics_dir, args.algo.advantage.estimator = "/metrics", "group_norm"
    args.run_shape = RunShape(dp_size=2, step_estimator=False, micro_batch_size=2, mini_batch_steps=8)
    GacaPPOTrainer("/m", strat, "actor", "critic", "reward", "ref", ["e"])
    assert made["metrics"] == "/metrics" and made["maker"][1]["adv_config"] is None


# --------------------------------------------------------------------------------------------- train_step


class Sample:
    def __init__(self, prompt, response):
        self.sequences = torch.tensor([prompt + response])
        self.response_length = torch.tensor([len(response)])


def _stepper(monkeypatch, plan, n_probe=2):
    seen = {}

    def base_train_step(self, samples, global_step):
        seen["base"] = (list(samples), global_step, self.experience_maker.iteration, self._probe, self._iter_plan)
        return {"policy_loss": 0.5, "shared": "base"}, global_step + 1

    monkeypatch.setattr(BASE, "train_step", base_train_step)
    planner = lambda n: plan_minibatches(n, micro=1, dp=1, mini_batch_steps=1)  # noqa: E731
    t = bare(plan_fn=planner, args=ns(run=ns(gap_probe_samples=n_probe)),
             samples_generator=ns(last_plan=plan, last_stats={"rollout/episodes": 3.0, "shared": "gen"}),
             experience_maker=ns(iteration=0, last_stats={"adv/mean": 0.1}), _last_gap={"sync/logprob_gap": 0.02})
    return t, seen


def test_train_step_status_and_probe_prompts(monkeypatch):
    """Catches: the probe prompts not the first --run.gap_probe_samples samples' prompt tokens (response cut off),
    the dump iteration not global_step + 1, the generator's/maker's/gap stats or the plan's update counts missing
    from the status, or the status/step of the base not returned."""
    samples = [Sample([1, 2, 3], [9, 9]), Sample([4, 5], [8]), Sample([6], [7, 7, 7])]
    plan = plan_minibatches(3, micro=1, dp=1, mini_batch_steps=2)
    assert plan.padded == 4  # a plan for 4 samples: not the one of these 3
    t, seen = _stepper(monkeypatch, plan)
    status, step = t.train_step(samples, 4)
    assert step == 5
    base_samples, gs, iteration, probe, iter_plan = seen["base"]
    assert base_samples == samples and gs == 4 and iteration == 5
    assert probe == [[1, 2, 3], [4, 5]]
    assert iter_plan.padded == 3 and iter_plan.updates == 3  # replanned for the 3 samples it got
    assert status == {"policy_loss": 0.5, "shared": "gen", "rollout/episodes": 3.0, "adv/mean": 0.1,
                      "sync/logprob_gap": 0.02, "train/updates_planned": 3.0, "train/samples_per_update": 1.0}
    t, seen = _stepper(monkeypatch, plan_minibatches(3, micro=1, dp=1, mini_batch_steps=2), n_probe=0)
    t.train_step(samples, 0)
    assert seen["base"][3] == []


def test_train_step_uses_the_generators_plan_and_rejects_unpadded_batches(monkeypatch):
    """Catches: the generator's own plan for this batch replaced by a new one, or a batch that no plan pads exactly
    trained anyway (it must fail with a clear message)."""
    samples = [Sample([1], [2]) for _ in range(4)]
    plan = plan_minibatches(4, micro=1, dp=1, mini_batch_steps=2)
    t, seen = _stepper(monkeypatch, plan)
    status, _ = t.train_step(samples, 0)
    assert seen["base"][4] is plan and status["train/updates_planned"] == 2.0  # (the planner would make 4)
    assert status["train/samples_per_update"] == 2.0
    t, _ = _stepper(monkeypatch, None)
    t.plan_fn = lambda n: plan_minibatches(n, micro=2, dp=1, mini_batch_steps=2)
    with pytest.raises(ValueError, match=r"3 samples are not padded for 2 updates \(4\): use a step estimator"):
        t.train_step(samples[:3], 0)


# ------------------------------------------------------------------------------------ ppo_train, broadcast


def test_ppo_train_sets_the_iteration_batch_first(monkeypatch, fake_ray):
    """Catches: the policy ranks not given the iteration's plan (sample and update counts) or iteration (LR position)
    before the base update runs, the call not awaited, or the base's result not returned."""
    order = []
    monkeypatch.setattr(BASE, "ppo_train", lambda self, gs: order.append(("base", gs)) or {"status": gs})
    group = ns(async_run_method=lambda **kw: order.append(("set", kw)) or "ref")
    plan = plan_minibatches(12, micro=1, dp=1, mini_batch_steps=4)
    t = bare(actor_model_group=group, _iter_plan=plan)
    assert t.ppo_train(7) == {"status": 7}
    assert order == [("set", {"method_name": "set_iteration_batch", "plan": plan, "iteration": 7}), ("base", 7)]
    assert fake_ray.gets == ["ref"]


def test_broadcast_times_the_sync_and_probes_after_it(monkeypatch):
    """Catches: the probe not run after a sync (or run with other prompts), its result or the sync time not kept
    for the iteration's status, or the sync time measured wrongly."""
    clock = iter([100.0, 102.5])
    monkeypatch.setattr(pt.time, "time", lambda: next(clock))
    order = []
    monkeypatch.setattr(BASE, "broadcast_to_vllm", lambda self: order.append("sync"))
    t = bare(_probe=[[1, 2]], _last_gap={"old": 1})
    t.probe_logprob_gap = lambda prompts: order.append(("probe", prompts)) or {"sync/logprob_gap": 0.3}
    t.broadcast_to_vllm()
    assert order == ["sync", ("probe", [[1, 2]])]
    assert t._last_gap == {"timing/sync_only": 2.5, "sync/logprob_gap": 0.3}
    clock = iter([0.0, 1.0])
    t._probe = []
    t.broadcast_to_vllm()
    assert t._last_gap == {"timing/sync_only": 1.0} and order[-1] == "sync"


# ------------------------------------------------------------------------------------------ the probe


def _out(ids, lps):
    return ns(outputs=[ns(token_ids=ids, logprobs=[{t: ns(logprob=lp), -1: ns(logprob=-99.0)}
                                                  for t, lp in zip(ids, lps)])])


class ProbeEngine:
    def __init__(self, name, answers, log):
        self.name, self.answers, self.log = name, answers, log
        self.generate = ns(remote=self._generate)

    def _generate(self, prompt, params):
        self.log.append((self.name, list(prompt), params))
        return self.answers[tuple(prompt)]


def _probe_trainer(log, handlers=3, dup=1, sleep=False):
    answers = {(1, 2, 3): _out([10, 11], [-1.0, -2.0]), (4, 5): _out([], []), (6, 7, 8, 9): _out([12], [-0.5])}
    engines = [ProbeEngine("e0", answers, log), ProbeEngine("e1", answers, log)]

    def run_batch(method_name, sequences, action_mask, attention_mask):
        log.append(("batch", method_name, sequences, action_mask, attention_mask))
        # the trainer's log-prob of position j of every sequence: -(j + 1) / 4; one ref per item per rank copy
        return [[-(torch.arange(s.shape[1] - 1, dtype=torch.float32) + 1).unsqueeze(0) / 4] for s in sequences]

    def flatten(refs, duplicate_factor):
        log.append(("flatten", duplicate_factor))
        return [x for r in refs for x in r]

    group = ns(async_run_method_batch=run_batch, duplicate_actors=dup, _actor_handlers=list(range(handlers)))
    return bare(args=ns(vllm=ns(enable_sleep=sleep), rollout=ns(temperature=0.7), train=ns(seed=5)), vllm_engines=engines,
                actor_model_group=group, experience_maker=ns(_flatten_results=flatten))


def test_probe_logprob_gap_by_hand(fake_ray):
    """Catches: the probe's sampling settings (temperature, 16 tokens, 1 log-prob, at least 1 token), prompts not
    spread over the engines round-robin, an empty answer not skipped, the sampled token's log-prob not the one read
    (vLLM also returns others), the action mask off by one (the first response token is predicted at position
    len(prompt) - 1), the items not padded to the DP ranks, duplicate ranks not deduplicated, or the mean/max
    wrong. Gap by hand: prompt [1,2,3] + [10,11]: trainer -0.75, -1.0 vs vLLM -1.0, -2.0 (0.25, 1.0); prompt
    [6,7,8,9] + [12]: -1.0 vs -0.5 (0.5); 3 ranks: the first item repeated (0.25, 1.0): mean 3.0 / 5 = 0.6, max
    1.0."""
    log = []
    t = _probe_trainer(log)
    res = t.probe_logprob_gap([[1, 2, 3], [4, 5], [6, 7, 8, 9]])
    assert res["sync/logprob_gap"] == pytest.approx(0.6) and res["sync/logprob_gap_max"] == pytest.approx(1.0)
    assert res["timing/sync_probe"] >= 0 and set(res) == {"sync/logprob_gap", "sync/logprob_gap_max",
                                                          "timing/sync_probe"}
    gens = [e for e in log if e[0] in ("e0", "e1")]
    assert [(g[0], g[1]) for g in gens] == [("e0", [1, 2, 3]), ("e1", [4, 5]), ("e0", [6, 7, 8, 9])]
    p = gens[0][2]
    assert (p.temperature, p.top_p, p.max_tokens, p.logprobs, p.min_tokens) == (0.7, 1.0, 16, 1, 1)
    # same seed, same run: every probe request carries its own seed (run seed, probe round, prompt index), so the
    # probe samples the same tokens in every run of the seed; the next round draws new ones
    seeds = [g[2].seed for g in gens]
    assert len(set(seeds)) == 3 and all(isinstance(x, int) for x in seeds)
    t2 = _probe_trainer(log2 := [])
    t2.probe_logprob_gap([[1, 2, 3], [4, 5], [6, 7, 8, 9]])
    assert [g[2].seed for g in log2 if g[0] in ("e0", "e1")] == seeds
    t2.probe_logprob_gap([[1, 2, 3]])
    assert [g[2].seed for g in log2 if g[0] in ("e0", "e1")][-1] not in seeds
    (_, method, seqs, masks, attn), = [e for e in log if e[0] == "batch"]
    assert method == "forward"
    assert [s.tolist() for s in seqs] == [[[1, 2, 3, 10, 11]], [[6, 7, 8, 9, 12]], [[1, 2, 3, 10, 11]]]
    assert [m.tolist() for m in masks] == [[[0, 0, 1, 1]], [[0, 0, 0, 1]], [[0, 0, 1, 1]]]
    assert all(a.tolist() == [[1] * 5] for a in attn) and masks[0].dtype == torch.long
    assert ("flatten", 1) in log


def test_probe_ranks_count_duplicates_once_and_sleep_mode(fake_ray, monkeypatch):
    """Catches: ring-attention/TP duplicates counted as separate DP ranks (over-padding), their factor not passed
    to the flattening, or with --vllm.enable_sleep the KV cache not woken before the probe and the engines not put
    back to sleep after it."""
    import openrlhf.trainer.ray.vllm_engine as ve

    log = []
    monkeypatch.setattr(ve, "batch_vllm_engine_call", lambda engines, method, **kw: log.append(
        ("engine_call", method, kw, len(engines))))
    t = _probe_trainer(log, handlers=4, dup=2, sleep=True)  # 2 DP ranks of 2 copies each
    assert t._probe_ranks() == 2 and type(t._probe_ranks()) is int
    res = t.probe_logprob_gap([[1, 2, 3], [4, 5], [6, 7, 8, 9]])
    (_, _, seqs, _, _), = [e for e in log if e[0] == "batch"]
    assert len(seqs) == 2  # two items, two ranks: no padding
    assert res["sync/logprob_gap"] == pytest.approx((0.25 + 1.0 + 0.5) / 3)
    assert ("flatten", 2) in log
    calls = [e for e in log if e[0] == "engine_call"]
    assert calls == [("engine_call", "wake_up", {"tags": ["kv_cache"]}, 2), ("engine_call", "sleep", {}, 2)]
    first_gen = next(i for i, e in enumerate(log) if e[0] == "e0")
    assert log.index(calls[0]) < first_gen and log.index(calls[1]) > first_gen


def test_probe_with_no_sampled_tokens_is_empty(fake_ray):
    """Catches: an all-empty probe producing a gap (or failing) instead of no measurement."""
    log = []
    t = _probe_trainer(log)
    assert t.probe_logprob_gap([[4, 5]]) == {}
    assert not [e for e in log if e[0] == "batch"]


def test_pad_probe_repeats_items_in_order():
    """Catches: padding that repeats the wrong items, stops short of a multiple of the ranks, or pads when the
    count already divides."""
    s, m, v = pt.pad_probe(["a", "b", "c", "d", "e"], [1, 2, 3, 4, 5], ["A", "B", "C", "D", "E"], 4)
    assert s == ["a", "b", "c", "d", "e", "a", "b", "c"] and m == [1, 2, 3, 4, 5, 1, 2, 3]
    assert v == ["A", "B", "C", "D", "E", "A", "B", "C"]
    assert pt.pad_probe(["a", "b"], [1, 2], ["A", "B"], 2) == (["a", "b"], [1, 2], ["A", "B"])
    assert pt.pad_probe(["a"], [1], ["A"], 1) == (["a"], [1], ["A"])


# ------------------------------------------------------------------------------------------ module helpers


def _run_args(**run):
    return ns(run=ns(**run), rollout=ns(batch_size=4), train=ns(num_episodes=1))


def test_lr_schedule_at_least_one_iteration():
    """Catches: the schedule's floor of one iteration raised."""
    a = _run_args(max_iterations=0)
    assert pt.lr_schedule_iterations(a, 1) == 1 and pt.lr_schedule_iterations(a, 0) == 1
    assert pt.lr_schedule_iterations(a, 9) == 3


def test_check_finite_messages_and_non_numbers():
    """Catches: a non-numeric metric (None) taken as non-finite, or the cause messages changed."""
    pt.check_finite({"policy_loss": None, "kl": "n/a"})
    with pytest.raises(pt.NonFiniteTrainingError) as e:
        pt.check_finite({"kl": float("nan"), "check/actor_logprobs_nonfinite": 3})
    assert str(e.value) == (
        "non-finite training metrics {'kl': nan}: the policy's own experience forward was already non-finite (3 "
        "log-probs) before this iteration's update: NaN/garbage policy weights (a NaN update in an earlier "
        "iteration, or weights not loaded: e.g. ZeRO-3 parameters left uninitialized) or an attention/dtype problem")
    with pytest.raises(pt.NonFiniteTrainingError) as e:
        pt.check_finite({"kl": float("inf"), "check/ref_logprobs_nonfinite": 2})
    assert str(e.value) == (
        "non-finite training metrics {'kl': inf}: the reference model's log-probs were non-finite (2 of them) in "
        "the experience pass: the KL loss against them is NaN. Likely the reference model's weights (garbage ZeRO-3 "
        "parameters: on CPU/gloo an all-gather that had not finished, see gaca_openrlhf/cpu/patches.py) or its "
        "forward")
    with pytest.raises(pt.NonFiniteTrainingError) as e:
        pt.check_finite({"policy_loss": float("nan")})
    assert str(e.value) == (
        "non-finite training metrics {'policy_loss': nan}: the experience pass was finite, so the update itself "
        "diverged (learning rate, bf16 overflow of the k3 KL's exp, an empty loss window) or non-finite gradients")


def test_check_sync_gap_boundary_and_messages():
    """Catches: a gap equal to the limit rejected, or the messages changed."""
    pt.check_sync_gap({"sync/logprob_gap": 0.1}, 0.1)
    with pytest.raises(pt.WeightSyncError) as e:
        pt.check_sync_gap({"sync/logprob_gap": 0.25}, 0.1)
    assert str(e.value) == (
        "sync/logprob_gap 0.25 > --run.max_logprob_gap 0.1 right after the weight sync: vLLM is not generating "
        "with the trainer's weights, so the rollouts are off-policy garbage. Likely cause: a broken weight sync "
        "(NCCL/CUDA-IPC group or --vllm.sync_backend, parameter names not matching vLLM's, tied embeddings not "
        "refreshed on vLLM-CPU, vLLM woken without its weights under --vllm.enable_sleep), or vLLM and the trainer "
        "using different models/dtypes")
    with pytest.raises(pt.WeightSyncError) as e:
        pt.check_sync_gap({"sync/logprob_gap": float("nan"), "sync/logprob_gap_rollout": float("nan")}, 0.0)
    assert str(e.value) == (
        "sync/logprob_gap is nan right after the weight sync: the trainer's own experience forward was already NaN "
        "before any update (sync/logprob_gap_rollout is NaN): a model/attention/dtype problem in the actor forward, "
        "not the weight sync")
    with pytest.raises(pt.WeightSyncError) as e:
        pt.check_sync_gap({"sync/logprob_gap": float("nan")}, 0.0)
    assert str(e.value) == ("sync/logprob_gap is nan right after the weight sync: NaN weights reached vLLM (a NaN "
                            "loss/update: see policy_loss) or a broken weight sync")


def test_skipped_round_record():
    """Catches: the skipped round's rollout time not under ``timing/rollout``, its number not global_step + 1, or
    its counters lost."""
    r = pt.skipped_round_record(4, {"rollout/failed_episodes": 6.0}, 2.5)
    assert r["iteration"] == 5 and r["timing/rollout"] == 2.5 and r["rollout/skipped"] == 1.0
    assert r["rollout/failed_episodes"] == 6.0
