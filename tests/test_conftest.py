"""The suite-wide rules of tests/conftest.py: a default-install part that cannot be imported fails, never skips; a
native crash after the last test is reported with every thread's stack (pytest switches Python's fault handler off
before the interpreter shuts down; a crash in a library's teardown then failed CI with a bare "Segmentation fault",
as it once did after "1539 passed")."""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
# by path: several conftest.py files exist, "import conftest" would pick whichever pytest loaded last
_spec = importlib.util.spec_from_file_location("_root_conftest", TESTS / "conftest.py")
_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_conftest)
DEFAULT_INSTALL, missing_default_part = _conftest.DEFAULT_INSTALL, _conftest.missing_default_part


def test_no_importorskip_of_default_install_parts():
    pattern = re.compile(r"importorskip\(\s*[\"']([\w.]+)[\"']")
    found = []
    for path in TESTS.rglob("*.py"):
        if path.resolve() == Path(__file__).resolve():  # its own cases below are strings run in a sandbox
            continue
        for lineno, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for module in pattern.findall(line):
                if module.split(".")[0] in DEFAULT_INSTALL:
                    found.append(f"{path.relative_to(TESTS)}:{lineno}: {module}")
    assert not found, "import the default install's parts directly (a missing part must fail): " + "; ".join(found)


def test_reason_parsing():
    assert missing_default_part("Skipped: could not import 'openrlhf': No module named 'openrlhf'") == "openrlhf"
    assert missing_default_part("could not import 'vllm.engine': x") == "vllm.engine"
    assert missing_default_part("could not import 'some_optional_tool': x") is None
    assert missing_default_part("the shims are inactive where CUDA exists") is None


def test_importorskip_of_a_missing_default_part_fails(tmp_path):
    shutil.copy(TESTS / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_parts.py").write_text(
        "import pytest\n"
        "def test_missing_default_part():\n    pytest.importorskip('tqdm.no_such_module_zz')\n"
        "def test_missing_optional_tool():\n    pytest.importorskip('no_such_tool_zz')\n"
        "def test_plain_skip():\n    pytest.skip('not on this machine')\n")
    (tmp_path / "test_module_level.py").write_text(
        "import pytest\npytest.importorskip('flask.no_such_module_zz')\n\ndef test_never_runs():\n    pass\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    res = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfEs", str(tmp_path)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    assert "ERROR test_module_level.py" in out and "flask.no_such_module_zz" in out  # collection fails
    # the collection error stops the session: run the test-level cases alone
    res = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfEs", "test_parts.py"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    out = res.stdout + res.stderr
    assert "FAILED test_parts.py::test_missing_default_part" in out, out
    assert "1 failed, 2 skipped" in out, out


def test_a_crash_after_the_last_test_prints_the_stacks(tmp_path):
    # Guards: the hook removed, or run before pytest's own faulthandler teardown (which would switch it off again).
    (tmp_path / "test_crash_at_exit.py").write_text(
        "import atexit, ctypes\n"
        "atexit.register(lambda: ctypes.string_at(0))  # a read of address 0 during interpreter shutdown\n"
        "def test_ok():\n    pass\n")
    shutil.copy(TESTS / "conftest.py", tmp_path / "conftest.py")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONFAULTHANDLER", "GACA_TEST_SKIP_TEARDOWN")}
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_crash_at_exit.py"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert "1 passed" in res.stdout, res.stdout + res.stderr
    assert res.returncode == -11  # the crash still fails the run: it is reported, not hidden
    assert "Fatal Python error: Segmentation fault" in res.stderr and "<lambda>" in res.stderr, res.stderr


def test_ci_ends_with_the_sessions_status_before_teardown(tmp_path):
    """With GACA_TEST_SKIP_TEARDOWN=1 (scripts/test.sh) the process exits with pytest's status right after the
    session: a crash in the interpreter's teardown no longer replaces it, and a failing session still exits 1.
    Guards: the exit taken before the verdict (a failure reported as 0), the status dropped, or the switch ignored."""
    shutil.copy(TESTS / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_crash_at_exit.py").write_text(
        "import atexit, ctypes\n"
        "atexit.register(lambda: ctypes.string_at(0))\n"
        "def test_ok():\n    pass\n")
    (tmp_path / "test_fails.py").write_text("def test_no():\n    assert False\n")
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONFAULTHANDLER"}, "GACA_TEST_SKIP_TEARDOWN": "1"}

    def run(name):
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", name], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=300)

    ok = run("test_crash_at_exit.py")
    assert ok.returncode == 0 and "1 passed" in ok.stdout, ok.stdout + ok.stderr
    assert "Segmentation fault" not in ok.stderr
    bad = run("test_fails.py")
    assert bad.returncode == 1 and "1 failed" in bad.stdout, bad.stdout + bad.stderr
