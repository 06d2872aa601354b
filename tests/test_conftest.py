"""The suite-wide conftest's exit behaviour: a native crash after the last test is reported with its stacks.

A crash in a library's teardown after every test has passed fails CI with a bare "Segmentation fault" (it did once,
after "1539 passed"); pytest switches Python's fault handler off before the interpreter shuts down. The conftest
switches it back on (``pytest_unconfigure``), so the log names the crash site.
"""
from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_a_crash_after_the_last_test_prints_the_stacks(tmp_path):
    # Guards: the hook removed, or run before pytest's own faulthandler teardown (which would switch it off again).
    (tmp_path / "test_crash_at_exit.py").write_text(
        "import atexit, ctypes\n"
        "atexit.register(lambda: ctypes.string_at(0))  # a read of address 0 during interpreter shutdown\n"
        "def test_ok():\n    pass\n")
    conftest = os.path.join(ROOT, "tests", "conftest.py")  # the suite's conftest, as the tmp folder's own
    (tmp_path / "conftest.py").write_text(f"exec(compile(open({conftest!r}).read(), {conftest!r}, 'exec'))\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONFAULTHANDLER"}
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                          str(tmp_path / "test_crash_at_exit.py")],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert "1 passed" in res.stdout, res.stdout + res.stderr
    assert res.returncode == -11  # the crash still fails the run: it is reported, not hidden
    assert "Fatal Python error: Segmentation fault" in res.stderr and "<lambda>" in res.stderr, res.stderr
