"""Per-step policy entropy from the experience forward pass (EMPG's step uncertainty H_t).

EMPG (arXiv 2509.09265) measures a step's uncertainty as the mean over its response tokens of the entropy of the
full next-token distribution of the rollout (old) policy. vLLM's top-k log-probs cannot give that, but the
experience maker already runs the actor over every sample to get pi_old's log-probs: OpenRLHF's ``Actor.forward``
can return the per-token entropy of the same (temperature-scaled) logits in that call (``return_entropy=True``).

- :func:`policy_forward_with_entropy` is an actor-side method (``PolicyModelActor.forward`` plus the entropy): it
  returns ``(action_log_probs, mean response entropy per row)``.
- :class:`EntropyExperienceMixin` makes the experience maker call it instead of ``forward`` on the actor group for
  every step estimator (EMPG reads it; for all of them the trainer logs the policy entropy, ``policy/entropy``),
  keeps the log-probs flowing as before and stores the entropy per sample in ``Experience.info["gaca/entropy"]``;
  OpenRLHF's own estimators pay nothing.
"""
from __future__ import annotations

from typing import List, Optional

import torch

ENTROPY_KEY = "gaca/entropy"


def row_mean_entropy(token_entropy: torch.Tensor, action_mask: torch.Tensor) -> torch.Tensor:
    """(B,) mean of ``token_entropy`` (B, A) over the response tokens (``action_mask``); 0 for a row without any."""
    mask = action_mask.to(token_entropy.dtype)
    return (token_entropy * mask).sum(-1) / mask.sum(-1).clamp(min=1)


def policy_forward_with_entropy(self, sequences, action_mask, attention_mask, packed_seq_lens=None,
                                mm_train_inputs_list=None):
    """Actor method: OpenRLHF's ``PolicyModelActor.forward`` (action log-probs under pi_old) that also returns the
    mean full-distribution token entropy of each row's response, from the same model call."""
    device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    mm_inputs = {}
    if mm_train_inputs_list and getattr(self.actor, "is_vlm", False):
        from openrlhf.utils.vlm_utils import merge_mm_train_inputs

        mm_inputs = merge_mm_train_inputs(mm_train_inputs_list, device)
    self.actor.eval()
    with torch.no_grad():
        action_log_probs, output = self.actor(
            sequences.to(device), action_mask.to(device), attention_mask.to(device),
            return_output=True, return_entropy=True, ring_attn_group=self.strategy.ring_attn_group, **mm_inputs,
        )
        entropy = output.entropy[:, -action_mask.shape[1]:]
        row = row_mean_entropy(entropy.float(), action_mask.to(entropy.device))
    self.actor.train()
    return action_log_probs.to("cpu"), row.to("cpu")


class EntropyExperienceMixin:
    """For a ``RemoteExperienceMaker`` subclass with an ``adv_config``: entropy from the actor's experience forward."""

    def wants_entropy(self) -> bool:
        """True for the project's step estimators: EMPG needs the entropy, and every step run logs it as the policy
        entropy of the iteration (issue 35: learning must be observable); the extra cost is the entropy of logits
        the experience forward computes anyway. False for OpenRLHF's own estimators and without a config."""
        from gaca_openrlhf.advantages import is_step_estimator

        cfg = getattr(self, "adv_config", None)
        return cfg is not None and is_step_estimator(cfg.estimator)

    def _dispatch_forward(self, group, sync_condition, **kwargs):
        if group is not self.actor_model_group or not self.wants_entropy():
            return super()._dispatch_forward(group, sync_condition, **kwargs)
        import ray

        ref = group.async_run_method_batch(method_name="forward_with_entropy", **kwargs)
        if sync_condition:
            ray.get(ref)
            ray.get(group.async_run_method(method_name="empty_cache"))
        self._entropy_ref = ref
        return ref

    def _flatten_results(self, refs, duplicate_factor):
        out = super()._flatten_results(refs, duplicate_factor)
        if refs is getattr(self, "_entropy_ref", None):  # (log-probs, entropy) pairs: pass the log-probs on
            self._pending_entropy: Optional[List[torch.Tensor]] = [e for _, e in out]
            out = [lp for lp, _ in out]
        return out

    def make_experience(self, samples_list):
        self._entropy_ref, self._pending_entropy = None, None
        out = super().make_experience(samples_list)
        if self._pending_entropy is not None:
            for exp, ent in zip(out, self._pending_entropy):
                exp.info[ENTROPY_KEY] = ent.float().reshape(-1)
        self._entropy_ref, self._pending_entropy = None, None
        return out
