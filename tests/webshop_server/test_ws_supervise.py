"""``python -m webshop_server.supervise``: a killed server is restarted; its episodes fail with the reason."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agents.webshop.client import SessionLostError, WebShopClient
from webshop_server.testing import free_port, wait_healthy

ROOT = Path(__file__).resolve().parents[2]


def _pid(path, not_equal=None, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pid = int(Path(path).read_text())
            if pid != not_equal:
                return pid
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    raise TimeoutError(path)


@pytest.mark.slow
def test_supervisor_restarts_a_killed_server(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    pid_file = tmp_path / "server.pid"
    sup = subprocess.Popen([sys.executable, "-m", "webshop_server.supervise", "--backoff", "0.2", "--pid-file",
                            str(pid_file), "--", "--port", str(port), "--num-products", "200", "--production",
                            "--tagger", "heuristic"], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        wait_healthy(url, timeout=120)
        client = WebShopClient(url, connect_wait=120, backoff=0.2)
        sid = client.reset(goal_index=0)["session_id"]
        client.step(sid, "search[tea]")
        first = _pid(pid_file)
        os.kill(first, signal.SIGKILL)  # the server dies mid-episode
        with pytest.raises(SessionLostError) as lost:  # waits for the restart, then: this episode is gone
            client.step(sid, "click[next >]")
        assert lost.value.reason == "server_restarted" and client.lost_sessions == {"server_restarted": 1}
        assert _pid(pid_file) != first
        again = client.reset(goal_index=0)  # new episodes run on the restarted server
        assert client.step(again["session_id"], "search[tea]")["info"]["executed"] is True
    finally:
        sup.send_signal(signal.SIGTERM)
        _, err = sup.communicate(timeout=60)
    assert sup.returncode == 0
    assert "restart 1/20" in err and "server_restarted" in err
    last = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(last, 0)  # the supervisor stopped its server
