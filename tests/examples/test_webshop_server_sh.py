"""examples/webshop_server.sh's start_webshop_server: the server it starts must echo this run's token in /health,
so a leftover server answering on the port (an earlier run's, perhaps of another catalog) is refused, never taken
for this run's. Real servers: the leftover one runs in this test process (webshop_server.testing), the script
starts its own through webshop_server.supervise over HTTP on a free port."""
from __future__ import annotations

import os
import subprocess
import sys

from webshop_server.engine import Shop
from webshop_server.testing import free_port, serve_in_thread

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SNIPPET = r"""
set -euo pipefail
source examples/webshop_server.sh
start_webshop_server "$LOGDIR/webshop_server.log"
echo "url=$WEBSHOP_URL goals=$WEBSHOP_GOALS token=$WEBSHOP_RUN_TOKEN"
"""


def start(tmp_path, port):
    env = {**os.environ, "PY": sys.executable, "WEBSHOP_PORT": str(port), "WEBSHOP_GENERATED": "1",
           "WEBSHOP_PRODUCTS": "60", "WEBSHOP_THREADS": "2", "LOGDIR": str(tmp_path)}
    for k in ("WEBSHOP_URL", "WEBSHOP_DATA", "WEBSHOP_RUN_TOKEN", "DRY_RUN"):
        env.pop(k, None)
    return subprocess.run(["bash", "-c", SNIPPET], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_a_leftover_server_on_the_port_is_refused(tmp_path):
    # Guards: the script taking whatever answers /health on its port (the leftover's catalog used for training).
    with serve_in_thread(Shop(num_products=60, seed=1), run_token="run-earlier") as url:
        port = int(url.rsplit(":", 1)[1])
        res = start(tmp_path, port)
    assert res.returncode == 1, res.stdout + res.stderr
    assert (f"error: http://127.0.0.1:{port}/health is answered by another WebShop server (run token "
            f"'run-earlier', not this run's): a leftover server holds port {port}") in res.stderr
    assert "url=" not in res.stdout


def test_the_scripts_own_server_is_accepted(tmp_path):
    # Guards: a token the script's own server does not echo (every run would stop here).
    res = start(tmp_path, free_port())
    assert res.returncode == 0, res.stdout + res.stderr
    line = [ln for ln in res.stdout.splitlines() if ln.startswith("url=")][-1]
    assert " token=run-" in line and " goals=" in line
