"""Variable-length causal attention over packed rows in pure PyTorch: flash-attn's varlen kernel, for CPU.

OpenRLHF's packed path (``--ds.packing_samples``) runs a micro-batch as one ``(1, tokens)`` row whose position ids
restart at 0 at each sample. With flash-attn the varlen kernel keeps the samples apart. Without it, transformers'
``sdpa`` builds a ``[tokens, tokens]`` block-diagonal mask and attends over the whole row: exact, but quadratic in
the row's length (a 4096-token row of ~500-token samples does ~8x the attention work of its samples) plus the mask
itself. Here the row is cut into its samples, which are laid side by side as a right-padded batch and run through
SDPA with ``is_causal`` (no mask tensor; right padding sits after every real key, so causality alone keeps it out),
then gathered back into the row: the attention work of the samples plus that batch's padding, never the row's.

Registered with transformers under :data:`ATTN_IMPLEMENTATION` (``register()``; the CPU backend's worker setup hook
calls it), for both the attention function and its mask builder. Calls that are not a packed row (a padding mask,
several rows, one sample) go to transformers' ``sdpa`` unchanged, so the padded path is the same as with ``sdpa``.
"""
from __future__ import annotations

import weakref

import torch

#: the ``attn_implementation`` name (``--ds.attn_implementation``) this module registers
ATTN_IMPLEMENTATION = "gaca_varlen_sdpa"


def packed_segments(position_ids: torch.Tensor):
    """``(segment, offset, lengths)`` of a packed row's tokens, or None when ``position_ids`` is not one packed row.

    ``position_ids``: ``(1, tokens)``, restarting at 0 at each sample (OpenRLHF's ``unpad_and_slice_tensor``); a
    sample starts wherever the position does not follow the previous one (transformers' rule,
    ``masking_utils.find_packed_sequence_indices``). ``segment[t]``: the sample of token t; ``offset[t]``: its index
    within that sample; ``lengths[s]``: sample s's token count.
    """
    if position_ids is None or position_ids.dim() != 2 or position_ids.shape[0] != 1 or position_ids.shape[1] < 2:
        return None
    pos = position_ids[0]
    starts = torch.ones_like(pos, dtype=torch.bool)
    starts[1:] = pos[1:] != pos[:-1] + 1
    segment = starts.long().cumsum(0) - 1
    lengths = torch.bincount(segment)
    if lengths.numel() == 1:
        return None
    first = torch.cumsum(lengths, 0) - lengths  # index of each sample's first token
    offset = torch.arange(pos.numel(), device=pos.device) - first[segment]
    return segment, offset, lengths


#: (weak reference to the last position-ids tensor, its in-place version, its segments): every layer of one forward
#: (and its recomputation under gradient checkpointing) gets the same tensor, so the segments are found once
_last_segments: tuple = (None, -1, None)


def _segments_once(position_ids):
    """:func:`packed_segments` of ``position_ids``, reused while the same, unmodified tensor comes back."""
    global _last_segments
    if position_ids is None:
        return None
    ref, version, segments = _last_segments
    if ref is not None and ref() is position_ids and version == position_ids._version:
        return segments
    segments = packed_segments(position_ids)
    _last_segments = (weakref.ref(position_ids), position_ids._version, segments)
    return segments


def varlen_sdpa_forward(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None,
                        is_causal=None, position_ids=None, sliding_window=None, **kwargs):
    """Attention of one packed row, sample by sample (module docstring); anything else is transformers' ``sdpa``.

    ``query``: ``(1, heads, tokens, head_dim)``, ``key``/``value``: ``(1, kv_heads, tokens, head_dim)``; returns
    ``((1, tokens, heads, head_dim), None)`` as every transformers attention function does.
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if sliding_window is not None:  # its mask builder returns no mask for unpadded rows: the window would be lost
        raise NotImplementedError(f"{ATTN_IMPLEMENTATION} has no sliding-window attention (layer "
                                  f"{getattr(module, 'layer_idx', '?')}); use flash_attention_2 or sdpa")
    segments = _segments_once(position_ids) if attention_mask is None and query.shape[0] == 1 else None
    if segments is None or query.shape[2] != key.shape[2]:  # not a packed row (or decoding with a cache)
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    segment, offset, lengths = segments
    num, longest = lengths.numel(), int(lengths.max())

    def batch(x):  # (1, h, tokens, d) -> (samples, h, longest, d), right-padded with zeros
        rows = x[0].transpose(0, 1)  # (tokens, h, d)
        out = rows.new_zeros(num, longest, *rows.shape[1:])
        return out.index_put((segment, offset), rows).transpose(1, 2)

    out, _ = sdpa_attention_forward(module, batch(query), batch(key), batch(value), None, dropout=dropout,
                                    scaling=scaling, is_causal=True, **kwargs)  # (samples, longest, h, d)
    return out[segment, offset].unsqueeze(0), None


def varlen_mask(*args, attention_mask=None, **kwargs):
    """Mask builder of :data:`ATTN_IMPLEMENTATION`: no mask for an unpadded batch (the attention function finds the
    packed samples in the position ids and applies causality itself), else transformers' ``sdpa`` mask."""
    if attention_mask is None:
        return None
    from transformers.masking_utils import sdpa_mask

    return sdpa_mask(*args, attention_mask=attention_mask, **kwargs)


def register() -> None:
    """Make ``attn_implementation=ATTN_IMPLEMENTATION`` known to transformers in this process (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(ATTN_IMPLEMENTATION, varlen_sdpa_forward)
    AttentionMaskInterface.register(ATTN_IMPLEMENTATION, varlen_mask)
