"""Edges of ``trainer/entropy.py`` that the model-level tests in ``test_entropy.py`` do not reach (mutmut survivors):
what ``policy_forward_with_entropy`` passes to the actor (ring-attention group, multimodal inputs of a VLM), and the
experience-maker mixin's pass-through of its arguments to OpenRLHF's own dispatch.

The actor here is a recorder (it returns fixed log-probs and token entropies): the real OpenRLHF ``Actor`` on a
Qwen2 model is exercised in ``test_entropy.py``; this file checks only which arguments reach it. Ray is not started:
``ray.get`` is replaced by a recorder in the one test of the synchronous dispatch path.
"""

from types import SimpleNamespace

import pytest
import torch

from gaca_openrlhf.advantages import AdvantageConfig
from gaca_openrlhf.trainer.entropy import ENTROPY_KEY, EntropyExperienceMixin, policy_forward_with_entropy


class _RecordingActor:
    """Stands in for OpenRLHF's ``Actor``: records the call, returns log-probs and per-token entropies."""

    def __init__(self, **attrs):
        self.__dict__.update(attrs)
        self.calls = []
        self.modes = []

    def eval(self):
        self.modes.append("eval")

    def train(self):
        self.modes.append("train")

    def __call__(self, sequences, action_mask, attention_mask, **kwargs):
        self.calls.append(kwargs)
        b, t = sequences.shape
        entropy = torch.arange(b * t, dtype=torch.float32).reshape(b, t)  # entropy[i, j] = i * t + j
        return torch.zeros(b, action_mask.shape[1]), SimpleNamespace(entropy=entropy)


def _inputs():
    seq = torch.ones(2, 5, dtype=torch.long)
    action_mask = torch.tensor([[0, 1, 1], [1, 1, 1]])
    return seq, action_mask, torch.ones_like(seq)


def _self(actor, ring=None):
    return SimpleNamespace(actor=actor, strategy=SimpleNamespace(ring_attn_group=ring))


def test_forward_passes_the_ring_attention_group_and_slices_the_response_entropy():
    """Catches: ``ring_attn_group=None`` or the argument dropped (sequence parallelism silently off)."""
    ring = object()
    actor = _RecordingActor()
    _, row = policy_forward_with_entropy(_self(actor, ring), *_inputs())
    (kw,) = actor.calls
    assert kw["ring_attn_group"] is ring
    assert kw["return_entropy"] is True and kw["return_output"] is True
    assert actor.modes == ["eval", "train"]
    # last 3 of 5 positions: row 0 = mean(3, 4) (mask 0 1 1), row 1 = mean(7, 8, 9)
    assert row.tolist() == [3.5, 8.0]


def test_forward_merges_a_vlms_multimodal_inputs_into_the_actor_call():
    """Catches: the VLM check turned off (wrong attribute name, ``getattr(None, ...)``), the merged inputs dropped,
    or ``merge_mm_train_inputs`` given the wrong list."""
    actor = _RecordingActor(is_vlm=True)
    mm = [[{"pixel_values": torch.ones(1, 4)}, None], {"pixel_values": torch.zeros(2, 4)}]
    policy_forward_with_entropy(_self(actor), *_inputs(), mm_train_inputs_list=mm)
    (kw,) = actor.calls
    assert kw["pixel_values"].tolist() == [[1.0] * 4, [0.0] * 4, [0.0] * 4]


@pytest.mark.parametrize("attrs,mm", [
    ({"is_vlm": True}, None),  # a VLM without images in this batch
    ({}, [{"pixel_values": torch.ones(1, 4)}]),  # a text actor (no is_vlm attribute) given multimodal inputs
    ({"is_vlm": False}, [{"pixel_values": torch.ones(1, 4)}]),
])
def test_forward_passes_no_multimodal_inputs_unless_a_vlm_has_some(attrs, mm):
    """Catches: ``and`` -> ``or`` (merging ``None`` fails), ``getattr`` without its default (a text actor has no
    ``is_vlm``) or with default True (a text actor would get image inputs)."""
    actor = _RecordingActor(**attrs)
    policy_forward_with_entropy(_self(actor), *_inputs(), mm_train_inputs_list=mm)
    (kw,) = actor.calls
    assert "pixel_values" not in kw


class _Base:
    """Records what the mixin passes on to RemoteExperienceMaker's methods."""

    def __init__(self):
        self.dispatched = []
        self.flattened = []

    def _dispatch_forward(self, group, sync_condition, **kwargs):
        self.dispatched.append((group, sync_condition, kwargs))
        return "base-ref"

    def _flatten_results(self, refs, duplicate_factor):
        self.flattened.append(duplicate_factor)
        return list(refs) * duplicate_factor


class _Group:
    def __init__(self):
        self.batch_calls = []
        self.calls = []

    def async_run_method_batch(self, method_name, **kwargs):
        self.batch_calls.append((method_name, kwargs))
        return "entropy-ref"

    def async_run_method(self, method_name):
        self.calls.append(method_name)
        return "cache-ref"


class _Maker(EntropyExperienceMixin, _Base):
    def __init__(self, adv_config=None):
        super().__init__()
        if adv_config is not None:
            self.adv_config = adv_config
        self.actor_model_group = _Group()


def test_wants_entropy_false_without_config_and_for_openrlhf_estimators():
    """Catches: ``getattr(self, "adv_config")`` without its default (AttributeError), and an unknown (OpenRLHF's own)
    estimator name counted as a step estimator (which all get the entropy: the policy entropy is logged)."""
    assert _Maker().wants_entropy() is False
    assert _Maker(SimpleNamespace(estimator="reinforce_baseline")).wants_entropy() is False
    assert _Maker(AdvantageConfig(estimator="empg")).wants_entropy() is True
    assert _Maker(AdvantageConfig(estimator="grpo")).wants_entropy() is True


def test_dispatch_passes_its_arguments_through():
    """Catches: ``sync_condition`` or ``**kwargs`` dropped in the pass-through to OpenRLHF, or the forward kwargs
    (sequences, masks) not sent to the actors' ``forward_with_entropy``."""
    maker = _Maker(SimpleNamespace(estimator="reinforce_baseline"))  # OpenRLHF's own: no entropy
    other = _Group()
    assert maker._dispatch_forward(other, True, sequences="S") == "base-ref"
    assert maker._dispatch_forward(maker.actor_model_group, True, sequences="T") == "base-ref"
    assert maker.dispatched == [(other, True, {"sequences": "S"}), (maker.actor_model_group, True, {"sequences": "T"})]

    maker = _Maker(AdvantageConfig(estimator="empg"))
    assert maker._dispatch_forward(maker.actor_model_group, False, sequences="U") == "entropy-ref"
    assert maker.actor_model_group.batch_calls == [("forward_with_entropy", {"sequences": "U"})]
    assert maker.dispatched == [] and maker.actor_model_group.calls == []


def test_synchronous_dispatch_waits_for_the_forward_then_empties_the_cache(monkeypatch):
    """Catches: ``ray.get(None)`` instead of the forward's ref, or the wrong actor method name for ``empty_cache``."""
    import ray

    got = []
    monkeypatch.setattr(ray, "get", lambda ref: got.append(ref))
    maker = _Maker(AdvantageConfig(estimator="empg"))
    maker._dispatch_forward(maker.actor_model_group, True, sequences="S")
    assert got == ["entropy-ref", "cache-ref"]
    assert maker.actor_model_group.calls == ["empty_cache"]


def test_flatten_passes_the_duplicate_factor_and_works_before_any_entropy_dispatch():
    """Catches: ``duplicate_factor`` dropped, and ``getattr(self, "_entropy_ref")`` without its default (a maker that
    never dispatched an entropy forward has no such attribute)."""
    maker = _Maker(AdvantageConfig(estimator="gaca"))
    assert maker._flatten_results(["a"], 2) == ["a", "a"]
    assert maker.flattened == [2]


def test_entropy_of_a_multi_row_experience_is_kept_flat():
    """Catches: ``reshape(-1)`` -> ``reshape(1)`` (fails for an experience with several rows)."""
    pairs = [(torch.zeros(2, 3), torch.tensor([[0.5], [1.5]]))]  # one experience of two rows

    class _Base2(_Base):
        def make_experience(self, samples_list):
            log_probs = self._flatten_results(self._dispatch_forward(self.actor_model_group, False), 1)
            assert [lp.shape for lp in log_probs] == [(2, 3)]
            return samples_list

    class _Maker2(EntropyExperienceMixin, _Base2):
        pass

    maker = _Maker2()
    maker.adv_config = AdvantageConfig(estimator="empg")
    maker.actor_model_group = _Group()
    maker.actor_model_group.async_run_method_batch = lambda method_name, **kw: pairs
    (out,) = maker.make_experience([SimpleNamespace(info={})])
    assert out.info[ENTROPY_KEY].tolist() == [0.5, 1.5]


def test_row_mean_entropy_of_a_single_token_response_is_that_tokens_entropy():
    """Catches: ``clamp(min=1)`` -> ``clamp(min=2)`` (a one-token step's entropy halved)."""
    from gaca_openrlhf.trainer.entropy import row_mean_entropy

    ent = torch.tensor([[0.7, 3.0], [0.2, 0.4]])
    assert row_mean_entropy(ent, torch.tensor([[1, 0], [0, 1]])).tolist() == pytest.approx([0.7, 0.4])
