"""Rehearsal configuration (fast): backend selection, the logical resources Ray declares, what it refuses."""
from __future__ import annotations

import pytest

from gaca_openrlhf.cli.train_ppo import parse_args
from gaca_openrlhf.cpu import backend_mode
from gaca_openrlhf.cpu.rehearsal import check_args, logical_resources

BASE = ["--actor.model_name_or_path", "m", "--data.prompt_dataset", "t.jsonl", "--data.input_key", "input",
        "--rollout.batch_size", "2", "--rollout.n_samples_per_prompt", "2", "--rollout.micro_batch_size", "1",
        "--train.micro_batch_size", "1", "--gaca.mini_batch_steps", "4", "--algo.advantage.estimator", "gaca",
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
                                   "--vllm.num_engines", "2", "--train.colocate_all", "--gaca.backend", "rehearsal"])
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
