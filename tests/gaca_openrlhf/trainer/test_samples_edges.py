"""Edges of the samples generator (``trainer/samples.py``) found by mutation testing: every field of a step sample,
the rollout metrics, deterministic padding, the timing split, OpenRLHF's own executors' path, failure thresholds.

The vLLM engines are stubbed (they need a model; on GPU, CUDA): ``_run_episodes`` returns scripted episodes, except in
the one test of ``_run_episodes`` itself, where the Ray dispatch is replaced (the real one runs in the slow e2e tests).
Prompts come from a real stateful dataloader. Expected values are worked out by hand.
"""
import logging
import math
from types import SimpleNamespace

import pytest
import torch
from torchdata.stateful_dataloader import StatefulDataLoader

from gaca_openrlhf.trainer import anchor_text, samples as samples_mod
from gaca_openrlhf.trainer.minibatch import plan_minibatches
from gaca_openrlhf.trainer.samples import EnvFailureError, StepSamplesGenerator, episode_stats, pad_to_multiple, \
    step_experience


def _step(t=0, p=3, r=2, reward=0.0, valid=True, truncated=False, logprobs=None, anchor=5):
    return dict(prompt_ids=list(range(1, p + 1)), response_ids=list(range(50, 50 + r)),
                logprobs=[-0.5] * r if logprobs is None else logprobs, reward=reward, valid=valid, anchor_id=anchor,
                anchor_text=None, step_index=t, truncated=truncated)


def _ep(steps, won=False, score=0.0, failed=False, task_type="", label="lbl", gen=0.0, env=0.0):
    return dict(prompt="task", label=label, steps=steps, failed=failed, error="boom" if failed else "", won=won,
                score=score, task_type=task_type, gen_seconds=gen, env_seconds=env)


# ---- step_experience -------------------------------------------------------------------------------------------

def test_step_experience_fields_and_dtypes_follow_openrlhf():
    """Every field a training actor reads, with OpenRLHF's own dtypes (``_process_response_into_experience``:
    long sequences / attention and action masks). Catches a field dropped or set to None, a mask of the wrong
    shape or dtype, the clip-ratio key renamed, a non-string label passed through unconverted."""
    step = _step(t=2, p=3, r=2, reward=1.5, truncated=True, logprobs=[-0.25, -0.75])
    exp = step_experience(step, group_id=4, traj_id=1, episode=_ep([step], score=0.5, label=7))
    assert exp.sequences.tolist() == [[1, 2, 3, 50, 51]] and exp.sequences.dtype == torch.long
    assert exp.attention_mask.tolist() == [[1, 1, 1, 1, 1]] and exp.attention_mask.dtype == torch.long
    assert exp.action_mask.tolist() == [[0, 0, 1, 1]] and exp.action_mask.dtype == torch.long
    assert exp.rollout_log_probs.tolist() == [[0.0, 0.0, -0.25, -0.75]]
    assert exp.rollout_log_probs.dtype == torch.float32
    assert exp.prompts == ["task"] and exp.labels == ["7"]  # labels are strings (a number label converted)
    assert exp.images == [None] and exp.mm_train_inputs == [None]
    assert exp.rewards.tolist() == [1.5] and exp.scores.tolist() == [0.5]
    assert exp.response_length.tolist() == [2] and exp.truncated.tolist() == [True]
    assert exp.total_length.tolist() == [5.0]
    assert exp.info["response_clip_ratio"].tolist() == [True]
    assert exp.info["reward"].tolist() == [1.5]
    assert exp.info["gaca/nll"].item() == pytest.approx(0.5)
    assert {k: exp.info[k].tolist() for k in ("gaca/group_id", "gaca/traj_id", "gaca/step_index", "gaca/anchor_id",
                                               "gaca/valid", "gaca/dup_of")} == {
        "gaca/group_id": [4], "gaca/traj_id": [1], "gaca/step_index": [2], "gaca/anchor_id": [5],
        "gaca/valid": [1.0], "gaca/dup_of": [-1]}
    assert exp.info["gaca/group_id"].dtype == torch.long


def test_string_label_kept():
    step = _step()
    assert step_experience(step, 0, 0, _ep([step], label="goal text")).labels == ["goal text"]


def test_empty_response_has_zero_nll_not_nan():
    """Catches ``if lp.numel()`` dropped (mean of nothing = NaN) or a default of 1.0."""
    step = _step(r=0, logprobs=[])
    exp = step_experience(step, 0, 0, _ep([step]))
    assert exp.info["gaca/nll"].tolist() == [0.0]


def test_anchor_text_remembered_for_similarity_grouping():
    anchor_text.clear()
    step = dict(_step(anchor=99), anchor_text="You are in room 3.")
    step_experience(step, 0, 0, _ep([step]))
    assert anchor_text.lookup([99]) == ["You are in room 3."]
    anchor_text.clear()


# ---- pad_to_multiple / episode_stats -------------------------------------------------------------------------

def _exps(n):
    return [step_experience(_step(t), 0, t, _ep([])) for t in range(n)]


def test_padding_copies_real_samples_reproducibly():
    """7 samples padded to 16: 9 copies, each of a *real* sample (0..6) -- a copy of a copy would point the advantage
    hook at a row it leaves out (this was a bug: AssertionError in ``gather_step_batch`` once a copy was drawn).
    The sources come from ``random.Random(seed)``: the same seed gives the same copies (a resumed run pads alike)."""
    from openrlhf.trainer.ppo_utils.experience import Experience

    from gaca_openrlhf.trainer.experience import gather_step_batch

    padded = pad_to_multiple(_exps(7), 16, seed=5)
    first = [int(s.info["gaca/dup_of"]) for s in padded[7:]]
    again = [int(s.info["gaca/dup_of"]) for s in pad_to_multiple(_exps(7), 16, seed=5)[7:]]
    assert len(first) == 9 and first == again and all(0 <= d < 7 for d in first)
    for i, s in enumerate(padded):
        s.index = [i]
    batch, row_pos = gather_step_batch([Experience.concat_experiences(padded, 0)])
    assert len(batch) == 7 and row_pos.tolist() == list(range(7)) + first
    assert pad_to_multiple(_exps(8), 4, seed=1)[-1].info["gaca/dup_of"].item() == -1  # already a multiple


def test_episode_stats_every_metric_by_hand():
    """One good episode (the /max(n, 1) guards are exact with n = 1) plus one failed one (ignored).
    Steps: rewards 0 and 3, validity True/False -> valid ratio 0.5, episode reward 3, 2 steps; won, score 0.7."""
    ok = _ep([_step(0, valid=True), _step(1, reward=3.0, valid=False)], won=True, score=0.7, task_type="pick")
    bad = _ep([_step(0)], won=True, score=1.0, failed=True, task_type="pick")
    stats = episode_stats([ok, bad])
    assert math.isnan(stats.pop("rollout/off_list_frac"))  # no step says whether its action was listed
    assert stats == {
        "rollout/num_episodes": 1.0, "rollout/failed_episodes": 1.0, "rollout/num_step_samples": 2.0,
        "rollout/success_rate": 1.0, "rollout/score": 0.7, "rollout/num_steps": 2.0,
        "rollout/valid_action_ratio": 0.5, "rollout/episode_reward": 3.0, "rollout/success_rate/pick": 1.0}
    assert episode_stats([_ep([_step(0, valid=True)])])["rollout/valid_action_ratio"] == 1.0  # one step: 1 / 1


def test_episode_stats_averages_over_episodes():
    eps = [_ep([_step(0, reward=2.0)] * 3, won=True, score=1.0, task_type="a"),
           _ep([_step(0, reward=1.0, valid=False)], won=False, score=0.2, task_type="b"),
           _ep([_step(0)] * 2, won=False, score=0.3)]  # no task type: no per-type entry
    st = episode_stats(eps)
    assert st["rollout/score"] == pytest.approx(0.5) and st["rollout/num_steps"] == pytest.approx(2.0)
    assert st["rollout/valid_action_ratio"] == pytest.approx(5 / 6)
    assert st["rollout/episode_reward"] == pytest.approx((6.0 + 1.0 + 0.0) / 3)
    assert st["rollout/success_rate/a"] == 1.0 and st["rollout/success_rate/b"] == 0.0
    assert [k for k in st if k.startswith("rollout/success_rate/")] == ["rollout/success_rate/a",
                                                                         "rollout/success_rate/b"]


# ---- the generator ---------------------------------------------------------------------------------------------

def _collate(batch):
    return (["ds"] * len(batch), [b["prompt"] for b in batch], [b["label"] for b in batch],
            [b.get("image") for b in batch])


def prompt_loader(n):
    data = [{"prompt": f"task-{i}", "label": f"label-{i}", "image": f"img-{i}"} for i in range(n)]
    return StatefulDataLoader(data, batch_size=1, shuffle=False, collate_fn=_collate)


def _args(batch_size, enable_sleep=False, dynamic_filtering=False):
    return SimpleNamespace(vllm=SimpleNamespace(enable_sleep=enable_sleep),
                           rollout=SimpleNamespace(batch_size=batch_size),
                           algo=SimpleNamespace(dynamic_filtering_enable=dynamic_filtering))


class Scripted(StepSamplesGenerator):
    """``episodes(prompt)`` -> the task's episodes; records what each dispatch received."""

    def __init__(self, episodes, n_prompts, batch_size, enable_sleep=False, **kw):
        super().__init__(SimpleNamespace(args=_args(batch_size, enable_sleep)), prompt_loader(n_prompts), None, None,
                         [], **kw)  # positional, as OpenRLHF's trainer passes them
        self.episodes, self.calls = episodes, []

    def _run_episodes(self, prompts, labels, images, **generate_kwargs):
        self.calls.append((list(prompts), list(labels), list(images), dict(generate_kwargs)))
        return [self.episodes(p) for p in prompts]


def _good(prompt, n=1, gen=0.0, env=0.0):
    return dict(_ep([_step(t) for t in range(n)], won=True, score=1.0, gen=gen, env=env), prompt=prompt)


def test_constructor_defaults():
    """Catches a changed default threshold and state initialised to something else than 'nothing yet'."""
    gen = Scripted(lambda p: [], 1, 1)
    assert gen.max_failed_frac == 0.5 and gen.max_failed_iters == 3 and gen.plan_fn is None
    assert gen.last_stats == {} and gen.last_episodes == [] and gen.last_plan is None
    assert gen.args.rollout.batch_size == 1 and gen.prompts_dataloader is not None


def test_dispatch_gets_labels_images_and_generate_kwargs():
    gen = Scripted(lambda p: [_good(p)], n_prompts=2, batch_size=2)
    gen.generate_samples(temperature=0.7, max_new_tokens=9)
    assert gen.calls == [(["task-0", "task-1"], ["label-0", "label-1"], ["img-0", "img-1"],
                          {"temperature": 0.7, "max_new_tokens": 9})]


def test_single_episode_groups_and_no_plan():
    """Groups of one episode each (n_samples_per_prompt = 1); without a plan_fn no padding, ``last_plan`` None."""
    gen = Scripted(lambda p: [_good(p, n=2)], n_prompts=2, batch_size=2)
    samples, _, consumed, _ = gen.generate_samples()
    assert len(samples) == 4 and consumed == 2 and gen.last_plan is None
    assert [int(s.info["gaca/group_id"]) for s in samples] == [0, 0, 1, 1]


def test_exhausted_dataloader_returns_nothing_and_restarts():
    gen = Scripted(lambda p: [_good(p)], n_prompts=1, batch_size=1)
    first, _, consumed, exhausted = gen.generate_samples()
    assert len(first) == 1 and consumed == 1
    gen.last_stats, gen.last_episodes = {"stale": 1.0}, ["stale"]
    gen._dataloader_iter = iter([])  # a drained epoch
    empty, _, consumed, exhausted = gen.generate_samples()
    assert (empty, consumed, exhausted) == ([], 0, True)
    assert gen.last_stats == {} and gen.last_episodes == []
    again, _, consumed, _ = gen.generate_samples()  # a fresh pass over the prompts
    assert len(again) == 1 and consumed == 1


def test_engines_woken_and_put_to_sleep(monkeypatch):
    seen = []
    monkeypatch.setattr(samples_mod, "batch_vllm_engine_call", lambda engines, method: seen.append(method))
    gen = Scripted(lambda p: [_good(p)], n_prompts=1, batch_size=1, enable_sleep=True)
    gen.generate_samples()
    assert seen == ["wake_up", "sleep"]


class FakeClock:
    """``time.time`` advancing 2 s per call: the rollout's wall time is exactly 2.0 s."""

    def __init__(self):
        self.now = 100.0

    def time(self):
        self.now += 2.0
        return self.now


def test_timing_split_by_the_episodes_generation_and_environment_time(monkeypatch):
    """Wall 2 s; episodes spent 0.3 s generating and 0.1 s in the environment -> 0.5 s environment, 1.5 s
    generation. Catches the share formula (x for /, gen - env, the epsilon), the key names and ``wall``."""
    monkeypatch.setattr(samples_mod, "time", FakeClock())
    gen = Scripted(lambda p: [_good(p, gen=0.1, env=0.05), _good(p, gen=0.2, env=0.05)], n_prompts=1, batch_size=1)
    gen.generate_samples()
    st = gen.last_stats
    assert st["timing/rollout"] == pytest.approx(2.0)
    assert st["timing/environment"] == pytest.approx(0.5) and st["timing/generation"] == pytest.approx(1.5)


def test_openrlhf_executor_results_use_openrlhf_conversion(monkeypatch):
    """An executor that returns OpenRLHF's own result dicts (no ``steps``): OpenRLHF's conversion with the
    generate kwargs (``max_len`` truncates), no step metadata, timing all generation."""
    monkeypatch.setattr(samples_mod, "time", FakeClock())

    def result(prompt, reward):
        return dict(prompt=prompt, label="", observation_tokens=[1, 2, 3, 4, 5, 6], action_ranges=[(3, 6)],
                    rollout_log_probs=[0.0, 0.0, 0.0, -0.1, -0.2, -0.3], reward=reward, scores=reward)

    gen = Scripted(lambda p: [result(p, 1.0), result(p, 0.0)], n_prompts=1, batch_size=1)
    samples, _, consumed, _ = gen.generate_samples(max_len=5)
    assert consumed == 1 and len(samples) == 2
    assert samples[0].sequences.tolist() == [[1, 2, 3, 4, 5]]  # truncated to max_len
    assert [float(s.rewards) for s in samples] == [1.0, 0.0]
    assert "gaca/group_id" not in samples[0].info
    assert gen.last_stats == {"timing/rollout": 2.0, "timing/generation": 2.0, "timing/environment": 0.0}
    assert gen.last_episodes == []


def test_generator_padding_is_reproducible():
    """Two identical runs pad with the same copies (the seed is the group counter, not random)."""
    plan = lambda n: plan_minibatches(n, micro=16, dp=1, mini_batch_steps=16)  # noqa: E731
    runs = []
    for _ in range(2):
        gen = Scripted(lambda p: [_good(p, n=7)], n_prompts=1, batch_size=1, plan_fn=plan)
        out, *_ = gen.generate_samples()
        runs.append([int(s.info["gaca/dup_of"]) for s in out])
    assert len(runs[0]) == 16 and runs[0] == runs[1] and runs[0][:7] == [-1] * 7


def test_failed_episode_is_logged_with_its_task_and_error(caplog):
    gen = Scripted(lambda p: [_good(p), dict(_good(p), failed=True, error="env worker died")], n_prompts=1,
                   batch_size=1)
    samples_mod.logger.propagate = True
    with caplog.at_level(logging.WARNING, logger=samples_mod.logger.name):
        gen.generate_samples()
    assert "episode of task 'task-0' failed, excluded: env worker died" in caplog.text


def _checker(**kw):
    gen = Scripted(lambda p: [], 1, 1, **kw)
    return gen


def test_failure_fraction_of_a_single_episode():
    """1 of 1 episodes failed in iteration 1 is 100% (catches dividing by max(n, 2))."""
    with pytest.raises(EnvFailureError, match="iteration 1: 1/1 episodes failed"):
        _checker()._check_failures({"rollout/failed_episodes": 1.0}, 1)


def test_exactly_the_threshold_is_not_a_failure():
    """More than ``max_failed_frac`` fails; exactly half does not (catches >=)."""
    gen = _checker()
    gen._check_failures({"rollout/failed_episodes": 2.0}, 4)
    assert gen._failed_iters == 0


FIRST = "iteration 1: 3/4 episodes failed (more than 50%): the environment setup is likely broken, not the model. "


@pytest.mark.parametrize("env, hint", [
    (None, ""), ("toy", ""), ("no-such-env", ""),
    ("alfworld", "ALFWorld data (ALFWORLD_DATA) or game generation, or "),
    ("webshop", "the WebShop server (URL, health), or ")])
def test_first_iteration_message_says_what_to_check(env, hint):
    """The run's environment's own hint (``EnvSpec.failure_hint``) before the generic causes; none for an env
    without one, an unregistered one or arguments without an env. Catches another env's hint, or the hint lost."""
    gen = _checker()
    if env:
        gen.args.env = SimpleNamespace(name=env)
    with pytest.raises(EnvFailureError) as err:
        gen._check_failures({"rollout/failed_episodes": 3.0}, 4)
    assert str(err.value) == FIRST + f"Check the warnings above: {hint}env workers that could not be scheduled or " \
                                     "crashed (Ray resources, --env.timeout_s)"


def test_consecutive_failures_message_names_the_envs_hint():
    gen = _checker(max_failed_iters=1)
    gen._iterations_seen = 1
    gen.args.env = SimpleNamespace(name="webshop")
    with pytest.raises(EnvFailureError) as err:
        gen._check_failures({"rollout/failed_episodes": 3.0}, 4)
    assert str(err.value).endswith("in 1 consecutive iterations (last: 3/4); check the environment workers / the "
                                   "WebShop server (URL, health) (see the warnings above)")


def test_run_episodes_dispatches_to_the_engines_and_waits(monkeypatch):
    """``_run_episodes`` = OpenRLHF's dispatch (prompts, labels, images, generate kwargs) + ``ray.get``; Ray itself
    is replaced here (starting it takes ~10 s; the slow e2e tests run it)."""
    gen = _checker()
    seen = {}

    def dispatch(prompts, labels, images=None, **kw):
        seen.update(prompts=prompts, labels=labels, images=images, kw=kw)
        return ["ref-0", "ref-1"]

    monkeypatch.setattr(gen, "_dispatch_prompts_to_vllm", dispatch)
    monkeypatch.setattr(samples_mod, "ray", SimpleNamespace(get=lambda refs: [f"got {r}" for r in refs]))
    out = StepSamplesGenerator._run_episodes(gen, ["p0", "p1"], ["l0", "l1"], ["i0", "i1"], temperature=0.4)
    assert out == ["got ref-0", "got ref-1"]
    assert seen == {"prompts": ["p0", "p1"], "labels": ["l0", "l1"], "images": ["i0", "i1"],
                    "kw": {"temperature": 0.4}}
