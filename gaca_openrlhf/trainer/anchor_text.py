"""Anchor texts for similarity grouping (``--gaca.similarity_grouping``), carried beside the numeric step metadata.

``Experience.info`` only carries numbers, so a step sample holds its anchor as a 64-bit hash. Similarity grouping
needs the text: the rollout's step record also carries it (``anchor_text``), the samples generator stores it here
under its hash, and the experience maker -- in the same trainer process -- looks the iteration's texts up by hash
and then clears the table. Identical texts have identical hashes, so one entry per distinct anchor is enough.
"""
from __future__ import annotations

from typing import Iterable, Optional

_TEXTS: dict[int, str] = {}


def remember(anchor_id: int, text: Optional[str]) -> None:
    """Store the text of an anchor id (no-op for None)."""
    if text is not None:
        _TEXTS[int(anchor_id)] = text


def lookup(anchor_ids: Iterable[int]) -> list[str]:
    """Texts of ``anchor_ids``; raises ValueError naming an id whose text was never stored."""
    out = []
    for a in anchor_ids:
        try:
            out.append(_TEXTS[int(a)])
        except KeyError:
            raise ValueError(f"no anchor text stored for anchor id {int(a)}: similarity grouping needs the rollout's "
                             "step records to carry 'anchor_text'") from None
    return out


def clear() -> None:
    _TEXTS.clear()
