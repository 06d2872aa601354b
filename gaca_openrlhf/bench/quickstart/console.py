"""What the user sees: one status line per phase (a live elapsed-time counter on a terminal), mirrored with each
phase's start into ``<out>/logs/quickstart.log``; the phases' timings for run.json."""
from __future__ import annotations

import sys
import threading
import time
from pathlib import Path


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
        if self.tty:
            def tick():
                while not stop.wait(1.0):
                    sys.stdout.write(f"\r{head} ... {fmt_duration(time.time() - start)}")
                    sys.stdout.flush()
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
        print(("\r" if self.tty else "") + line + " " * 8, flush=True)
        self.run_log.write(line + "\n")
        self.run_log.flush()
        return detail
