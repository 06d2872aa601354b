"""EMPG's step entropy from the experience forward: OpenRLHF's real ``Actor`` on a small random Qwen2 (CPU), checked
against the entropy computed by hand from the model's own logits; the experience-maker routing without Ray."""

from types import SimpleNamespace

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from openrlhf.models.actor import Actor

from gaca_openrlhf.advantages import AdvantageConfig
from gaca_openrlhf.trainer.entropy import (ENTROPY_KEY, EntropyExperienceMixin, policy_forward_with_entropy,
                                           row_mean_entropy)


def test_row_mean_entropy_ignores_padding():
    ent = torch.tensor([[1.0, 2.0, 100.0], [0.5, 0.5, 0.5], [9.0, 9.0, 9.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [0, 0, 0]])
    assert row_mean_entropy(ent, mask).tolist() == [1.5, 0.5, 0.0]


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_policy_forward_with_entropy_matches_hand_computed(temperature, tmp_path):
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=1, max_position_embeddings=64, tie_word_embeddings=False)
    Qwen2ForCausalLM(cfg).save_pretrained(tmp_path)
    actor = Actor(str(tmp_path), attn_implementation="sdpa", param_dtype="bf16", temperature=temperature)
    model = actor.model  # the same weights; the entropy below is computed independently from its logits
    fake_self = SimpleNamespace(actor=actor, strategy=SimpleNamespace(ring_attn_group=None))

    seq = torch.randint(0, 50, (2, 9))
    attention = torch.ones_like(seq)
    attention[1, :2] = 0  # left padding in row 1
    action_mask = torch.zeros(2, 8, dtype=torch.long)  # T - 1 positions, responses = last 3 / last 5 tokens
    action_mask[0, -3:] = 1
    action_mask[1, -5:] = 1

    log_probs, row = policy_forward_with_entropy(fake_self, seq, action_mask, attention)

    # by hand: distribution that predicts token j+1 is the softmax of logits at position j (temperature-scaled)
    pos = attention.cumsum(-1) - 1
    pos.masked_fill_(attention == 0, 1)
    with torch.no_grad():
        logits = model(seq, attention_mask=attention, position_ids=pos).logits.float() / temperature
    logp = torch.log_softmax(logits, -1)
    token_entropy = -(logp.exp() * logp).sum(-1)[:, :-1]  # (2, 8): entropy of the distribution of token j+1
    want = [(token_entropy[i] * action_mask[i]).sum() / action_mask[i].sum() for i in range(2)]
    assert row.tolist() == pytest.approx([float(w) for w in want], rel=1e-4)
    sampled = logp[:, :-1].gather(-1, seq[:, 1:, None]).squeeze(-1) * action_mask
    assert torch.allclose(log_probs, sampled, atol=1e-4)
    assert (row > 0).all() and (row <= torch.log(torch.tensor(50.0)) + 1e-4).all()  # 0 < H <= log |V|


class _Base:
    """Stands in for RemoteExperienceMaker's dispatch (Ray is not needed to check the routing)."""

    def __init__(self):
        self.calls = []

    def _dispatch_forward(self, group, sync_condition, **kwargs):
        self.calls.append((group.name, "forward"))
        return group.run("forward")

    def _flatten_results(self, refs, duplicate_factor):
        return list(refs)

    def make_experience(self, samples_list):
        lp = self._flatten_results(self._dispatch_forward(self.actor_model_group, False), 1)
        for s, x in zip(samples_list, lp):
            s.action_log_probs = x
        return samples_list


class _Group:
    def __init__(self, name):
        self.name = name
        self.methods = []

    def async_run_method_batch(self, method_name, **kwargs):
        self.methods.append(method_name)
        return self.run(method_name)

    def run(self, method):
        self.methods.append(method)
        if method == "forward_with_entropy":
            return [(torch.zeros(1, 3), torch.tensor([0.25])), (torch.ones(1, 3), torch.tensor([1.5]))]
        return [torch.zeros(1, 3), torch.ones(1, 3)]


class _Maker(EntropyExperienceMixin, _Base):
    def __init__(self, estimator):
        super().__init__()
        self.adv_config = AdvantageConfig(estimator=estimator)
        self.actor_model_group = _Group("actor")


def test_experience_mixin_routes_entropy_for_step_estimators():
    """Catches: the entropy requested only for EMPG (then no step run could log its policy entropy, issue 35)."""
    samples = [SimpleNamespace(info={}), SimpleNamespace(info={})]
    out = _Maker("empg").make_experience(samples)
    assert [s.info[ENTROPY_KEY].tolist() for s in out] == [[0.25], [1.5]]
    assert out[1].action_log_probs.tolist() == [[1.0, 1.0, 1.0]]  # log-probs still flow as before

    samples = [SimpleNamespace(info={}), SimpleNamespace(info={})]
    maker = _Maker("gaca")
    out = maker.make_experience(samples)
    assert [s.info[ENTROPY_KEY].tolist() for s in out] == [[0.25], [1.5]]
    assert "forward" not in maker.actor_model_group.methods


def test_entropy_reaches_the_step_batch_through_real_experiences():
    """Experiences carrying info['gaca/entropy'] (as the mixin stores it) -> gather_step_batch -> EMPG."""
    from openrlhf.trainer.ppo_utils.experience import Experience

    from gaca_openrlhf.advantages import compute_advantages, summary_metrics
    from gaca_openrlhf.trainer.experience import gather_step_batch
    from gaca_openrlhf.trainer.samples import pad_to_multiple, step_experience

    samples = []
    for g in range(2):
        for j, n in enumerate([3, 2]):
            ep = dict(prompt="task", label="", score=0.0)
            for t in range(n):
                step = dict(prompt_ids=[1, 2, 3], response_ids=[4, 5], logprobs=[-0.2, -0.4], valid=True,
                            reward=10.0 if (j == 0 and t == n - 1) else 0.0, anchor_id=t, step_index=t,
                            truncated=False)
                samples.append(step_experience(step, g, j, ep))
    samples = pad_to_multiple(samples, 4, seed=0)
    for i, s in enumerate(samples):
        s.index = [i]
        s.info[ENTROPY_KEY] = torch.tensor([0.1 * (i % 5) + 0.05])  # duplicates carry their source's row anyway
    micro = [Experience.concat_experiences(samples[i: i + 4], 0) for i in range(0, len(samples), 4)]
    batch, _ = gather_step_batch(micro)
    want = [0.1 * (i % 5) + 0.05 for i, s in enumerate(samples) if s.info["gaca/dup_of"].item() < 0]
    assert batch.entropy.tolist() == pytest.approx(want)
    res = compute_advantages(batch, AdvantageConfig(estimator="empg"))
    assert summary_metrics(res)["adv/entropy_mean"] == pytest.approx(sum(want) / len(want))
