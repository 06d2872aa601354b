"""OpenRLHF's ``Actor.forward`` with the log-probs and entropy computed in chunks (``--run.logprob_chunk_size``).

:func:`chunked_actor_forward` is a drop-in for ``openrlhf.models.actor.Actor.forward`` (same arguments, same
outputs) that never materialises the full ``[tokens, vocab]`` logits: the model is called with an empty
``logits_to_keep`` (its ``lm_head`` runs on zero positions), the final hidden states are taken from the decoder
with a forward hook, and :func:`~gaca_openrlhf.models.chunked_logprobs.chunked_logprobs_entropy` applies the output
head chunk by chunk (activation-checkpointed, so the backward pass recomputes one chunk at a time). Padded and packed
(``--ds.packing_samples``) micro-batches follow exactly the code of ``Actor.forward`` around it. Under DeepSpeed
ZeRO-3 every data-parallel rank calls the head equally often (:func:`agreed_num_chunks`; tested on 2 gloo ranks by
tests/gaca_openrlhf/trainer/test_chunked_zero3.py).

Calls it cannot serve (the caller wants the logits themselves, a VLM, ring attention, a model without
``get_decoder`` / ``get_output_embeddings``) go to the original ``Actor.forward``. :func:`install_chunked_forward`
binds it on an actor instance (OpenRLHF's source is not edited).
"""
from __future__ import annotations

import types
from typing import Optional

import torch

from gaca_openrlhf.models.chunked_logprobs import chunked_logprobs_entropy, num_chunks


def _unwrap(model):
    """The Hugging Face model inside a DeepSpeed engine (``.module``), else ``model`` itself."""
    return getattr(model, "module", model)


def _decoder_and_head(model):
    hf = _unwrap(model)
    try:
        decoder, head = hf.get_decoder(), hf.get_output_embeddings()
    except (AttributeError, NotImplementedError):
        return None, None
    if decoder is None or head is None or decoder is hf:
        return None, None
    return decoder, head


def agreed_num_chunks(num_tokens: int, chunk_size: int, head, device) -> int:
    """This rank's chunk count, or under ZeRO-3 the largest over the ranks that gather ``head``'s weight together.

    Why: ZeRO-3 all-gathers the head's partitioned weight on *every* call of the head module, in the forward pass
    and again in the backward pass (each chunk's activation-checkpointed recomputation calls the module, and its
    backward gathers the weight too). Ranks with different token counts would make different numbers of calls, so
    different numbers of collectives: gloo fails ("Received data size doesn't match expected size") and NCCL hangs.
    All ranks therefore make the largest count of calls, the ranks with fewer tokens calling the head on empty
    (0-token) chunks, which change no value and no gradient. Those empty chunks go through exactly the code of the
    others (checkpointed, concatenated into the outputs), so the backward pass makes the same calls as the forward
    on every rank too. (Gathering the weight once around the chunk loop instead, ``GatheredParameters``, would not
    cover the backward pass: the checkpointed recomputation runs after that context has re-partitioned the weight,
    so the module would gather again per chunk, or a bare ``F.linear`` on the weight would find it empty.) One
    small all-reduce per forward; none without ZeRO-3, where a head call involves no collective.
    """
    import torch.distributed as dist

    local = num_chunks(num_tokens, chunk_size)
    if not (dist.is_available() and dist.is_initialized()):
        return local
    zero3 = [p for p in head.parameters() if hasattr(p, "ds_id")]  # ds_id: set on every ZeRO-3 parameter
    if not zero3:
        return local
    group = getattr(zero3[0], "ds_process_group", None)  # the ranks it is partitioned over (None: the world)
    if dist.get_world_size(group) < 2:
        return local
    count = torch.tensor([local], dtype=torch.long, device=device)
    dist.all_reduce(count, op=dist.ReduceOp.MAX, group=group)
    return int(count.item())


def chunked_actor_forward(self, sequences: torch.LongTensor, action_mask: Optional[torch.Tensor] = None,
                          attention_mask: Optional[torch.Tensor] = None, return_output=False,
                          allgather_logits=False, return_logprobs=False, ring_attn_group=None,
                          packed_seq_lens=None, return_entropy=False, **mm_inputs):
    """``Actor.forward`` (action log-probs, optional entropy in ``output.entropy``) without full-vocabulary logits.

    ``output.logits`` of the returned output is empty (zero positions); callers that need the logits themselves
    (``action_mask is None and not return_logprobs``) are sent to the original forward.
    """
    original = type(self).forward
    wants_logits = action_mask is None and not return_logprobs
    decoder, head = _decoder_and_head(self.model)
    if (wants_logits or ring_attn_group is not None or getattr(self, "is_vlm", False) or mm_inputs
            or decoder is None):
        return original(self, sequences, action_mask, attention_mask, return_output=return_output,
                        allgather_logits=allgather_logits, return_logprobs=return_logprobs,
                        ring_attn_group=ring_attn_group, packed_seq_lens=packed_seq_lens,
                        return_entropy=return_entropy, **mm_inputs)
    from openrlhf.models.ring_attn_utils import gather_and_pad_tensor, unpad_and_slice_tensor

    batch, seqlen = sequences.size()
    packing = getattr(self, "packing_samples", False)
    if packing:
        sequences, position_ids, rolled_sequences, pad_len, indices = unpad_and_slice_tensor(
            sequences, attention_mask, None)
        forward_attention_mask = None
    else:
        rolled_sequences = torch.roll(sequences, shifts=-1, dims=1)
        forward_attention_mask = attention_mask
        position_ids = attention_mask.long().cumsum(-1) - 1
        position_ids.masked_fill_(attention_mask == 0, 1)

    # before the model call, so that every rank reaches this collective at the same point of its forward
    chunks = agreed_num_chunks(rolled_sequences.numel(), self.logprob_chunk_size, head, sequences.device)
    captured = {}

    def keep_hidden(_module, _inputs, out):
        captured["hidden"] = out[0] if isinstance(out, (tuple, list)) else out.last_hidden_state

    handle = decoder.register_forward_hook(keep_hidden)
    try:
        no_positions = torch.zeros(0, dtype=torch.long, device=sequences.device)
        output = self.model(sequences, attention_mask=forward_attention_mask, position_ids=position_ids,
                            logits_to_keep=no_positions)
    finally:
        handle.remove()
    hidden = captured.get("hidden")
    if hidden is None or output["logits"].shape[1] != 0:  # a model ignoring logits_to_keep / not using its decoder
        raise RuntimeError("chunked log-probs need a causal LM that honours logits_to_keep and calls get_decoder(); "
                           "run with --run.logprob_chunk_size 0")
    log_probs, entropy = chunked_logprobs_entropy(
        hidden, rolled_sequences, head, temperature=getattr(self, "temperature", 1.0),
        chunk_size=self.logprob_chunk_size, with_entropy=return_entropy, min_chunks=chunks)

    if return_entropy:
        assert return_output
        if packing:
            entropy = gather_and_pad_tensor(entropy, None, pad_len, indices, batch, seqlen)
        setattr(output, "entropy", entropy[:, :-1])
    if packing:
        log_probs = gather_and_pad_tensor(log_probs, None, pad_len, indices, batch, seqlen)
    log_probs = log_probs[:, :-1]
    if action_mask is None:  # return_logprobs
        return (log_probs, output) if return_output else log_probs
    action_log_probs = log_probs[:, -action_mask.shape[1]:] * action_mask.float()
    return (action_log_probs, output) if return_output else action_log_probs


def install_chunked_forward(actor, chunk_size: int) -> bool:
    """Make ``actor`` (an OpenRLHF ``Actor``) compute log-probs/entropy in chunks of ``chunk_size`` tokens.

    Returns False (and changes nothing) when ``chunk_size <= 0`` or the model has no decoder/head to split.
    """
    if chunk_size <= 0 or _decoder_and_head(actor.model)[0] is None:
        return False
    actor.logprob_chunk_size = int(chunk_size)
    actor.forward = types.MethodType(chunked_actor_forward, actor)
    return True
