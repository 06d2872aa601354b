"""First run with an empty cache: the shell's model-building step must hand back the model folder and nothing else.

The bug this guards against: ``MODEL=$(python -c 'print(ensure_tiny_model())')`` captured a DeepSpeed warning
printed on a cold cache, so ``MODEL`` held a log line. Here the interpreter is made to pollute stdout on purpose
(a ``sitecustomize`` that prints a warning-like line at start and at exit, as logging would), and the step is run
exactly as the scripts run it: ``source examples/cpu/_common.sh`` in bash, with a fresh ``GACA_CACHE``.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gaca_openrlhf.models import tiny

ROOT = Path(__file__).resolve().parents[3]
NOISE = "[2026-01-01 00:00:00] [WARNING] [real_accelerator.py:1] Setting accelerator to CPU."

SITECUSTOMIZE = f"""
import atexit, sys
print({NOISE!r})
sys.stdout.flush()
atexit.register(lambda: print({NOISE!r}, flush=True))
"""


def _noisy_env(tmp_path: Path, **extra) -> dict:
    noisy = tmp_path / "noisy"
    noisy.mkdir()
    (noisy / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(noisy), str(ROOT)]), PYTHON=sys.executable,
               DS_ACCELERATOR="cpu", **extra)
    env.pop("MODEL", None)
    env.pop("GACA_CACHE_DIR", None)
    return env


def test_shell_model_step_on_empty_cache_yields_a_model_dir(tmp_path):
    cache = tmp_path / "cache"  # empty: the model is built in this run
    env = _noisy_env(tmp_path, GACA_CACHE=str(cache))
    # the noise really reaches stdout in this environment (else the test would prove nothing)
    probe = subprocess.run([sys.executable, "-c", "pass"], env=env, capture_output=True, text=True, check=True)
    assert NOISE in probe.stdout
    script = 'source examples/cpu/_common.sh && printf "%s" "$MODEL" > "$OUT_FILE"'
    out_file = tmp_path / "model_path.txt"
    res = subprocess.run(["bash", "-c", script], cwd=ROOT, env=dict(env, OUT_FILE=str(out_file)),
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    model = Path(out_file.read_text())
    assert model.parent == cache, model  # built under the fresh GACA_CACHE, not the user's cache
    assert (model / "config.json").is_file() and (model / "model.safetensors").is_file()
    assert json.loads((model / "gaca_tiny_model.json").read_text())["recipe_version"] == tiny.RECIPE_VERSION


def test_cli_prints_only_the_path_and_writes_the_path_file(tmp_path):
    cache = tmp_path / "cache"
    env = _noisy_env(tmp_path, GACA_CACHE=str(cache))
    path_file = tmp_path / "p" / "path.txt"
    res = subprocess.run([sys.executable, "-m", "gaca_openrlhf.models.tiny", "--out", str(cache / "m"),
                          "--train-steps", "1", "--path-file", str(path_file)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    # interpreter start/exit noise is outside the builder's control (hence --path-file); everything the build
    # itself writes goes to stderr, so stdout holds the path line and only that noise
    lines = res.stdout.splitlines()
    assert str(cache / "m") in lines
    assert set(lines) == {str(cache / "m"), NOISE}
    assert path_file.read_text() == f"{cache / 'm'}\n"


def test_cache_root_prefers_gaca_cache_and_honours_the_old_name(monkeypatch, tmp_path):
    monkeypatch.delenv("GACA_CACHE", raising=False)
    monkeypatch.setenv("GACA_CACHE_DIR", str(tmp_path / "old"))
    assert tiny.default_model_dir().parent == tmp_path / "old"
    monkeypatch.setenv("GACA_CACHE", str(tmp_path / "new"))
    assert tiny.cache_root() == tmp_path / "new"
    monkeypatch.delenv("GACA_CACHE")
    monkeypatch.delenv("GACA_CACHE_DIR")
    assert tiny.cache_root() == Path.home() / ".cache" / "gaca_openrlhf"


def test_stdout_to_stderr_moves_fd_level_writes(capfd):
    with tiny.stdout_to_stderr():
        os.write(1, b"raw-fd-write\n")
        print("python-write", flush=True)
    print("after")
    out, err = capfd.readouterr()
    assert out == "after\n"
    assert "raw-fd-write" in err and "python-write" in err


@pytest.mark.parametrize("value", ["/a/b c/model", "x"])
def test_write_path_file_is_one_line(tmp_path, value):
    tiny.write_path_file(tmp_path / "f", value)
    assert (tmp_path / "f").read_text() == value + "\n"
