"""Step records -> Experiences, padding duplicates and the StepBatch rebuilt by the advantage hook (no Ray)."""
import pytest
import torch

from openrlhf.trainer.ppo_utils.experience import Experience  # noqa: E402

from gaca_openrlhf.advantages import AdvantageConfig, StepBatch, compute_advantages  # noqa: E402
from gaca_openrlhf.trainer.experience import gather_step_batch  # noqa: E402
from gaca_openrlhf.trainer.samples import episode_stats, pad_to_multiple, step_experience  # noqa: E402


def _step(t, reward=0.0, valid=True, anchor=7, p=5, r=3):
    return dict(prompt_ids=list(range(p)), response_ids=list(range(100, 100 + r)), logprobs=[-0.1 * (t + 1)] * r,
                reward=reward, valid=valid, anchor_id=anchor + t, step_index=t, truncated=False)


def _episode(n_steps, won):
    steps = [_step(t, reward=10.0 if (won and t == n_steps - 1) else 0.0) for t in range(n_steps)]
    return dict(prompt="task", label="", steps=steps, failed=False, error="", won=won, score=float(won),
                task_type="pick", gen_seconds=1.0, env_seconds=0.5)


def test_step_experience_alignment():
    exp = step_experience(_step(0, p=5, r=3), group_id=2, traj_id=1, episode=_episode(1, True))
    assert exp.sequences.shape == (1, 8) and exp.action_mask.shape == (1, 7)
    assert exp.action_mask[0].tolist() == [0, 0, 0, 0, 1, 1, 1]
    assert torch.allclose(exp.rollout_log_probs[0, 4:], torch.full((3,), -0.1))
    assert exp.info["gaca/nll"].item() == pytest.approx(0.1)
    assert exp.rewards.item() == 0.0 and exp.info["gaca/group_id"].item() == 2


def _samples():
    samples = []
    for g in range(2):
        for j, (n, won) in enumerate([(3, True), (2, False)]):
            ep = _episode(n, won)
            samples += [step_experience(s, g, j, ep) for s in ep["steps"]]
    return samples


def test_padding_and_advantages_match_module():
    samples = pad_to_multiple(_samples(), 4, seed=0)  # 10 -> 12
    assert len(samples) == 12
    for i, s in enumerate(samples):
        s.index = [i]
    micro = [Experience.concat_experiences(samples[i : i + 5], 0) for i in range(0, 12, 5)]
    batch, row_pos = gather_step_batch(micro)
    assert len(batch) == 10
    ref = StepBatch.from_lists(
        group_id=[0, 0, 0, 0, 0, 1, 1, 1, 1, 1], traj_id=[0, 0, 0, 1, 1] * 2, step_index=[0, 1, 2, 0, 1] * 2,
        anchor_id=[7, 8, 9, 7, 8] * 2, reward=[0, 0, 10, 0, 0] * 2, valid=[True] * 10,
        nll=[0.1, 0.2, 0.3, 0.1, 0.2] * 2)
    cfg = AdvantageConfig(estimator="gaca")
    a = compute_advantages(batch, cfg).advantage
    assert torch.allclose(a, compute_advantages(ref, cfg).advantage, atol=1e-6)
    dup_rows = [i for i, s in enumerate(samples) if s.info["gaca/dup_of"].item() >= 0]
    assert len(dup_rows) == 2
    for r in dup_rows:
        src = samples[r].info["gaca/dup_of"].item()
        assert row_pos[r] == row_pos[src]


def test_episode_stats():
    eps = [_episode(3, True), _episode(2, False), dict(_episode(1, False), failed=True)]
    st = episode_stats(eps)
    assert st["rollout/success_rate"] == 0.5 and st["rollout/failed_episodes"] == 1
    assert st["rollout/num_steps"] == 2.5 and st["rollout/success_rate/pick"] == 0.5


def test_repeated_env_failures_stop_with_clear_error():
    from gaca_openrlhf.trainer.samples import EnvFailureError, StepSamplesGenerator

    gen = StepSamplesGenerator.__new__(StepSamplesGenerator)
    gen.max_failed_frac, gen.max_failed_iters, gen._failed_iters, gen._iterations_seen = 0.5, 2, 0, 0
    gen._check_failures({"rollout/failed_episodes": 1.0}, 4)  # 25%: fine
    gen._check_failures({"rollout/failed_episodes": 3.0}, 4)  # 75%: first failing iteration
    assert gen._failed_iters == 1
    with pytest.raises(EnvFailureError, match="consecutive iterations"):
        gen._check_failures({"rollout/failed_episodes": 4.0}, 4)
