"""The quickstart's live status line reads the progress lines of a phase's child process (runner.run_logged +
Console): a real child process, its log, the estimate of the time left."""
import subprocess
import sys

import pytest

from gaca_openrlhf.bench.quickstart.console import Console
from gaca_openrlhf.bench.quickstart.runner import PhaseError, run_logged

CHILD = """
import sys
from gaca_openrlhf.progress_lines import ProgressLines
p = ProgressLines("SFT-steps", every_s=0)
print("some library log line", flush=True)
for i in range(1, 4):
    p(i, 3)
print("stderr line", file=sys.stderr, flush=True)
sys.exit(int(sys.argv[1]))
"""


def test_progress_reaches_the_callback_and_everything_the_log(tmp_path):
    got = []
    log = tmp_path / "logs" / "sft.log"
    run_logged([sys.executable, "-c", CHILD, "0"], log, on_progress=lambda *a: got.append(a))
    assert got == [("SFT-steps", 1, 3), ("SFT-steps", 2, 3), ("SFT-steps", 3, 3)]
    text = log.read_text()
    assert "some library log line" in text and "[gaca-progress] SFT-steps 3/3" in text and "stderr line" in text


def test_a_failing_child_still_raises_with_the_log_tail(tmp_path):
    with pytest.raises(PhaseError, match="exited with 3") as e:
        run_logged([sys.executable, "-c", CHILD, "3"], tmp_path / "x.log", on_progress=lambda *a: None)
    assert "stderr line" in str(e.value)


def test_a_hanging_child_is_killed_at_the_timeout(tmp_path):
    with pytest.raises(subprocess.TimeoutExpired):
        run_logged([sys.executable, "-c", "import time; print('[gaca-progress] x 1/2', flush=True); time.sleep(60)"],
                   tmp_path / "x.log", timeout=3, on_progress=lambda *a: None)


def test_status_line_estimates_the_time_left_per_stage(tmp_path, monkeypatch):
    import gaca_openrlhf.bench.quickstart.console as console

    con = Console(tmp_path, total_phases=6)
    now = [1000.0]
    monkeypatch.setattr(console.time, "time", lambda: now[0])
    assert con.status("[2/6] SFT", start=990.0) == "[2/6] SFT ... 10s"
    con.progress("demonstrations", 10, 100)
    now[0] = 1030.0
    con.progress("demonstrations", 40, 100)  # 30 units in 30 s since the first report: 60 s for the last 60
    assert con.status("[2/6] SFT", start=990.0) == "[2/6] SFT ... 40s  demonstrations 40/100, ~1m00s left"
    con.progress("SFT-steps", 0, 3000)  # a new stage: its own rate, unknown until a unit is done
    assert con.status("[2/6] SFT", start=990.0) == "[2/6] SFT ... 40s  SFT-steps 0/3000"
    now[0] = 1090.0
    con.progress("SFT-steps", 300, 3000)
    assert con.status("[2/6] SFT", start=990.0) == "[2/6] SFT ... 1m40s  SFT-steps 300/3000, ~9m00s left"
