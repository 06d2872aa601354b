"""The comparison report on synthetic runs: plots are valid PNGs, table values are right, NaN/null/missing keys,
malformed lines, resumed runs and runs of different lengths are handled."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

from gaca_openrlhf.report.build import FINAL_WINDOW, moving_average, run_summary
from gaca_openrlhf.report.cli import main
from gaca_openrlhf.report.data import load_run, read_metrics
from gaca_openrlhf.trainer.metrics import REQUIRED_KEYS

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _record(it, success, lam, types=None):
    rec = {k: None for k in REQUIRED_KEYS}
    rec.update({"iteration": it, "rollout/success_rate": success, "rollout/score": success,
                "rollout/num_steps": 20.0 - it, "rollout/valid_action_ratio": 0.5 + 0.01 * it,
                "adv/lambda_mean": lam, "timing/generation": 3.0, "timing/environment": 1.0,
                "timing/experience": 2.0, "timing/training": 4.0, "timing/sync": 0.5, "timing/step_total": 11.0})
    for t, v in (types or {}).items():
        rec[f"rollout/success_rate/{t}"] = v
    return rec


def _write(path, records, extra_lines=()):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "metrics.jsonl"), "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
        for line in extra_lines:
            f.write(line + "\n")
    return str(path)


@pytest.fixture
def runs(tmp_path):
    # gaca: 12 iterations, lambda set, one malformed line, one null success, a resumed duplicate of iteration 12
    gaca = [_record(i, 0.1 * (i % 10), 0.75, {"pick_and_place_simple": 0.5, "look_at_obj_in_light": 0.25})
            for i in range(1, 13)]
    gaca[3]["rollout/success_rate"] = None
    # validation every 4 iterations (train_ppo --eval.dataset): rounds at 3, 7 and 11, 3 and 7 tied for best (the
    # earlier kept, as OpenRLHF's best checkpoint)
    for it, v in ((3, 0.5), (7, 0.5), (11, 0.25)):
        gaca[it - 1].update({"val/success_rate": v, "val/num_steps": 9.0, "val/num_episodes": 64.0})
    gaca_dir = _write(tmp_path / "gaca", gaca, ['{"iteration": 13, "rollout/succ', "not json"])
    with open(os.path.join(gaca_dir, "metrics.jsonl"), "a") as f:  # resumed: iteration 12 again, last one wins
        f.write(json.dumps(_record(12, 0.9, 0.8, {"pick_and_place_simple": 1.0})) + "\n")
    # gigpo: 3 iterations, no lambda (null), NaN strings in a timing field
    gigpo = [_record(i, 0.2, None) for i in range(1, 4)]
    gigpo[1]["timing/sync"] = "NaN"
    gigpo_dir = _write(tmp_path / "gigpo", gigpo)
    # grpo: metrics without most keys, plus an eval result
    grpo_dir = _write(tmp_path / "grpo", [{"iteration": 1, "rollout/success_rate": 0.05}, {"iteration": 2}])
    ev = {"success_rate": 0.375, "mean_score": 0.4, "mean_steps": 17.5, "valid_action_ratio": 0.9,
          "num_episodes": 8, "num_failed": 1,
          "per_task_type": {"pick_and_place_simple": {"success_rate": 0.5}, "look_at_obj_in_light": {"success_rate": 0.25}},
          "config": {"panel": "eval_id", "seed": 0, "temperature": 0.4, "model": grpo_dir}, "episodes": []}
    with open(os.path.join(grpo_dir, "eval_eval_id.json"), "w") as f:
        json.dump(ev, f)
    ev2 = dict(ev, success_rate=0.625, config={"panel": "eval_id", "seed": 1, "temperature": 0.4, "model": grpo_dir})
    os.makedirs(os.path.join(grpo_dir, "eval"))
    with open(os.path.join(grpo_dir, "eval", "eval_id_seed1.json"), "w") as f:
        json.dump(ev2, f)
    with open(os.path.join(grpo_dir, "eval_broken.json"), "w") as f:
        f.write("{")
    return {"gaca": gaca_dir, "gigpo": gigpo_dir, "grpo": grpo_dir}


def test_read_metrics_robust(runs):
    recs, bad = read_metrics(os.path.join(runs["gaca"], "metrics.jsonl"))
    assert bad == 2
    assert [r["iteration"] for r in recs] == [float(i) for i in range(1, 13)]
    assert recs[-1]["rollout/success_rate"] == 0.9  # the resumed record replaced the first iteration 12
    assert math.isnan(recs[3]["rollout/success_rate"])
    recs, _ = read_metrics(os.path.join(runs["gigpo"], "metrics.jsonl"))
    assert math.isnan(recs[1]["timing/sync"]) and math.isnan(recs[0]["adv/lambda_mean"])


def test_report_end_to_end(runs, tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["--run", f"gaca={runs['gaca']}", "--run", f"gigpo={runs['gigpo']}", "--run", f"grpo={runs['grpo']}",
                 "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    expected_plots = {"success_rate.png", "score.png", "lambda.png", "valid_action_ratio.png", "episode_length.png",
                      "timings.png", "success_by_task_type.png", "eval.png", "learning_signal.png", "updates.png",
                      "validation.png"}
    assert set(summary["plots"]) == expected_plots
    for name in expected_plots:
        data = (out / name).read_bytes()
        assert data[:8] == PNG_MAGIC and len(data) > 2000, name

    by = {s["name"]: s for s in summary["runs"]}
    # gaca final success = mean of the last 5 finite values: iterations 8..11 -> 0.8, 0.9, 0.0, 0.1 and 12 -> 0.9
    assert by["gaca"]["final_success"] == pytest.approx((0.8 + 0.9 + 0.0 + 0.1 + 0.9) / FINAL_WINDOW)
    assert "best_success" not in by["gaca"]  # the best training-rollout iteration is not a model selection
    assert by["gaca"]["iterations"] == 12 and by["gaca"]["bad_lines"] == 2
    assert by["gaca"]["final_lambda_mean"] == pytest.approx((0.75 * 4 + 0.8) / 5)
    assert by["gaca"]["final_success_by_task_type"]["pick_and_place_simple"] == pytest.approx((0.5 * 4 + 1.0) / 5)
    assert by["gaca"]["final_success_by_task_type"]["look_at_obj_in_light"] == pytest.approx(0.25)
    assert by["gaca"]["validation"] == {"rounds": 3, "first_iteration": 3, "first": 0.5, "last_iteration": 11,
                                        "last": 0.25, "best_iteration": 3, "best": 0.5, "episodes": 64.0}
    assert by["gigpo"]["validation"] is None
    assert by["gigpo"]["final_success"] == pytest.approx(0.2) and by["gigpo"]["final_lambda_mean"] is None
    assert by["gigpo"]["mean_iteration_seconds"] == pytest.approx(11.0)
    assert by["grpo"]["final_success"] == pytest.approx(0.05) and by["grpo"]["final_score"] is None
    assert sorted(e["success_rate"] for e in by["grpo"]["evals"]) == [0.375, 0.625]
    [agg] = by["grpo"]["eval_groups"]
    assert (agg["model"], agg["panel"], agg["temperature"]) == ("final", "eval_id", 0.4)
    assert agg["num_results"] == 2 and agg["mean_success"] == pytest.approx(0.5) and agg["seeds"] == [0, 1]
    assert agg["std_success"] == pytest.approx(0.125)  # population SD: sqrt(((0.375-0.5)^2 + (0.625-0.5)^2) / 2)
    assert agg["std_success_sample"] == pytest.approx(0.125 * 2 ** 0.5)  # sample SD (n - 1), labelled

    md = (out / "report.md").read_text()
    measured, reference = md.split("## Reference numbers from the papers")
    training = measured.split("## Measured: training")[1].split("## Measured: evaluation")[0]
    gaca_row = next(line for line in training.splitlines() if line.startswith("| gaca |"))
    assert f"| gaca | {100 * by['gaca']['final_success']:.2f} | 0.540 |" in gaca_row
    assert "90.00" not in training  # no "best" single training iteration
    gigpo_row = next(line for line in training.splitlines() if line.startswith("| gigpo |"))
    assert "| 20.00 | 0.200 |" in gigpo_row and "n/a" in gigpo_row  # no lambda for GiGPO
    eval_row = next(line for line in measured.splitlines()
                    if line.startswith("| grpo | final | eval_id |") and "eval_eval_id.json" in line)
    assert "| 0 | 8 | 1 | 37.50 |" in eval_row and "| unrecorded |" in eval_row
    assert "| grpo | final | eval_id | 0.4 | 0, 1 | 50.00 | 12.50 | 17.68 |" in measured  # pop SD, then sample SD
    assert "| grpo | eval_id | 0.4 | 50.00 ± 12.50 | 2 | final | 50.00 ± 12.50 | 2 | 1 |" in measured
    assert "| grpo | final | eval_id | 0 | 25.00 | 50.00 |" in measured  # per task type, columns sorted
    assert "| gaca | 3 | 64 | 50.00 (3) | 25.00 (11) | 50.00 (3) |" in measured  # validation rounds
    assert "| gigpo | " not in measured.split("### Validation during training")[1].split("## Measured: evaluation")[0]
    assert "Generated data" not in md
    # paper numbers only in their own, labelled section
    assert "96.88" in reference and "NOT measured" in reference
    assert "96.88" not in measured and "86.7" not in measured
    assert "nan" not in md.lower()
    err = capsys.readouterr().err
    assert "unreadable line" in err and "eval_broken.json" in err


def test_report_empty_and_missing_runs(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    out = tmp_path / "r"
    assert main(["--run", f"x={empty}", "--out", str(out)]) == 0
    assert (out / "success_rate.png").read_bytes()[:8] == PNG_MAGIC
    assert "No evaluation results" in (out / "report.md").read_text()
    with pytest.raises(SystemExit):
        main(["--run", f"x={tmp_path / 'nope'}", "--out", str(out)])
    with pytest.raises(SystemExit):
        main(["--run", f"x={empty}", "--run", f"x={empty}", "--out", str(out)])


def test_moving_average_skips_nan():
    nan = float("nan")
    assert moving_average([1.0, nan, 3.0], 2) == [1.0, 1.0, 3.0]
    assert math.isnan(moving_average([nan], 3)[0])


def test_module_entry_point(runs, tmp_path):
    out = tmp_path / "cli"
    res = subprocess.run([sys.executable, "-m", "gaca_openrlhf.report", "--run", runs["gigpo"], "--out", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert (out / "report.md").exists() and "| gigpo |" in (out / "report.md").read_text()


# ------------------------------------------------------------------------------------------------ paper protocol
def _eval(path, model, success, seed, temperature=0.4, panel="eval_id", generated=None):
    cfg = {"panel": panel, "seed": seed, "temperature": temperature, "model": str(model)}
    if generated is not None:
        cfg["generated_data"] = generated
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"success_rate": success, "num_episodes": 16, "num_failed": 0, "config": cfg, "episodes": []}, f)


@pytest.fixture
def checkpoint_run(tmp_path):
    """A run folder with the final model and two checkpoints evaluated (as examples/gpu/run_comparison.sh names
    them), one final-model result at another temperature and a repeated seed."""
    run = tmp_path / "gaca"
    _write(run, [_record(i, 0.5, 0.75) for i in range(1, 4)])
    ck5, ck10 = run / "ckpt" / "global_step5_hf", run / "ckpt" / "global_step10_hf"
    for seed, x in zip((0, 1, 2), (0.5, 0.625, 0.75)):  # final: mean 0.625, population SD sqrt(1/96)
        _eval(run / f"eval_eval_id_seed{seed}.json", run, x, seed)
    for seed, x in zip((0, 1, 2), (0.75, 0.875, 0.8125)):  # step 10: mean 0.8125, population SD sqrt(1/384)
        _eval(run / f"eval_eval_id_global_step10_hf_seed{seed}.json", ck10, x, seed)
    for seed, x in zip((0, 1), (0.25, 0.125)):  # step 5: mean 0.1875
        _eval(run / f"eval_eval_id_global_step5_hf_seed{seed}.json", ck5, x, seed)
    _eval(run / "eval_eval_id_global_step5_hf_seed1_again.json", ck5, 0.9, 1)  # same seed again: counted once
    _eval(run / "eval_eval_id_T1_seed0.json", run, 0.25, 0, temperature=1.0)
    return run


def test_report_groups_by_checkpoint_with_population_sd_and_best(checkpoint_run, tmp_path, capsys):
    out = tmp_path / "rep"
    assert main(["--run", f"gaca={checkpoint_run}", "--out", str(out)]) == 0
    s = json.loads((out / "summary.json").read_text())["runs"][0]
    groups = {(g["model"], g["temperature"]): g for g in s["eval_groups"]}
    assert set(groups) == {("final", 0.4), ("ckpt/global_step10_hf", 0.4), ("ckpt/global_step5_hf", 0.4),
                           ("final", 1.0)}
    final, c10, c5 = groups[("final", 0.4)], groups[("ckpt/global_step10_hf", 0.4)], groups[("ckpt/global_step5_hf", 0.4)]
    assert final["mean_success"] == pytest.approx(0.625) and final["std_success"] == pytest.approx((1 / 96) ** 0.5)
    assert final["std_success_sample"] == pytest.approx(0.125)
    assert c10["mean_success"] == pytest.approx(0.8125) and c10["std_success"] == pytest.approx((1 / 384) ** 0.5)
    assert c5["seeds"] == [0, 1] and c5["mean_success"] == pytest.approx(0.1875) and c5["duplicate_seeds"] == [1]
    assert groups[("final", 1.0)]["num_results"] == 1 and groups[("final", 1.0)]["mean_success"] == 0.25
    [b04, b10] = sorted(s["eval_best"], key=lambda b: b["temperature"])
    assert (b04["best_model"], b04["final_model"], b04["num_models"]) == ("ckpt/global_step10_hf", "final", 3)
    assert b04["best_mean_success"] == pytest.approx(0.8125) and b04["final_mean_success"] == pytest.approx(0.625)
    assert b10["best_model"] == "final" and b10["num_models"] == 1
    md = (out / "report.md").read_text()
    assert "| gaca | eval_id | 0.4 | 62.50 ± 10.21 | 3 | ckpt/global_step10_hf | 81.25 ± 5.10 | 3 | 3 |" in md
    assert "| gaca | ckpt/global_step5_hf | eval_id | 0.4 | 0, 1 | 18.75 | 6.25 | 8.84 |" in md
    assert "population" in md and "sample SD" in md and "Generated data" not in md
    # never pooled: no number over all six 0.4 results of the three models
    pooled = sum([0.5, 0.625, 0.75, 0.75, 0.875, 0.8125, 0.25, 0.125]) / 8
    assert f"{100 * pooled:.2f}" not in md
    err = capsys.readouterr().err
    assert "seed 1" in err and "counted once" in err


def test_best_prefers_final_on_ties_and_later_checkpoint(tmp_path):
    run = tmp_path / "r"
    _write(run, [])
    _eval(run / "eval_a_seed0.json", run, 0.5, 0)
    _eval(run / "eval_b_seed0.json", run / "ckpt" / "global_step2_hf", 0.5, 0)
    _eval(run / "eval_c_seed0.json", run / "ckpt" / "global_step3_hf", 0.25, 0)
    [b] = run_summary(load_run("r", str(run)))["eval_best"]
    assert b["best_model"] == "final"
    (run / "eval_a_seed0.json").unlink()
    _eval(run / "eval_d_seed0.json", run / "ckpt" / "global_step1_hf", 0.5, 0)
    [b] = run_summary(load_run("r", str(run)))["eval_best"]
    assert b["best_model"] == "ckpt/global_step2_hf" and b["final_model"] is None and b["final_num_seeds"] == 0


def test_generated_data_warning(checkpoint_run, tmp_path, capsys):
    out = tmp_path / "rep"
    assert run_summary(load_run("gaca", str(checkpoint_run)))["generated_data"] is False
    _eval(checkpoint_run / "eval_eval_id_seed2.json", checkpoint_run, 0.75, 2, generated=True)
    assert main(["--run", f"gaca={checkpoint_run}", "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    measured, reference = md.split("## Reference numbers from the papers")
    assert "**Generated data.**" in measured.split("## Runs")[0] and "NOT comparable" in reference
    assert json.loads((out / "summary.json").read_text())["generated_data"] is True
    assert "generated data" in capsys.readouterr().err


def test_reference_numbers_and_captions_come_from_the_environments():
    """Each benchmark's published numbers, setup and captions are its EnvSpec's ``benchmark``
    (agents/<env>/benchmark.py); the report groups them by paper, then benchmark."""
    from gaca_openrlhf.report.build import generated_data_warning, score_title
    from gaca_openrlhf.report.reference import paper_results, setup

    rows = paper_results()
    assert rows[0] == ("GACA paper (arXiv 2609.12424)", "ALFWorld", "Qwen2.5-1.5B-Instruct",
                       "GACA (lambda0 = alpha = 0.5)", 96.88)
    assert [(r[0], r[1]) for r in rows][8:13] == [("GACA paper (arXiv 2609.12424)", "ALFWorld")] + \
        [("GACA paper (arXiv 2609.12424)", "WebShop")] * 2 + [("GiGPO paper", "ALFWorld")] * 2
    assert len(rows) == 19 and rows[-1] == ("GiGPO paper", "WebShop", "Qwen2.5-7B-Instruct", "GRPO", 66.1)
    assert setup().endswith("train T 1.0 / eval T 0.4; ALFWorld prompt 2048 / response 512 / mean_std_norm; WebShop "
                            "prompt 4096 / mean_norm")
    assert score_title() == "Training score (WebShop score; ALFWorld: success)"
    assert "(ALFWorld games generated offline from the alfworld wheel's assets, or the generated WebShop catalog)" \
        in generated_data_warning()


def test_learning_signal_curves_are_drawn(tmp_path, monkeypatch):
    """The per-iteration learning signals (issue 35) reach the plots with their values. Catches a key misspelt in
    the plot list (its panel would say "no data") or a curve left out."""
    from gaca_openrlhf.report import build

    recs = [dict(_record(i, 0.1 * i, 0.75), **{"policy/entropy": 1.0 - 0.1 * i, "rollout/mixed_outcome_group_frac": 0.5,
                                             "adv/nonzero_frac": 0.4, "train/grad_norm_mean": 2.0,
                                             "train/grad_norm_max": 3.0, "actor_lr": 1e-4,
                                             "rollout/off_list_frac": 0.3, "adv/advantage_mean": 0.05})
            for i in (1, 2, 3)]
    run = load_run("r", _write(tmp_path / "r", recs))
    drawn = {}
    monkeypatch.setattr(build, "_line_plot", lambda runs, path, title, panels, smooth, sparse=False: drawn.update(
        {key: runs[0].series(key)[1] for key, _ in panels}))
    (tmp_path / "out").mkdir()
    build.make_plots([run], str(tmp_path / "out"))
    assert drawn["policy/entropy"] == pytest.approx([0.9, 0.8, 0.7])
    for key in ("rollout/mixed_outcome_group_frac", "adv/nonzero_frac", "adv/advantage_mean", "train/grad_norm_mean",
                "train/grad_norm_max", "actor_lr", "rollout/off_list_frac"):
        assert all(math.isfinite(v) for v in drawn[key]), key
