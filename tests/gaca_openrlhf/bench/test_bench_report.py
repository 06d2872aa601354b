"""Benchmark report statistics and files, on synthetic evaluation results and metrics (no training)."""
import json
import math
from types import SimpleNamespace

import pytest

from gaca_openrlhf.bench import report
from gaca_openrlhf.bench.quickstart.config import QuickstartConfig


def test_mean_pop_sd_is_the_population_sd():
    m, sd = report.mean_pop_sd([0.0, 1.0])
    assert m == 0.5 and sd == 0.5  # sample SD would be 0.707
    assert report.mean_pop_sd([0.2, None, float("nan")]) == (0.2, 0.0)
    assert all(math.isnan(x) for x in report.mean_pop_sd([]))


def test_paired_wins_counts_per_shared_seed():
    final = {"gaca": {0: 0.5, 1: 0.2, 2: 0.3}, "grpo": {0: 0.4, 1: 0.2, 2: 0.6}, "gigpo": {0: 0.1}}
    rows = {(a, b): (w, t, lo) for a, b, w, t, lo in report.paired_wins(final)}
    assert rows[("gaca", "grpo")] == (1, 1, 1)
    assert rows[("gaca", "gigpo")] == (1, 0, 0)  # only seed 0 is shared
    assert rows[("gigpo", "grpo")] == (0, 0, 1)


def _eval(seed, won, types):
    eps = [{"task": f"g{i}", "won": w, "task_type": t} for i, (w, t) in enumerate(zip(won, types))]
    per = {}
    for t in sorted(set(types)):
        ws = [e["won"] for e in eps if e["task_type"] == t]
        per[t] = {"success_rate": sum(ws) / len(ws), "num_episodes": len(ws)}
    return {"success_rate": sum(won) / len(won), "per_task_type": per, "config": {"seed": seed}, "episodes": eps,
            "repeat_action_ratio": 0.1 * (seed + 1), "admissible_action_ratio": 0.9, "valid_action_ratio": 1.0,
            "mean_steps": 4.0 + seed}


def _write_eval(d, results):
    d.mkdir(parents=True)
    for r in results:
        (d / f"seed{r['config']['seed']}.json").write_text(json.dumps(r))


def test_per_type_stats_over_seeds(tmp_path):
    types = ["a", "a", "b", "b"]
    res = [_eval(0, [1, 0, 1, 1], types), _eval(1, [1, 1, 0, 0], types)]
    st = report.per_type_stats(res)
    assert st["a"] == (0.75, 0.25, 2) and st["b"] == (0.5, 0.5, 2)
    _write_eval(tmp_path / "e", list(reversed(res)))
    loaded = report.load_eval_dir(tmp_path / "e")
    assert [r["config"]["seed"] for r in loaded] == [0, 1]
    assert report.seed_stats(loaded)[:2] == (0.625, 0.125)


def _metrics(path, sr, lam):
    path.mkdir(parents=True, exist_ok=True)
    with open(path / "metrics.jsonl", "w") as f:
        for i, (s, l) in enumerate(zip(sr, lam)):
            f.write(json.dumps({"iteration": i + 1, "rollout/success_rate": s, "adv/lambda_mean": l,
                                "rollout/valid_action_ratio": 0.9, "rollout/num_steps": 5.0}) + "\n")


def _state(tmp_path, runs):
    return SimpleNamespace(panel="panel.json", sft={"model_spec": {}, "config": {}, "demos": {}}, runs=runs,
                           evals={}, server_url="")


def test_quickstart_report_has_before_after_per_type_and_plots(tmp_path):
    types = ["pick_and_place_simple"] * 4
    _write_eval(tmp_path / "eval" / "warm_start", [_eval(s, [0, 0, 1, 0], types) for s in (0, 1, 2)])
    _write_eval(tmp_path / "eval" / "after_rl", [_eval(0, [1, 1, 1, 0], types), _eval(1, [1, 0, 1, 0], types),
                                                  _eval(2, [1, 1, 1, 1], types)])
    _metrics(tmp_path / "runs" / "gaca_seed0", [0.1, 0.3, 0.5], [0.75, 0.74, 0.76])
    st = _state(tmp_path, {"gaca_seed0": str(tmp_path / "runs" / "gaca_seed0")})
    st.evals = {"warm_start": str(tmp_path / "eval" / "warm_start"), "after_rl": str(tmp_path / "eval" / "after_rl")}
    record = {"mode": "quickstart", "packages": {"torch": "x"}, "seeds": {"eval": [0, 1, 2]}}
    report.write_quickstart_report(tmp_path, QuickstartConfig(), st, record, {"data": 10.0, "rl": 100.0})
    md = (tmp_path / "report.md").read_text()
    assert "25.0 +- 0.0" in md  # warm start: 1/4 on every seed
    # the panel table: success per game averaged over the 3 eval seeds, 25 % -> 75 %, gain +50 with its interval
    # over the 4 games (game g3 goes 0 -> 1/3, g0 0 -> 1, g1 0 -> 2/3, g2 1 -> 1)
    assert "| test: valid_seen (4 games) | 25.0 [0.0, 75.0] | 75.0 [" in md
    assert "Setting: generated ALFWorld games" in md and "15-step cap" in md
    assert "75.0 +- 20.4" in md  # after: 0.75, 0.5, 1.0 -> population SD 0.204 (sample SD would be 25.0)
    # behaviour: repeat ratio 0.1 / 0.2 / 0.3 on seeds 0-2 -> 20.0 +- 8.2; steps 4 / 5 / 6 -> 5.0 +- 0.8
    assert "| repeats the previous step's action | 20.0 +- 8.2 | 20.0 +- 8.2 |" in md
    assert "| steps per episode | 5.0 +- 0.8 | 5.0 +- 0.8 |" in md
    assert f"temperature {QuickstartConfig().rl_temperature}, off-list actions penalised as invalid" in md
    assert "KL loss" not in md
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["held_out_after"]["per_seed"] == [0.75, 0.5, 1.0]
    assert summary["delta_points"] == pytest.approx(50.0)
    assert summary["lambda_mean"] == [0.75, 0.74, 0.76]
    for name in ("learning_curve.png", "lambda.png", "success_rate.png"):
        assert (tmp_path / "plots" / name).stat().st_size > 1000
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["status"] == "ok" and run["metrics"]["held_out_before"]["mean"] == 0.25


def test_compare_report_tables_and_bands(tmp_path):
    types = ["t"] * 2
    runs, evals = {}, {}
    _write_eval(tmp_path / "eval" / "warm_start", [_eval(0, [0, 0], types)])
    evals["warm_start"] = str(tmp_path / "eval" / "warm_start")
    finals = {"grpo": [[0, 0], [1, 0]], "gaca": [[1, 0], [1, 1]]}
    for method, per_seed in finals.items():
        for seed, won in enumerate(per_seed):
            label = f"{method}_seed{seed}"
            _metrics(tmp_path / "runs" / label, [0.1 * seed, 0.2], [0.7, 0.8] if method == "gaca" else [None, None])
            _write_eval(tmp_path / "eval" / label, [_eval(0, won, types)])
            runs[label], evals[label] = str(tmp_path / "runs" / label), str(tmp_path / "eval" / label)
    st = _state(tmp_path, runs)
    st.evals = evals
    report.write_compare_report(tmp_path, QuickstartConfig(rl_seeds=(0, 1), eval_seeds=(0,), rl_temperature=0.7), st,
                                {"mode": "compare"}, {"rl": 1.0})
    md = (tmp_path / "report.md").read_text()
    assert "rollout temperature 0.7," in md
    assert "| gaca | 75.0 +- 25.0 |" in md and "| grpo | 25.0 +- 25.0 |" in md
    assert "| gaca | grpo | 2 / 0 / 0 |" in md
    assert (tmp_path / "plots" / "success_rate_bands.png").stat().st_size > 1000
    # the panel table with intervals over seeds and games: warm 0/2; grpo (0 + 1) / 4 = 25 %; gaca 3/4 = 75 %
    assert "Setting: generated ALFWorld games" in md and "15-step cap" in md
    assert "| warm start | - | 0.0 [0.0, 0.0] |" in md
    assert "| GRPO | 2 | 25.0 [" in md and "/ +25.0 [" in md and "| GACA | 2 | 75.0 [" in md and "/ +75.0 [" in md
    assert "GACA - GRPO: test: valid_seen +50.0 [" in md
    text = (tmp_path / "summary.txt").read_text()
    assert text.startswith("setting: generated ALFWorld games")
    assert "    gaca   75.0 [" in text and "/ +75.0 [" in text and "    grpo   25.0 [" in text
    assert text.index("    grpo ") < text.index("    gaca ")  # the README's order: GRPO, GiGPO, GACA
    assert json.loads((tmp_path / "summary.json").read_text())["panels"]["test: valid_seen"]["gaca"]["gain"]["mean"] \
        == pytest.approx(0.75)


def test_report_labels_the_easier_subset_and_the_demonstrator():
    # bug caught: a report that hides the receptacle cap (the numbers would read as full-room ALFWorld)
    from dataclasses import replace

    from gaca_openrlhf.bench.quickstart.config import PRESETS
    from gaca_openrlhf.bench.quickstart.state import State
    from gaca_openrlhf.bench.report import _data_md

    text = _data_md(PRESETS["full"], State(panel="p.json"))
    assert f"at most {PRESETS['full'].max_receptacles} receptacles" in text and "searcher" in text
    full_rooms = _data_md(replace(PRESETS["full"], max_receptacles=0, expert="walkthrough"), State(panel="p.json"))
    assert "receptacles per room" not in full_rooms and "walkthroughs" in full_rooms


def test_quickstart_report_names_the_rl_temperature_and_kl(tmp_path):
    # catches: the RL line printing a fixed temperature (it once said 1.0 whatever --rl-temperature was)
    types = ["t"] * 2
    for label in ("warm_start", "after_rl"):
        _write_eval(tmp_path / "eval" / label, [_eval(0, [1, 0], types)])
    _metrics(tmp_path / "runs" / "gaca_seed0", [0.5], [0.7])
    st = _state(tmp_path, {"gaca_seed0": str(tmp_path / "runs" / "gaca_seed0")})
    st.evals = {k: str(tmp_path / "eval" / k) for k in ("warm_start", "after_rl")}
    cfg = QuickstartConfig(rl_temperature=0.7, rl_kl_coef=0.05, eval_seeds=(0,), rl_validity="format")
    report.write_quickstart_report(tmp_path, cfg, st, {"mode": "quickstart"}, {"rl": 1.0})
    md = (tmp_path / "report.md").read_text()
    assert "temperature 0.7, KL loss 0.05 (k3);" in md and "off-list" not in md
    cfg = QuickstartConfig(rl_temperature=0.7, rl_validity="admissible", eval_seeds=(0,))
    report.write_quickstart_report(tmp_path, cfg, st, {"mode": "quickstart"}, {"rl": 1.0})
    assert "temperature 0.7, off-list actions penalised as invalid (c = 0.1; verl-agent penalises bad format only);" \
        in (tmp_path / "report.md").read_text()
    # evaluation files from before the loop counters existed: n/a, not a crash
    old = [{k: v for k, v in _eval(0, [1, 0], types).items() if k != "repeat_action_ratio"}]
    assert math.isnan(report.behaviour_stats(old)["repeat_action_ratio"][0])
