"""Rehearsal configuration (fast): backend selection, the logical resources Ray declares, what it refuses."""
from __future__ import annotations

import pytest

from gaca_openrlhf.cli.train_ppo import parse_args
from gaca_openrlhf.cpu import backend_mode
from gaca_openrlhf.cpu.rehearsal import check_args, logical_resources

BASE = ["--actor.model_name_or_path", "m", "--data.prompt_dataset", "t.jsonl", "--data.input_key", "input",
        "--rollout.batch_size", "2", "--rollout.n_samples_per_prompt", "2", "--rollout.micro_batch_size", "1",
        "--train.micro_batch_size", "1", "--run.mini_batch_steps", "4", "--algo.advantage.estimator", "gaca",
        "--algo.kl.use_loss", "--algo.kl.init_coef", "0.01"]


def test_backend_mode(monkeypatch):
    monkeypatch.delenv("GACA_BACKEND", raising=False)
    assert backend_mode("rehearsal") == "rehearsal" and backend_mode("gpu") == "gpu" and backend_mode("cpu") == "cpu"
    monkeypatch.setenv("GACA_BACKEND", "rehearsal")
    assert backend_mode("auto") == "rehearsal" and backend_mode(None) == "rehearsal"
    assert backend_mode("cpu") == "cpu"  # an explicit option wins over the environment
    monkeypatch.setenv("GACA_BACKEND", "cpu")
    assert backend_mode("auto") == "cpu"


def test_logical_resources_colocated_and_separate(monkeypatch):
    monkeypatch.delenv("GACA_REHEARSAL_CPUS", raising=False)
    colocated = parse_args(BASE + ["--actor.num_gpus_per_node", "2", "--ref.num_gpus_per_node", "2",
                                   "--vllm.num_engines", "2", "--train.colocate_all", "--run.backend", "rehearsal"])
    assert logical_resources(colocated) == (2, 9)  # everything shares the 2 bundles; 4 CPUs per GPU + the trainer
    separate = parse_args(BASE + ["--actor.num_gpus_per_node", "2", "--ref.num_gpus_per_node", "1",
                                  "--vllm.num_engines", "1"])
    assert logical_resources(separate)[0] == 2 + 1 + 1  # actor + reference + engine GPUs
    monkeypatch.setenv("GACA_REHEARSAL_CPUS", "32")
    assert logical_resources(colocated) == (2, 32)


def test_rehearsal_refuses_tensor_parallel_engines():
    args = parse_args(BASE + ["--actor.num_gpus_per_node", "2", "--ref.num_gpus_per_node", "2",
                              "--vllm.num_engines", "1", "--vllm.tensor_parallel_size", "2", "--train.colocate_all"])
    with pytest.raises(SystemExit, match="tensor parallel 1"):
        check_args(args)


def test_rehearsal_of_several_nodes_needs_a_cluster_to_attach_to(monkeypatch):
    """NUM_NODES > 1: refused without RAY_ADDRESS (the local cluster of examples/gpu/_rehearsal_cluster.sh), taken
    with it."""
    args = parse_args(BASE + ["--actor.num_nodes", "2", "--actor.num_gpus_per_node", "1", "--ref.num_nodes", "2",
                              "--ref.num_gpus_per_node", "1", "--vllm.num_engines", "2", "--train.colocate_all"])
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(SystemExit, match="needs a Ray cluster of that many nodes"):
        check_args(args)
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:41234")
    check_args(args)


def test_init_ray_attaches_to_the_cluster_like_the_gpu_path(monkeypatch):
    """With RAY_ADDRESS the rehearsal calls the GPU path's plain ray.init() (no logical GPUs of its own) and refuses
    a cluster with fewer alive nodes than --actor.num_nodes."""
    from gaca_openrlhf.cpu import rehearsal

    args = parse_args(BASE + ["--actor.num_nodes", "2", "--actor.num_gpus_per_node", "1", "--ref.num_nodes", "2",
                              "--ref.num_gpus_per_node", "1", "--vllm.num_engines", "2", "--train.colocate_all"])
    seen = []
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:41234")
    monkeypatch.setattr(rehearsal.ray, "init", lambda **kw: seen.append(kw))
    nodes = [{"Alive": True, "Resources": {"GPU": 1.0}}, {"Alive": True, "Resources": {"GPU": 1.0}}]
    monkeypatch.setattr(rehearsal.ray, "nodes", lambda: nodes)
    rehearsal.init_ray(args, {"env_vars": {}})
    assert seen == [{"runtime_env": {"env_vars": {}}, "include_dashboard": False}]
    nodes[1]["Alive"] = False
    with pytest.raises(SystemExit, match="1 alive nodes"):
        rehearsal.init_ray(args, {"env_vars": {}})


def test_placement_report_names_each_roles_nodes(monkeypatch):
    """rehearsal.json's "nodes" and "placement" (what gaca_openrlhf/cpu/rehearsal_check.py checks): the engines' and
    policy ranks' own node ids, the actor table's for the reference ranks and the trainer, the env workers by class."""
    from gaca_openrlhf.cpu import local_cluster, rehearsal

    monkeypatch.setattr(rehearsal.ray, "nodes", lambda: [
        {"NodeID": "A", "Alive": True, "Resources": {"GPU": 1.0, "CPU": 5.0}, "NodeManagerAddress": "h"},
        {"NodeID": "B", "Alive": True, "Resources": {"GPU": 1.0, "CPU": 5.0}, "NodeManagerAddress": "h"}])
    monkeypatch.setattr(local_cluster, "actor_node", lambda h: {"ref0": "A", "ref1": "B", "trainer": "B"}.get(h, ""))
    monkeypatch.setattr(local_cluster, "job_actor_nodes", lambda cls: ["A", "B", "B"] if cls == "AlfworldWorker" else [])
    engines = [{"calls": [{"call": "init", "node_id": "A"}]}, {"calls": [{"call": "init", "node_id": "B"}]}]
    ranks = [{"calls": [], "node_id": "A"}, {"calls": [], "node_id": "B"}]
    rep = rehearsal.placement_report(engines, ranks, ["p0", "p1"], ["ref0", "ref1"], "trainer")
    assert [n["node_id"] for n in rep["nodes"]] == ["A", "B"] and rep["nodes"][0]["gpus"] == 1.0
    assert rep["placement"] == {"policy": ["A", "B"], "reference": ["A", "B"], "engines": ["A", "B"],
                                "trainer": ["B"], "env_workers": ["A", "B", "B"]}
