"""The similarity-grouping lookup error names the missing id and what to fix (mutmut: the message was unchecked)."""
import pytest

from gaca_openrlhf.trainer import anchor_text


def test_missing_text_error_says_what_to_fix():
    anchor_text.clear()
    anchor_text.remember(5, "room A")
    with pytest.raises(ValueError) as err:
        anchor_text.lookup([5, 6])
    assert str(err.value) == ("no anchor text stored for anchor id 6: similarity grouping needs the rollout's step "
                              "records to carry 'anchor_text'")
    anchor_text.clear()
