"""gaca_openrlhf.preflight's per-node checks on a real Ray cluster of 2 nodes (the multi-node rehearsal's local
cluster: 2 raylets on this machine, gaca_openrlhf/cpu/local_cluster.py), through the CLI the launch scripts run.

One Ray task is pinned to each alive node (asking for no GPU); each node's report names the node (its address and
Ray node id). Both raylets share this machine's filesystem, so a path is missing on both or on neither: the test
checks that each node ran the check and is named in its own line (a node failing alone is tested with reports
faked per node in test_preflight.py).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile

import pytest

from gaca_openrlhf.cpu import local_cluster as lc

PY = sys.executable


@pytest.fixture
def cluster():
    d = tempfile.mkdtemp(prefix="gaca-rc.", dir="/tmp")
    res = subprocess.run(["nice", "-n", "19", PY, "-m", "gaca_openrlhf.cpu.local_cluster", "start", "--num-nodes",
                          "2", "--gpus-per-node", "1", "--cpus-per-node", "2", "--object-store-mb", "200",
                          "--state-dir", d], capture_output=True, text=True, timeout=300)
    try:
        assert res.returncode == 0, res.stderr[-4000:]
        yield res.stdout.strip().splitlines()[-1]
    finally:
        if os.path.exists(os.path.join(d, lc.STATE_FILE)):
            lc.stop(d)


@pytest.mark.slow
def test_each_node_runs_the_checks_and_is_named(cluster, tmp_path):
    # Guards: the node checks run on the head only (the other nodes' data never looked at), or a report that does
    # not say which node failed.
    (tmp_path / "games").mkdir()
    env = {**os.environ, "RAY_ADDRESS": cluster}
    argv = [PY, "-m", "gaca_openrlhf.preflight", "--num-nodes", "2", "--path", f"ALFWORLD_DATA={tmp_path / 'games'}"]
    ok = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr[-4000:]
    named = re.findall(r"preflight: ok: node (\S+) \((\w{8})\): paths present: ALFWORLD_DATA", ok.stderr)
    assert len(named) == 2 and len({node_id for _, node_id in named}) == 2, ok.stderr
    bad = subprocess.run(argv + ["--path", "TASKS=/nonexistent/tasks.jsonl"], env=env, capture_output=True,
                         text=True, timeout=300)
    assert bad.returncode == 1
    errors = re.findall(r"error: preflight: node \S+ \((\w{8})\): missing on this node: TASKS=/nonexistent/tasks.jsonl",
                        bad.stderr)
    assert sorted(errors) == sorted(node_id for _, node_id in named), bad.stderr
    assert "preflight failed" in bad.stderr
