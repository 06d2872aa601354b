"""A local Ray cluster of several nodes on one machine, for the multi-node rehearsal (``REHEARSAL=1 NUM_NODES=2``).

    python -m gaca_openrlhf.cpu.local_cluster start --num-nodes 2 --gpus-per-node 1 --cpus-per-node 5 \\
        --state-dir /tmp/gaca-rc.XXXX [--owner-pid PID]        # prints the address (host:port) on stdout
    python -m gaca_openrlhf.cpu.local_cluster stop --state-dir /tmp/gaca-rc.XXXX

``start`` runs the documented start sequence of real nodes (examples/gpu/README.md, "Many nodes") on this machine:
``ray start --head`` once, then ``ray start --address HEAD`` for each further node, every node (raylet) with
``--num-gpus GPUS_PER_NODE`` *logical* GPUs (Ray only counts them) and ``--num-cpus`` logical CPUs. Training then
attaches to it with a plain ``ray.init()`` (``RAY_ADDRESS``) as on real nodes, and OpenRLHF's placement group
spreads its ``{"GPU": 1, "CPU": 1}`` bundles over the raylets as over nodes.

Isolation from other Ray instances on the machine (another engineer's, a test's):

- a private ``--temp-dir`` (the state dir): sessions, sockets and ``ray_current_cluster`` live there, so a plain
  ``ray.init()`` elsewhere never auto-attaches to this cluster (Ray reads ``/tmp/ray/ray_current_cluster``);
- every port chosen free by the OS (never 6379/8265/10001/52365, Ray's defaults), worker ports random;
- each ``ray start`` runs in a new session (``setsid``): every process it leaves behind -- GCS, raylet, agents, and
  the workers the raylets fork, which rename themselves ``ray::...`` -- keeps that session id, so :func:`stop` ends
  exactly these processes (SIGTERM, then SIGKILL after ``--grace-s``) and never calls ``ray stop`` (which would end
  every Ray on the machine).

``--owner-pid``: a guard process stops the cluster when that process is gone (the launch script's ``$$``), so a
killed script (SIGKILL: no EXIT trap) leaves nothing running; the scripts also stop it from their EXIT trap.
State: ``STATE_DIR/cluster.json`` (address, session ids, guard pid), logs ``STATE_DIR/node<i>.log``.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Dict, Iterable, List, Optional, Sequence

STATE_FILE = "cluster.json"
ADDRESS_FILE = "address"


# ---- processes by session id

def _proc_session(pid: int) -> Optional[int]:
    """The session id of a process (field 6 of /proc/PID/stat), None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) ": state ppid pgrp session ...
    try:
        return int(fields[3])
    except (IndexError, ValueError):
        return None


def _proc_state(pid: int) -> Optional[str]:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2:].split()[0]


def session_pids(sessions: Iterable[int]) -> List[int]:
    """Live (not zombie) processes whose session id is one of ``sessions``, this process excluded."""
    sessions = {int(s) for s in sessions}
    me = os.getpid()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        pid = int(name)
        if _proc_session(pid) in sessions and _proc_state(pid) not in (None, "Z", "X"):
            out.append(pid)
    return sorted(out)


def _signal_all(pids: Sequence[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def terminate_sessions(sessions: Sequence[int], grace_s: float = 15.0) -> List[int]:
    """SIGTERM every process of ``sessions``, SIGKILL what is left after ``grace_s``; returns the pids ended."""
    pids = session_pids(sessions)
    if not pids:
        return []
    _signal_all(pids, signal.SIGTERM)
    deadline = time.time() + grace_s
    while time.time() < deadline and session_pids(sessions):
        time.sleep(0.5)
    left = session_pids(sessions)
    if left:
        _signal_all(left, signal.SIGKILL)
        deadline = time.time() + 10
        while time.time() < deadline and session_pids(sessions):
            time.sleep(0.2)
    return pids


# ---- start / stop

def free_port(host: str = "") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _ray_cli() -> List[str]:
    ray_bin = os.path.join(os.path.dirname(sys.executable), "ray")
    if os.access(ray_bin, os.X_OK):
        return [ray_bin]
    return [sys.executable, "-c", "import sys; from ray.scripts.scripts import main; sys.exit(main())"]


def node_command(index: int, address: Optional[str], port: int, gpus: int, cpus: int, state_dir: str,
                 object_store_bytes: Optional[int] = None) -> List[str]:
    """The ``ray start`` command of node ``index`` (0: the head, on ``port``; others join ``address``)."""
    cmd = _ray_cli() + ["start", f"--num-gpus={gpus}", f"--num-cpus={cpus}", "--disable-usage-stats",
                        f"--dashboard-agent-listen-port={free_port()}", "--min-worker-port=0", "--max-worker-port=0"]
    if object_store_bytes:
        cmd.append(f"--object-store-memory={int(object_store_bytes)}")
    if index == 0:
        cmd += ["--head", f"--port={port}", f"--temp-dir={state_dir}", "--include-dashboard=false",
                f"--dashboard-port={free_port()}", f"--ray-client-server-port={free_port()}"]
    else:
        cmd += [f"--address={address}"]
    return cmd


def _write_state(state_dir: str, state: dict) -> None:
    tmp = os.path.join(state_dir, STATE_FILE + ".tmp")
    with open(tmp, "w") as f:
        json.dump(state, f, indent=1)
    os.replace(tmp, os.path.join(state_dir, STATE_FILE))


def read_state(state_dir: str) -> Optional[dict]:
    try:
        with open(os.path.join(state_dir, STATE_FILE)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def alive_nodes(address: str) -> List[dict]:
    """``ray.nodes()`` of the cluster at ``address`` (alive ones), from a short-lived driver."""
    import ray

    ray.init(address=address, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        return [n for n in ray.nodes() if n.get("Alive")]
    finally:
        ray.shutdown()


def parse_node_env(items: Sequence[str], num_nodes: int) -> Dict[int, Dict[str, str]]:
    """``INDEX:KEY=VALUE`` items as {index: {key: value}}; a bad item or an index outside the cluster is a ValueError."""
    out: Dict[int, Dict[str, str]] = {}
    for item in items:
        m = re.fullmatch(r"(\d+):([A-Za-z_][A-Za-z0-9_]*)=(.*)", item, flags=re.S)
        if not m:
            raise ValueError(f"--node-env {item!r}: expected INDEX:KEY=VALUE (e.g. 1:PATH=/opt/stub/bin:/usr/bin)")
        index = int(m.group(1))
        if index >= num_nodes:
            raise ValueError(f"--node-env {item!r}: node {index} does not exist (nodes 0..{num_nodes - 1})")
        out.setdefault(index, {})[m.group(2)] = m.group(3)
    return out


def start(num_nodes: int, gpus_per_node: int, cpus_per_node: int, state_dir: Optional[str] = None,
          owner_pid: Optional[int] = None, object_store_bytes: Optional[int] = None, timeout_s: float = 180.0,
          log=sys.stderr, node_env: Optional[Dict[int, Dict[str, str]]] = None) -> dict:
    """Start the cluster; returns its state (``address``, ``state_dir``, ``sessions``, ``nodes``...).

    ``node_env``: {node index: {variable: value}} set in that node's environment (its raylet and so every worker it
    starts): on one machine the nodes share everything else, and this is how a rehearsal makes one node differ from
    the others (e.g. a stand-in ``nvidia-smi`` on its PATH that reports a GPU held by a stray process).

    On any failure what was started is stopped again and RuntimeError is raised (node logs in the message)."""
    if num_nodes < 1 or gpus_per_node < 0 or cpus_per_node < 1:
        raise ValueError(f"num_nodes={num_nodes}, gpus_per_node={gpus_per_node}, cpus_per_node={cpus_per_node}")
    node_env = node_env or {}
    if any(i < 0 or i >= num_nodes for i in node_env):
        raise ValueError(f"node_env names nodes {sorted(node_env)}, the cluster has 0..{num_nodes - 1}")
    state_dir = os.path.abspath(state_dir or tempfile.mkdtemp(prefix="gaca-rc.", dir="/tmp"))
    os.makedirs(state_dir, exist_ok=True)
    port = free_port()
    host = None
    state = {"address": None, "state_dir": state_dir, "port": port, "sessions": [], "num_nodes": num_nodes,
             "gpus_per_node": gpus_per_node, "cpus_per_node": cpus_per_node, "guard_pid": None,
             "owner_pid": owner_pid, "started": time.time(),
             "node_env": {str(i): sorted(kv) for i, kv in node_env.items()}}
    _write_state(state_dir, state)
    # the nodes' own environment (inherited by their workers), without a RAY_ADDRESS meant for drivers
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        for i in range(num_nodes):
            cmd = node_command(i, state["address"], port, gpus_per_node, cpus_per_node, state_dir,
                               object_store_bytes)
            node_log = os.path.join(state_dir, f"node{i}.log")
            print(f"[local_cluster] node {i}: {' '.join(cmd)}", file=log, flush=True)
            with open(node_log, "w") as out:
                proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        env={**env, **node_env.get(i, {})}, start_new_session=True)  # its session id = its pid
                state["sessions"].append(proc.pid)
                _write_state(state_dir, state)
                try:
                    rc = proc.wait(timeout=timeout_s)
                except subprocess.TimeoutExpired:
                    rc = None
            if rc != 0:
                with open(node_log) as f:
                    tail = f.read()[-3000:]
                raise RuntimeError(f"`ray start` of node {i} {'timed out' if rc is None else f'exited {rc}'}:\n"
                                   f"{tail}")
            if i == 0:  # the address `ray start --head` wrote into its --temp-dir
                with open(os.path.join(state_dir, "ray_current_cluster")) as f:
                    state["address"] = f.read().strip()
                host = state["address"].rsplit(":", 1)[0]
                _write_state(state_dir, state)
        deadline = time.time() + timeout_s
        while True:
            nodes = alive_nodes(state["address"])
            if len(nodes) >= num_nodes or time.time() > deadline:
                break
            time.sleep(1)
        if len(nodes) != num_nodes:
            raise RuntimeError(f"the cluster at {state['address']} has {len(nodes)} alive nodes, not {num_nodes}")
        state["nodes"] = [{"node_id": n["NodeID"], "gpus": n["Resources"].get("GPU", 0),
                           "cpus": n["Resources"].get("CPU", 0), "ip": n.get("NodeManagerAddress")}
                          for n in nodes]
        if owner_pid:
            guard = subprocess.Popen([sys.executable, "-m", "gaca_openrlhf.cpu.local_cluster", "guard",
                                      "--state-dir", state_dir, "--owner-pid", str(owner_pid)],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=open(os.path.join(state_dir, "guard.log"), "w"),
                                     start_new_session=True)
            state["guard_pid"] = guard.pid
        _write_state(state_dir, state)
        with open(os.path.join(state_dir, ADDRESS_FILE), "w") as f:
            f.write(state["address"] + "\n")
    except BaseException:
        stop(state_dir, log=log)
        raise
    print(f"[local_cluster] {num_nodes} nodes x {gpus_per_node} logical GPUs, {cpus_per_node} CPUs each at "
          f"{state['address']} (host {host}; state {state_dir})", file=log, flush=True)
    return state


def _remove_dir(path: str, timeout_s: float = 15.0, log=sys.stderr) -> None:
    """Remove ``path``, retrying while it reappears or is half removed: a Ray process that is still exiting (its
    session already signalled) can write a log file into it during the first rmtree (seen once in CI: the state dir
    outlived the test that stopped its cluster, and was gone moments later)."""
    deadline = time.monotonic() + timeout_s
    shutil.rmtree(path, ignore_errors=True)
    while os.path.isdir(path) and time.monotonic() < deadline:
        time.sleep(0.2)
        shutil.rmtree(path, ignore_errors=True)
    if os.path.isdir(path):
        print(f"[local_cluster] could not remove {path} within {timeout_s:.0f} s", file=log, flush=True)


def stop(state_dir: str, grace_s: float = 15.0, keep_dir: bool = False, log=sys.stderr) -> List[int]:
    """Stop the cluster of ``state_dir`` (only its own processes) and remove the dir; returns the pids ended."""
    state = read_state(state_dir)
    if state is None:
        if not keep_dir and os.path.isdir(state_dir) and os.path.basename(state_dir).startswith("gaca-rc."):
            shutil.rmtree(state_dir, ignore_errors=True)
        return []
    sessions = [int(s) for s in state.get("sessions", [])]
    ended = terminate_sessions(list(reversed(sessions)), grace_s)  # the workers' nodes first, the head last
    guard = state.get("guard_pid")
    if guard and guard != os.getpid():
        ended += terminate_sessions([guard], grace_s=5)
    left = session_pids(sessions)
    if left:
        raise RuntimeError(f"processes of the local Ray cluster {state_dir} still running: {left}")
    if keep_dir:
        os.remove(os.path.join(state_dir, STATE_FILE))
    else:
        _remove_dir(state_dir, log=log)
    print(f"[local_cluster] stopped {state.get('address')}: {len(ended)} processes ended", file=log, flush=True)
    return ended


def guard(state_dir: str, owner_pid: int, poll_s: float = 2.0) -> None:
    """Stop the cluster when ``owner_pid`` is gone; return when the cluster was stopped by someone else."""
    state_file = os.path.join(state_dir, STATE_FILE)
    while os.path.exists(state_file):
        if _proc_state(owner_pid) in (None, "Z", "X"):
            print(f"[local_cluster] owner {owner_pid} gone: stopping the cluster", file=sys.stderr, flush=True)
            stop(state_dir)
            return
        time.sleep(poll_s)


# ---- where actors ran (the rehearsal's rehearsal.json; Ray's actor table, a private API with a stable shape)

def actor_node(handle) -> str:
    """The Ray node id the actor table records for an actor handle ("" when unknown, e.g. never scheduled)."""
    import ray

    try:
        info = ray._private.state.actors(actor_id=handle._actor_id.hex())
        return (info.get("Address") or {}).get("NodeID") or ""
    except Exception:  # noqa: BLE001 - a private API: callers still write their report
        return ""


def job_actor_nodes(class_name: str) -> List[str]:
    """Node ids of this job's actors of class ``class_name``, dead ones included (sorted)."""
    import ray

    job = ray.JobID.from_hex(ray.get_runtime_context().get_job_id())
    table = ray._private.state.actors(job_id=job)
    return sorted((a.get("Address") or {}).get("NodeID") or "" for a in table.values()
                  if a.get("ActorClassName") == class_name)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("start", help="start the cluster; prints its address on stdout")
    s.add_argument("--num-nodes", type=int, required=True)
    s.add_argument("--gpus-per-node", type=int, required=True)
    s.add_argument("--cpus-per-node", type=int, required=True)
    s.add_argument("--state-dir", help="private dir (default: a new /tmp/gaca-rc.*); keep the path short (sockets)")
    s.add_argument("--owner-pid", type=int, help="stop the cluster when this process is gone")
    s.add_argument("--object-store-mb", type=int, default=0, help="object store per node (default: Ray's)")
    s.add_argument("--timeout-s", type=float, default=180.0)
    s.add_argument("--node-env", action="append", default=[], metavar="INDEX:KEY=VALUE",
                   help="set KEY=VALUE in node INDEX's environment (its raylet and workers); repeatable")
    t = sub.add_parser("stop", help="stop the cluster of --state-dir (its processes only) and remove the dir")
    t.add_argument("--state-dir", required=True)
    t.add_argument("--grace-s", type=float, default=15.0)
    g = sub.add_parser("guard", help=argparse.SUPPRESS)
    g.add_argument("--state-dir", required=True)
    g.add_argument("--owner-pid", type=int, required=True)
    a = p.parse_args(argv)
    if a.cmd == "start":
        try:
            node_env = parse_node_env(a.node_env, a.num_nodes)
            state = start(a.num_nodes, a.gpus_per_node, a.cpus_per_node, a.state_dir, a.owner_pid,
                          a.object_store_mb * 2 ** 20 or None, a.timeout_s, node_env=node_env)
        except (RuntimeError, OSError, ValueError) as e:
            print(f"error: local Ray cluster: {e}", file=sys.stderr)
            return 1
        print(state["address"])
        return 0
    if a.cmd == "stop":
        try:
            stop(a.state_dir, a.grace_s)
        except RuntimeError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        return 0
    guard(a.state_dir, a.owner_pid)
    return 0


if __name__ == "__main__":
    sys.exit(main())
