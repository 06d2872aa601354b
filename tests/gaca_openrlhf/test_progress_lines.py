"""Progress lines between a child process and the quickstart (gaca_openrlhf/progress_lines.py)."""
import io

import pytest

from gaca_openrlhf.progress_lines import MARK, ProgressLines, parse, time_left


def test_lines_are_throttled_but_the_last_is_always_printed():
    clock = iter([0.0, 0.5, 1.9, 2.1, 2.2, 2.3]).__next__
    out = io.StringIO()
    p = ProgressLines("SFT-steps", every_s=2.0, stream=out, clock=clock)
    for done in (1, 2, 3, 4, 5):  # at t = 0, 0.5, 1.9, 2.1, 2.2
        p(done, 10, 0.123)  # a loss argument (train_sft's callback) is ignored
    p(10, 10)  # t = 2.3: the last one, though within the interval
    assert out.getvalue().splitlines() == [f"{MARK} SFT-steps 1/10", f"{MARK} SFT-steps 4/10",
                                           f"{MARK} SFT-steps 10/10"]
    assert [parse(line) for line in out.getvalue().splitlines()] == [("SFT-steps", 1, 10), ("SFT-steps", 4, 10),
                                                                    ("SFT-steps", 10, 10)]


@pytest.mark.parametrize("line", ["SFT-steps 1/10", f"{MARK} two words 1/10", f"{MARK} x 1/", f"{MARK} x -1/3",
                                  f"x {MARK} x 1/3", ""])
def test_other_lines_are_not_progress(line):
    assert parse(line) is None


def test_what_must_be_one_word():
    with pytest.raises(ValueError, match="one word"):
        ProgressLines("SFT steps")


def test_time_left_at_the_rate_so_far():
    assert time_left(60.0, 100, 400) == pytest.approx(180.0)  # 100 units a minute, 300 to go
    assert time_left(60.0, 400, 400) == 0.0
    assert time_left(5.0, 0, 400) is None and time_left(5.0, 3, 0) is None
