"""Progress of a long child process as lines its parent reads: ``[gaca-progress] <what> <done>/<total>``.

The quickstart runs each phase as a subprocess whose output goes to a log file, so a terminal showed only an
elapsed-time counter for 10-26 minutes of SFT. A child started with ``--progress-lines`` prints these lines (at
most one every ``every_s`` seconds, and always the last), and the parent
(:func:`gaca_openrlhf.bench.quickstart.runner.run_logged`) turns them into its live status line with an estimate of
the time left (:func:`time_left`)."""
from __future__ import annotations

import re
import sys
import time
from typing import Callable, TextIO

MARK = "[gaca-progress]"
_LINE = re.compile(r"^\[gaca-progress\] (?P<what>\S+) (?P<done>\d+)/(?P<total>\d+)\s*$")


class ProgressLines:
    """A ``progress(done, total, *ignored)`` callback (as :func:`gaca_openrlhf.sft.train.train_sft` takes) that
    prints progress lines for ``what`` (one word), throttled to one per ``every_s`` seconds plus the final one."""

    def __init__(self, what: str, every_s: float = 2.0, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not what or any(c.isspace() for c in what):
            raise ValueError(f"what must be one word, got {what!r}")
        self.what, self.every_s, self.stream, self.clock = what, every_s, stream, clock
        self._last = None

    def __call__(self, done: int, total: int, *_) -> None:
        now = self.clock()
        if done < total and self._last is not None and now - self._last < self.every_s:
            return
        self._last = now
        stream = self.stream or sys.stdout
        stream.write(f"{MARK} {self.what} {int(done)}/{int(total)}\n")
        stream.flush()


def parse(line: str) -> tuple[str, int, int] | None:
    """``(what, done, total)`` of a progress line, else None."""
    m = _LINE.match(line.strip())
    return (m["what"], int(m["done"]), int(m["total"])) if m else None


def time_left(elapsed_s: float, done: int, total: int) -> float | None:
    """Seconds left at the rate so far (None before the first unit is done)."""
    if done <= 0 or total <= 0:
        return None
    return max(0.0, elapsed_s * (total - done) / done)
