"""``python -m webshop_server`` as a separate process (production WSGI server)."""
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from webshop_server.testing import free_port, wait_healthy

ROOT = Path(__file__).resolve().parents[2]


def _serve(args, timeout=120):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "webshop_server", "--host", "127.0.0.1", "--port", str(port), *args],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, timeout=timeout)
    except TimeoutError:
        proc.kill()
        out = proc.communicate(timeout=10)[0]
        raise AssertionError(out[-3000:])
    return proc, url


def _stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def test_cli_production_server_with_written_data_dir(tmp_path):
    data = tmp_path / "data"
    out = subprocess.run([sys.executable, "-m", "webshop_server", "--write-data", str(data), "--num-products", "300",
                          "--seed", "4"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert sorted(os.listdir(data)) == ["GENERATED_CATALOG.json", "items_human_ins.json", "items_ins_v2.json",
                                        "items_shuffle.json", "reviews.json"]
    proc, url = _serve(["--data-dir", str(data), "--production", "--expose-goals", "--tagger", "heuristic",
                        "--index-cache", str(tmp_path / "cache")])
    try:
        health = requests.get(url + "/health", timeout=10).json()
        assert health["status"] == "ok" and health["products"] == 300 and health["goals"] > 0
        assert health["generated"] is True and "items_shuffle.json" in health["catalog"]  # the generator's marker
        r = requests.post(url + "/api/reset", json={"split": "test", "index": 0}, timeout=10).json()
        g = requests.get(url + "/api/goal", params={"session_id": r["session_id"]}, timeout=10).json()
        assert g["instruction_text"] == r["instruction"]
        with open(data / "items_shuffle.json") as f:
            assert g["asin"] in {p["asin"] for p in json.load(f)}
        assert requests.post(url + "/api/step", data="{", timeout=10).status_code == 400
        # the CLI's waitress refuses an over-limit body from its headers, without waiting for (buffering) it
        with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=10) as s:
            s.sendall(b"POST /api/step HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n{")
            assert s.recv(4096).startswith(b"HTTP/1.1 413")
    finally:
        _stop(proc)


@pytest.mark.slow
def test_cli_dev_server_generated_catalog_default_tagger():
    proc, url = _serve(["--num-products", "200", "--seed", "1", "--goal-mode", "synthetic"], timeout=240)
    try:
        stats = requests.get(url + "/api/stats", timeout=10).json()
        assert stats["products"] == 200 and stats["goal_mode"] == "synthetic"
        assert requests.get(url + "/health", timeout=10).json()["generated"] is True
        assert requests.get(url + "/api/goal", params={"session_id": "x"}, timeout=10).status_code == 404
    finally:
        _stop(proc)
