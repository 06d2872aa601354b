"""The suite-wide rule of tests/conftest.py: a default-install part that cannot be imported fails, never skips."""
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
