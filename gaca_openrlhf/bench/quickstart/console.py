"""What the user sees: one status line per phase (a live elapsed-time counter on a terminal), mirrored with each
phase's start into ``<out>/logs/quickstart.log``; the phases' timings for run.json."""
from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from gaca_openrlhf.progress_lines import time_left


def fmt_duration(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m}m{s:02d}s" if m else f"{s}s"


class Console:
    """One status line per phase on stdout (a live elapsed-time counter on a terminal); a run log on disk."""

    def __init__(self, out: Path, total_phases: int) -> None:
        self.out = out
        self.total = total_phases
        self.index = 0
        self.log_dir = out / "logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.run_log = open(self.log_dir / "quickstart.log", "a")
        self.tty = sys.stdout.isatty()
        self.timings: dict[str, float] = {}
        self.t0 = time.time()
        self._progress = None  # (what, done, total, when the first unit of `what` was reported)

    def progress(self, what: str, done: int, total: int) -> None:
        """A running phase's progress (``runner.run_logged``'s ``on_progress``): shown in its live status line."""
        now = time.time()
        if self._progress is None or self._progress[0] != what or done < self._progress[1]:
            self._progress = (what, done, total, now, done)  # a new stage: its rate is measured from here
        else:
            self._progress = (what, done, total, self._progress[3], self._progress[4])

    def status(self, head: str, start: float, now: float | None = None) -> str:
        """The live status line: elapsed time, and the current stage's progress and estimated time left."""
        now = time.time() if now is None else now
        line = f"{head} ... {fmt_duration(now - start)}"
        if self._progress is not None:
            what, done, total, since, first = self._progress
            line += f"  {what} {done}/{total}"
            left = time_left(now - since, done - first, total - first)
            if left is not None:
                line += f", ~{fmt_duration(left)} left"
        return line

    def note(self, text: str) -> None:
        print(text, flush=True)
        self.run_log.write(text + "\n")
        self.run_log.flush()

    def phase(self, name: str, title: str, fn, *args, **kwargs):
        """Run ``fn`` as phase ``name``; print ``[i/N] title ... done in T (detail)``; re-raise on failure."""
        self.index += 1
        head = f"[{self.index}/{self.total}] {title}"
        stop = threading.Event()
        start = time.time()
        self._progress = None
        if self.tty:
            def tick():
                width = 0
                while not stop.wait(1.0):
                    line = self.status(head, start)
                    sys.stdout.write("\r" + line + " " * max(0, width - len(line)))
                    sys.stdout.flush()
                    width = len(line)
            threading.Thread(target=tick, daemon=True).start()
        else:
            self.run_log.write(f"{head} started {time.strftime('%H:%M:%S')}\n")
            self.run_log.flush()
        try:
            detail = fn(*args, **kwargs)
        except BaseException as e:
            stop.set()
            line = f"{head} ... FAILED after {fmt_duration(time.time() - start)}: {e}"
            print(("\r" if self.tty else "") + line, flush=True)
            self.run_log.write(line + "\n")
            self.run_log.flush()
            raise
        stop.set()
        took = time.time() - start
        self.timings[name] = round(took, 1)
        line = f"{head} ... done in {fmt_duration(took)}" + (f"  ({detail})" if detail else "")
        print(("\r" if self.tty else "") + line + (" " * 40 if self.tty else " " * 8), flush=True)
        self.run_log.write(line + "\n")
        self.run_log.flush()
        return detail
