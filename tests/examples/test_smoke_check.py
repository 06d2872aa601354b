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


# ---- the resume leg (smoke.sh: RESUME=1 and one more iteration) ----

def numbered(rows):
    return [{"iteration": i + 1, **r} for i, r in enumerate(rows)]


RESUMED = numbered(GOOD + [{**GOOD[1], "kl": 0.003, "rollout/num_step_samples": 8, "train/optimizer_steps": 2}])


def resume_failed(run, before, **kw):
    kw = {"iterations": 3, "max_gap": 0.1, "mini_batch_steps": 4, "resumed_from": 2, "before": before, **kw}
    return [text for ok, text in smoke_check.checks(run, **kw) if not ok]


def test_a_good_resume_passes(tmp_path):
    assert resume_failed(make_run(tmp_path / "r", RESUMED), numbered(GOOD)) == []


@pytest.mark.parametrize("rows, dropped, expect", [
    # the first run's records appended to again: iterations 1-2 twice
    (numbered(GOOD) + RESUMED, False, "each of [1, 2, 3] once"),
    # training started over at iteration 1 (no checkpoint loaded): new records 1-2, the old ones set aside
    ([{**r, "timing/training": 9.0} for r in RESUMED], True, "unchanged"),
    # iteration 3 never trained
    (numbered(GOOD), False, "each of [1, 2, 3] once"),
])
def test_each_resume_fault_fails(tmp_path, rows, dropped, expect):
    run = make_run(tmp_path / "r", rows)
    if dropped:
        (tmp_path / "r" / "metrics.jsonl.dropped-1700000000").write_text("{}\n")
    bad = resume_failed(run, numbered(GOOD))
    assert any(expect in t for t in bad), bad
    if dropped:
        assert any("set aside" in t for t in bad), bad


def test_resume_cli_reads_the_records_before_the_resume(tmp_path, capsys):
    run = make_run(tmp_path / "r", RESUMED)
    before = tmp_path / "before.jsonl"
    before.write_text("".join(json.dumps(r) + "\n" for r in numbered(GOOD)))
    argv = [run, "--iterations", "3", "--resumed-from", "2", "--before", str(before), "--mini-batch-steps", "4",
            "--label", "resume"]
    assert smoke_check.main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out and all(line.startswith("[PASS] resume: ") for line in out)  # labelled, no SMOKE line
    before.write_text(json.dumps({**numbered(GOOD)[0], "kl": 0.5}) + "\n" + json.dumps(numbered(GOOD)[1]) + "\n")
    assert smoke_check.main(argv) == 1
    with pytest.raises(SystemExit):  # --resumed-from without the records to compare with
        smoke_check.main([run, "--resumed-from", "2"])


def test_rehearsal_engines_of_a_resumed_run_sync_once_per_new_iteration(tmp_path):
    run = make_run(tmp_path / "r", RESUMED)
    engine = {"calls": [{"call": "update_weights"}], "generate_calls": 3}  # the resumed run: 1 iteration, 1 sync
    (tmp_path / "r" / "rehearsal.json").write_text(json.dumps({"engines": [engine, engine]}))
    assert resume_failed(run, numbered(GOOD)) == []
    assert any("every vLLM engine" in t for t in failed(run, iterations=3))  # a fresh 3-iteration run needs 3


# ---- per-GPU memory samples (smoke.sh: nvidia-smi -l 1 into gpu_memory_<leg>.csv) ----

def test_memory_peaks_per_leg_and_overall(tmp_path, capsys):
    alf, ws = tmp_path / "gpu_memory_alfworld.csv", tmp_path / "gpu_memory_webshop.csv"
    alf.write_text("0, 1000, 81559\n1, 1200, 81559\n0, 61000, 81559\n1, 58000, 81559\n0, 2000, 81559\n")
    ws.write_text("0, 70000, 81559\n[N/A]\nNVIDIA-SMI has failed\n1, 3000, 81559\n")
    lines = smoke_check.memory_summary([("alfworld", str(alf)), ("webshop", str(ws))])
    table = {ln.split()[0]: ln.split()[1:] for ln in lines[1:]}
    assert table["leg"] == ["GPU0", "GPU1"]
    assert table["alfworld"] == ["61000", "58000"] and table["webshop"] == ["70000", "3000"]
    assert table["overall"] == ["70000", "58000"] and table["of"] == ["81559", "81559"]
    assert smoke_check.main(["--memory", f"alfworld={alf}"]) == 0
    assert "61000" in capsys.readouterr().out
    # no samples at all (a sampler that failed to start) says so instead of an empty table
    assert "no samples" in smoke_check.memory_summary([("resume", str(tmp_path / "missing.csv"))])[0]
