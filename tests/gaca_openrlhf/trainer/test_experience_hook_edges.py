"""Edges of the advantage hook (``trainer/experience.py``) that the broadcast test does not reach (mutation testing).

Real Experiences from ``step_experience`` and the real ``StepExperienceMaker`` (built through its ``__init__`` with
placeholder Ray actor groups: nothing here calls them). Expected values are worked out by hand in each test.
"""
from types import SimpleNamespace

import pytest
import torch

from gaca_openrlhf.advantages import AdvantageConfig
from gaca_openrlhf.trainer.experience import StepExperienceMaker, gather_step_batch
from gaca_openrlhf.trainer.samples import step_experience


def _step(t, prompt_len=3, resp_len=2, reward=0.0, valid=True):
    return dict(prompt_ids=list(range(1, prompt_len + 1)), response_ids=list(range(50, 50 + resp_len)),
                logprobs=[-0.5] * resp_len, reward=reward, valid=valid, anchor_id=100 + t, step_index=t,
                truncated=False)


_EPISODE = dict(prompt="task", label="", failed=False, error="", won=False, score=0.0)


def _samples(n, **kw):
    return [step_experience(_step(t, **kw), 0, t, _EPISODE) for t in range(n)]


def _copy_of(samples, src):
    """A padding copy of ``samples[src]`` (as ``pad_to_multiple`` makes it)."""
    from openrlhf.trainer.ppo_utils.experience import Experience

    orig = samples[src]
    dup = Experience(**{k: v for k, v in orig.__dict__.items()})
    dup.info = dict(orig.info)
    dup.info["gaca/dup_of"] = torch.tensor([src], dtype=torch.long)
    return dup


def _args(dp=1, rollout_micro=2, dynamic=False, estimator="grpo"):
    return SimpleNamespace(
        actor=SimpleNamespace(num_nodes=1, num_gpus_per_node=dp),
        ds=SimpleNamespace(ring_attn_size=1, tensor_parallel_size=1),
        rollout=SimpleNamespace(micro_batch_size=rollout_micro, max_tokens_per_gpu=64),
        train=SimpleNamespace(dynamic_batch_enable=dynamic),
        algo=SimpleNamespace(advantage=SimpleNamespace(estimator=estimator)))


def _maker(pad_token_id=0, **kw):
    """Through the real constructor; the actor/critic/reward/reference groups and KL controller are not used."""
    strategy = SimpleNamespace(args=_args(**kw))
    return StepExperienceMaker(None, None, None, None, None, strategy, SimpleNamespace(pad_token_id=pad_token_id))


def test_constructor_defaults_and_passthrough(tmp_path):
    """Catches: the base constructor's arguments dropped, the default config not built from the estimator name,
    dump_dir / last_stats / iteration initialised wrongly."""
    maker = _maker(estimator="gigpo")
    assert maker.advantage_estimator == "gigpo" and maker.tokenizer.pad_token_id == 0
    assert maker.adv_config == AdvantageConfig(estimator="gigpo")
    assert maker.dump_dir is None and maker.last_stats == {} and maker.iteration == 0
    cfg = AdvantageConfig(estimator="gaca")
    given = StepExperienceMaker(None, None, None, None, None, SimpleNamespace(args=_args()),
                                SimpleNamespace(pad_token_id=0), adv_config=cfg, dump_dir=str(tmp_path))
    assert given.adv_config is cfg and given.dump_dir == str(tmp_path)


def test_copy_of_row_zero_is_left_out_and_mapped_to_row_zero():
    """Catches ``dup_of <= 0`` / ``dup_of < 1`` (a copy of rollout row 0 taken for an original row)."""
    samples = _samples(3)
    samples.append(_copy_of(samples, 0))
    micro = _maker(rollout_micro=4).split_rollout_samples(samples)
    batch, row_pos = gather_step_batch(micro)
    assert len(batch) == 3
    assert batch.step_index.tolist() == [0, 1, 2]
    assert row_pos.tolist() == [0, 1, 2, 0]


def test_copy_of_a_row_missing_from_the_batch_is_an_error():
    """Catches a wrong 'missing' marker in the position table (+1 instead of -1 would map the copy to row 1)."""
    samples = _samples(3)
    samples.append(_copy_of(samples, 0))
    micro = _maker(rollout_micro=2).split_rollout_samples(samples)  # [[0, 1], [2, 3]]
    assert [e.index for e in micro] == [[0, 1], [2, 3]]
    with pytest.raises(AssertionError, match="^a padding duplicate points at a row missing from the batch$"):
        gather_step_batch(micro[1:])  # row 0 (the copy's source) is not there


def _with_logprobs(exp, rollout, action):
    exp.rollout_log_probs = torch.tensor([rollout])
    exp.action_log_probs = torch.tensor([action])
    return exp


def test_logprob_gap_over_real_response_tokens_once():
    """Mean |rollout - trainer| log-prob over response tokens, padding copies counted once (not at all).

    Sample A (prompt 3, response 2 -> mask [0, 0, 1, 1]): gaps 0.1, 0.3 on its response tokens, 5.0 on a prompt
    position (masked). Sample B: gaps 0.2, 0.2. A copy of sample A with gap 9.0: excluded. Mean = 0.8 / 4 = 0.2.
    Catches: the sum or the count not accumulated (= instead of +=), a sign flip inside |.|, num * den, the copy
    filter dropped or off by one (``< 1``), skipping (or stopping at) experiences without log-probs wrongly.
    """
    a, b = _samples(2)
    _with_logprobs(a, [-1.0, -5.0, -1.0, -1.0], [-1.0, 0.0, -1.1, -1.3])
    _with_logprobs(b, [-2.0, -2.0, -2.0, -2.0], [-2.0, -2.0, -2.2, -1.8])
    copy = _with_logprobs(_copy_of([a], 0), [-1.0, -1.0, -1.0, -1.0], [-1.0, -1.0, -10.0, -10.0])
    no_lp = _samples(1)[0]
    no_lp.action_log_probs = None  # e.g. OpenRLHF samples without a rollout/trainer pair: skipped, not a stop
    micro = [no_lp, a, copy, b]
    gap = StepExperienceMaker._logprob_gap(micro)
    assert list(gap) == ["sync/logprob_gap_rollout"]
    assert gap["sync/logprob_gap_rollout"] == pytest.approx(0.2, abs=1e-6)


def test_logprob_gap_of_a_concatenated_micro_batch():
    """Two rows in one micro-batch (dup_of of shape (2,)): the copy row's mask must broadcast per row."""
    from openrlhf.trainer.ppo_utils.experience import Experience

    a, b = _samples(2)
    _with_logprobs(a, [-1.0] * 4, [-1.0, -1.0, -1.5, -1.5])  # gap 0.5 on 2 response tokens
    copy = _with_logprobs(_copy_of([a, b], 0), [-1.0] * 4, [-1.0, -1.0, -3.0, -3.0])
    a.index, copy.index = [0], [1]
    cat = Experience.concat_experiences([a, copy], 0)
    assert StepExperienceMaker._logprob_gap([cat])["sync/logprob_gap_rollout"] == pytest.approx(0.5)


def test_logprob_gap_empty_without_logprobs():
    samples = _samples(2)
    for s in samples:
        s.action_log_probs = None
    assert StepExperienceMaker._logprob_gap(samples) == {}


def test_split_falls_back_to_openrlhf_for_other_samples():
    """Samples without the step metadata or an empty list go to OpenRLHF's split
    (contiguous micro-batches of ``rollout.micro_batch_size``), not to the rank-strided one."""
    plain = _samples(4)
    for s in plain:
        del s.info["gaca/dup_of"]
    micro = _maker(dp=2, rollout_micro=2).split_rollout_samples(plain)
    assert [e.index for e in micro] == [[0, 1], [2, 3]]  # the step split would give [[0, 2], [1, 3]]
    assert _maker(dp=2).split_rollout_samples([]) == []


def test_dynamic_batching_splits_step_samples_by_token_budget():
    """Token-budget micro-batches keep the rank-strided split (row r -> rank r mod DP), give every rank the same
    number of micro-batches, hold each row exactly once and stay within ``rollout.max_tokens_per_gpu`` (64 here)."""
    samples = [step_experience(_step(t, prompt_len=p, resp_len=r), 0, t, _EPISODE)
               for t, (p, r) in enumerate([(40, 10), (3, 2), (20, 5), (30, 30), (5, 1), (8, 8), (50, 12), (2, 2)])]
    lengths = [int(s.attention_mask.sum()) for s in samples]
    micro = _maker(dp=2, dynamic=True).split_rollout_samples(samples)
    ranks = [micro[: len(micro) // 2], micro[len(micro) // 2:]]
    assert len(ranks[0]) == len(ranks[1]) >= 2
    for rank, batches in enumerate(ranks):
        rows = sorted(i for e in batches for i in e.index)
        assert rows == list(range(rank, len(samples), 2))
        for e in batches:
            assert sum(lengths[i] for i in e.index) <= 64 or len(e.index) == 1
            assert int(e.attention_mask.sum()) == sum(lengths[i] for i in e.index)


def test_split_single_sample_and_micro_batch_of_one():
    """Catches reading the metadata of sample 1 (a one-sample rollout) and ``max(2, micro)``."""
    micro = _maker(dp=1, rollout_micro=1).split_rollout_samples(_samples(1))
    assert [e.index for e in micro] == [[0]]
    micro = _maker(dp=2, rollout_micro=1).split_rollout_samples(_samples(4))
    assert [e.index for e in micro] == [[0], [2], [1], [3]]


def test_split_three_micro_batches_per_rank_are_consecutive():
    """Catches ``start = size`` (the third micro-batch repeating the second's rows)."""
    micro = _maker(dp=1, rollout_micro=2).split_rollout_samples(_samples(6))
    assert [e.index for e in micro] == [[0, 1], [2, 3], [4, 5]]


def test_split_pads_sequences_with_the_tokenizer_pad_id():
    """Rows of different lengths in one micro-batch: the shorter one is right-padded with pad_token_id."""
    samples = [step_experience(_step(0, prompt_len=3, resp_len=2), 0, 0, _EPISODE),
               step_experience(_step(1, prompt_len=3, resp_len=4), 0, 1, _EPISODE)]
    micro = _maker(pad_token_id=7, rollout_micro=2).split_rollout_samples(samples)
    assert micro[0].sequences[0].tolist() == [1, 2, 3, 50, 51, 7, 7]


def test_uneven_split_error_explains_the_padding():
    with pytest.raises(ValueError, match=r"3 step samples cannot be split evenly over 2 DP ranks \(the samples "
                                         r"generator pads to a multiple: see gaca_openrlhf.trainer.minibatch\)"):
        _maker(dp=2).split_rollout_samples(_samples(3))
