"""The multi-node rehearsal's local Ray cluster (gaca_openrlhf/cpu/local_cluster.py), with real raylets.

Start 2 raylets of 1 logical GPU each through the CLI the scripts use; a separate driver sees 2 alive nodes with 1 GPU
each, OpenRLHF's kind of placement group (2 x {"GPU": 1, "CPU": 1}, PACK) spreads over both, and the actor-table
helpers of rehearsal.json name the node each actor ran on; ``stop`` leaves none of the cluster's processes running
and removes its state dir. The guard stops a cluster whose owner process is gone (a killed script). Nothing here may
touch another Ray on the machine: private temp dir, free ports, no ``ray stop``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import pytest

from gaca_openrlhf.cpu import local_cluster as lc

PY = sys.executable

# a driver attached to the cluster: nodes, a PACK placement group of 2 GPU bundles, where 2 actors and a job actor ran
PROBE = r"""
import json, sys
import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
from gaca_openrlhf.cpu.local_cluster import actor_node, job_actor_nodes

ray.init(address=sys.argv[1], include_dashboard=False, logging_level="ERROR", log_to_driver=False)
nodes = [{"id": n["NodeID"], "gpus": n["Resources"].get("GPU"), "alive": n["Alive"]} for n in ray.nodes()]

@ray.remote(num_cpus=0)
class Where:
    def node(self):
        return ray.get_runtime_context().get_node_id()

pg = placement_group([{"GPU": 1, "CPU": 1}] * 2, strategy="PACK")
ray.get(pg.ready(), timeout=120)
actors = [Where.options(num_gpus=0.2, num_cpus=0.2, scheduling_strategy=PlacementGroupSchedulingStrategy(
    pg, placement_group_bundle_index=i)).remote() for i in range(2)]
reported = ray.get([a.node.remote() for a in actors])
print(json.dumps({"nodes": nodes, "reported": reported, "table": [actor_node(a) for a in actors],
                  "by_class": job_actor_nodes("Where")}))
"""


def _start(tmp_dir: str, num_nodes: int, owner_pid: int | None = None) -> subprocess.CompletedProcess:
    cmd = [PY, "-m", "gaca_openrlhf.cpu.local_cluster", "start", "--num-nodes", str(num_nodes),
           "--gpus-per-node", "1", "--cpus-per-node", "2", "--object-store-mb", "200", "--state-dir", tmp_dir]
    if owner_pid:
        cmd += ["--owner-pid", str(owner_pid)]
    return subprocess.run(["nice", "-n", "19", *cmd], capture_output=True, text=True, timeout=300)


@pytest.fixture
def state_dir():
    d = tempfile.mkdtemp(prefix="gaca-rc.", dir="/tmp")
    yield d
    if os.path.exists(os.path.join(d, lc.STATE_FILE)):  # a failed test: never leave raylets behind
        lc.stop(d)
    assert not os.path.exists(d)


def test_two_raylets_with_one_logical_gpu_each_then_nothing_left(state_dir):
    res = _start(state_dir, 2)
    assert res.returncode == 0, res.stderr[-4000:]
    address = res.stdout.strip().splitlines()[-1]
    state = lc.read_state(state_dir)
    assert state["address"] == address and len(state["sessions"]) == 2
    # isolated: not Ray's default ports, and the address file went into the private temp dir
    assert not address.endswith(":6379")
    with open(os.path.join(state_dir, "ray_current_cluster")) as f:
        assert f.read().strip() == address
    default_file = "/tmp/ray/ray_current_cluster"
    assert not os.path.exists(default_file) or open(default_file).read().strip() != address
    assert lc.session_pids(state["sessions"])  # the cluster's processes run

    probe = subprocess.run(["nice", "-n", "19", PY, "-c", PROBE, address], capture_output=True, text=True,
                           timeout=300, env={**os.environ, "RAY_ADDRESS": ""})
    assert probe.returncode == 0, probe.stderr[-4000:]
    out = json.loads(probe.stdout.strip().splitlines()[-1])
    alive = [n for n in out["nodes"] if n["alive"]]
    assert len(alive) == 2 and [n["gpus"] for n in alive] == [1.0, 1.0]
    ids = {n["id"] for n in alive}
    assert set(out["reported"]) == ids  # the PACK group's 2 GPU bundles are on the 2 raylets, as on 2 nodes
    assert out["table"] == out["reported"]  # Ray's actor table names the same nodes (rehearsal.json's source)
    assert out["by_class"] == sorted(out["reported"])

    rc = subprocess.run([PY, "-m", "gaca_openrlhf.cpu.local_cluster", "stop", "--state-dir", state_dir],
                        capture_output=True, text=True, timeout=120)
    assert rc.returncode == 0, rc.stderr
    assert lc.session_pids(state["sessions"]) == []
    assert not os.path.exists(state_dir)


def test_the_guard_stops_the_cluster_when_its_owner_is_gone(state_dir):
    owner = subprocess.Popen(["sleep", "600"])
    try:
        res = _start(state_dir, 1, owner_pid=owner.pid)
        assert res.returncode == 0, res.stderr[-4000:]
        state = lc.read_state(state_dir)
        assert state["guard_pid"] and lc.session_pids([state["guard_pid"]])
        assert lc.session_pids(state["sessions"])
    finally:
        owner.kill()
        owner.wait()
    deadline = time.time() + 90
    while time.time() < deadline and (os.path.exists(state_dir) or lc.session_pids(state["sessions"])):
        time.sleep(1)
    assert lc.session_pids(state["sessions"]) == [] and lc.session_pids([state["guard_pid"]]) == []
    assert not os.path.exists(state_dir)


def test_node_commands_stay_off_rays_default_ports():
    head = lc.node_command(0, None, 41234, 1, 5, "/tmp/gaca-rc.x")
    other = lc.node_command(1, "10.0.0.1:41234", 41234, 1, 5, "/tmp/gaca-rc.x")
    assert "--head" in head and "--port=41234" in head and "--temp-dir=/tmp/gaca-rc.x" in head
    assert "--address=10.0.0.1:41234" in other and "--head" not in other
    for cmd in (head, other):
        assert "start" in cmd and "--num-gpus=1" in cmd and "--num-cpus=5" in cmd
        joined = " ".join(cmd)
        for default in ("6379", "8265", "10001", "52365"):
            assert f"={default}" not in joined, (default, joined)
        assert "--dashboard-agent-listen-port=" in joined and "--min-worker-port=0" in joined


def test_stop_without_a_cluster_is_a_no_op(tmp_path):
    assert lc.stop(str(tmp_path / "gaca-rc.none")) == []
    assert lc.session_pids([]) == []
