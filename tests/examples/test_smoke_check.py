"""examples/gpu/smoke_check.py on hand-made run folders (fast): each check fails on the fault it is there for."""
from __future__ import annotations

import importlib.util
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location("smoke_check", os.path.join(ROOT, "examples", "gpu", "smoke_check.py"))
smoke_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(smoke_check)

GOOD = [
    {"rollout/failed_episodes": 0, "kl": 0.0, "sync/logprob_gap": 0.003, "rollout/num_step_samples": 10,
     "train/optimizer_steps": 3},
    {"rollout/failed_episodes": 0, "kl": 0.0021, "sync/logprob_gap": 0.004, "rollout/num_step_samples": 12,
     "train/optimizer_steps": 3},
]


def make_run(root, rows, ckpt=True):
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "metrics.jsonl"), "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    if ckpt:
        os.makedirs(os.path.join(root, "ckpt", "_actor", "global_step2"))
        os.makedirs(os.path.join(root, "ckpt", "global_step2_hf"))
        open(os.path.join(root, "ckpt", "global_step2_hf", "config.json"), "w").close()
        open(os.path.join(root, "config.json"), "w").close()
    return str(root)


def failed(run, **kw):
    kw = {"iterations": 2, "max_gap": 0.1, "mini_batch_steps": 4, **kw}
    return [text for ok, text in smoke_check.checks(run, **kw) if not ok]


def test_good_run_passes(tmp_path):
    assert failed(make_run(tmp_path / "r", GOOD)) == []
    assert smoke_check.main([make_run(tmp_path / "s", GOOD), "--mini-batch-steps", "4"]) == 0


@pytest.mark.parametrize("fault, expect", [
    ({"rollout/failed_episodes": 2}, "failed_episodes"),
    ({"kl": 0.0}, "kl non-zero"),
    ({"sync/logprob_gap": 0.5}, "logprob_gap"),
    ({"train/optimizer_steps": 1}, "optimizer steps"),
])
def test_each_fault_fails_its_check(tmp_path, fault, expect):
    rows = [GOOD[0], {**GOOD[1], **fault}]
    bad = failed(make_run(tmp_path / "r", rows))
    assert len(bad) == 1 and expect in bad[0], bad


def test_mini_batch_read_from_the_launch_command(tmp_path):
    run = make_run(tmp_path / "r", [GOOD[0], {**GOOD[1], "train/optimizer_steps": 1}])
    with open(os.path.join(run, "command.sh"), "w") as f:
        f.write("python -m gaca_openrlhf.cli.train_ppo --gaca.mini_batch_steps 256 --gaca.mini_batch_steps 4")
    assert smoke_check.command_option(run, "--gaca.mini_batch_steps") == "4"  # later options win
    assert smoke_check.main([run]) == 1  # 1 step for 12 samples / 4 is caught without --mini-batch-steps


def test_missing_iterations_and_checkpoints(tmp_path):
    bad = failed(make_run(tmp_path / "r", GOOD[:1], ckpt=False))
    assert any("1 iterations" in t for t in bad) and any("DeepSpeed" in t for t in bad) and any("HF" in t for t in bad)
    assert smoke_check.main([str(tmp_path / "r")]) == 1
