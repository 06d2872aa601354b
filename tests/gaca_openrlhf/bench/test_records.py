"""results/ records: collected from a quickstart output folder, rendered into the README, and the README checked
against them (the check that fails when a number in the README has no committed record behind it)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gaca_openrlhf.bench import records

ROOT = Path(__file__).resolve().parents[3]


def _eval(folder: Path, outcomes: dict, seed: int = 0):
    folder.mkdir(parents=True, exist_ok=True)
    eps = [{"task": t, "task_type": "pick_and_place_simple", "seed": seed, "won": w, "steps": 3, "failed": False,
            "actions": ["look"]} for t, w in outcomes.items()]
    (folder / f"seed{seed}.json").write_text(json.dumps({"success_rate": 0.0, "episodes": eps}))
    (folder / "wall_s.txt").write_text("60.0\n")


def _fake_out(tmp_path: Path) -> Path:
    """A quickstart output folder as the compare writes it: warm start + 2 methods x 2 seeds, two panels."""
    out = tmp_path / "out"
    games = [f"g{i}" for i in range(8)]
    cfg = {"env": "alfworld", "task_types": "1", "max_receptacles": 6, "max_distractor_types": 0, "train_games": 256,
           "max_steps": 15, "model_size": "small", "rl_iterations": 8, "rl_tasks_per_iter": 8, "rl_n": 4,
           "rl_lr": 1e-4, "rl_temperature": 0.4, "rl_validity": "admissible", "eval_temperature": 0.4}
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"command": "python -m gaca_openrlhf.bench --compare", "git_commit": "abc1234",
                                              "config": cfg, "seeds": {"rl": [0, 1]}, "cpus": 2,
                                              "started_utc": "2026-12-03T00:00:00Z"}))
    wins = {"warm_start": [1, 0, 0, 0, 1, 0, 0, 0], "grpo_seed0": [1, 1, 0, 0, 1, 0, 0, 0],
            "grpo_seed1": [1, 0, 0, 0, 1, 0, 1, 0], "gaca_seed0": [1, 1, 1, 0, 1, 1, 0, 0],
            "gaca_seed1": [1, 1, 0, 1, 1, 1, 1, 0]}
    for label, w in wins.items():
        _eval(out / "eval" / label, dict(zip(games, map(bool, w))))
        _eval(out / "eval" / label / "test_unseen", dict(zip(games[:4], map(bool, w[4:]))))
        _eval(out / "eval" / label / "val", dict(zip(games[:2], map(bool, w[:2]))))
        if label != "warm_start":  # the validation curve: iteration 4 of 8, every run won nothing there
            _eval(out / "eval" / label / "val_curve" / "step4", dict(zip(games[:2], [False, False])))
        if label != "warm_start":
            run = out / "runs" / label
            run.mkdir(parents=True)
            (run / "metrics.jsonl").write_text(json.dumps({"iteration": 1, "rollout/success_rate": 0.5}) + "\n")
            (run / "wall_s.txt").write_text("600\n")
            (run / "command.txt").write_text("python -m gaca_openrlhf.cli.train_ppo ...\n")
    return out


def test_collect_keeps_per_episode_outcomes_and_metrics(tmp_path):
    out = _fake_out(tmp_path)
    rec = records.collect(out, tmp_path / "results" / "r1", what="unit")
    dest = tmp_path / "results" / "r1"
    eps = [json.loads(x) for x in (dest / "episodes" / "gaca_seed1" / "test.jsonl").read_text().splitlines()]
    assert [e["won"] for e in eps] == [True, True, False, True, True, True, True, False]
    assert "actions" not in eps[0]  # records stay small
    assert (dest / "episodes" / "gaca_seed1" / "test_unseen.jsonl").is_file()
    assert (dest / "episodes" / "gaca_seed1" / "val_step4.jsonl").is_file()
    assert (dest / "metrics" / "grpo_seed0.jsonl").is_file() and rec["runs"]["grpo_seed0"]["seed"] == 0
    assert rec["runs"]["gaca_seed0"]["rl_wall_s"] == 600.0 and rec["git_commit"] == "abc1234"


def test_collect_keeps_the_plain_commands_run(tmp_path):
    """The plain command (one method, one seed) evaluates its final model as ``after_rl`` while its run lives in
    ``runs/<method>_seed<N>``: the record keeps that run's metrics and names its method and seed. Catches the run's
    metrics.jsonl left out of the record (as it was: only --compare's labels matched their run folders)."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"command": "python -m gaca_openrlhf.bench", "config": {}}))
    _eval(out / "eval" / "warm_start", {"g0": True, "g1": False})
    _eval(out / "eval" / "after_rl", {"g0": True, "g1": True})
    run = out / "runs" / "grpo_seed3"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text(json.dumps({"iteration": 1, "rollout/success_rate": 0.5}) + "\n")
    (run / "wall_s.txt").write_text("42\n")
    rec = records.collect(out, tmp_path / "results" / "plain")
    dest = tmp_path / "results" / "plain"
    assert (dest / "metrics" / "grpo_seed3.jsonl").read_text() == (run / "metrics.jsonl").read_text()
    assert rec["runs"]["after_rl"]["method"] == "grpo" and rec["runs"]["after_rl"]["seed"] == 3
    assert rec["runs"]["after_rl"]["rl_wall_s"] == 42.0 and "method" not in rec["runs"]["warm_start"]


def test_rendered_table_matches_numbers_recomputed_from_the_episodes(tmp_path):
    from gaca_openrlhf.report.stats import difference

    records.collect(_fake_out(tmp_path), tmp_path / "results" / "r1")
    text = records.render_record(tmp_path / "results" / "r1")
    # GACA's test success: mean of its 2 x 8 outcomes, recomputed here by hand = 11/16
    assert "| GACA | 2 | 68.8 [" in text and "| warm start | - | 25.0 [" in text
    gain = difference(np.array([[1, 1, 1, 0, 1, 1, 0, 0], [1, 1, 0, 1, 1, 1, 1, 0]]), np.array([[1, 0, 0, 0, 1, 0, 0, 0]]))
    assert gain.fmt() in text
    assert "GACA - GRPO" in text and "generated ALFWorld games" in text and "15-step cap" in text
    assert "reward shaping" in text  # the admissible rule is named for what it is
    # validation curve: warm start 1/2, iteration 4: 0/2 for every run, iteration 8 (final): GRPO 2/2 and 1/2
    assert "| | training seeds | 0 | 4 | 8 |" in text
    assert "| GRPO | 2 | 50.0 [0.0, 100.0] | 0.0 [0.0, 0.0] | 75.0 [" in text


def _plain_part(tmp_path: Path, name: str, seed: int, wins: list, warm=(1, 0, 0, 0), cfg=None, cpu="X (AVX2)",
                method="grpo"):
    """One plain single-seed quickstart run (labels ``warm_start`` and ``after_rl``), collected as results/r/<name>."""
    out = tmp_path / f"out_{name}"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"command": f"python -m gaca_openrlhf.bench --rl-seeds {seed}",
                                              "git_commit": f"{seed}" * 40, "cpu_model": cpu, "cpus": 2,
                                              "config": dict(cfg or {"env": "alfworld", "max_steps": 15},
                                                             rl_seeds=[seed], methods=[method]),
                                              "started_utc": f"2026-12-05T0{seed}:00:00Z"}))
    games = [f"/cache{seed}/valid_seen/g{i}/trial_0" for i in range(4)]  # another data folder per part
    _eval(out / "eval" / "warm_start", dict(zip(games, map(bool, warm))))
    _eval(out / "eval" / "after_rl", dict(zip(games, map(bool, wins))))
    run = out / "runs" / f"{method}_seed{seed}"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text(json.dumps({"iteration": 1, "seed": seed}) + "\n")
    records.collect(out, tmp_path / "r" / name)
    return tmp_path / "r" / name


def test_a_single_collected_plain_run_renders_under_its_method(tmp_path):
    """A plain run collected on its own (labels warm_start and after_rl, before any merge) renders as its method's
    row, seed from the record. Catches the crash it was (after_rl split as <method>_seed<N>)."""
    part = _plain_part(tmp_path, "s3", 3, [1, 1, 1, 0], method="gigpo")
    text = records.render_record(part)
    assert "| GIGPO | 1 | 75.0 [" in text and "AFTER_RL" not in text
    rec = json.loads((part / "record.json").read_text())
    rec["runs"]["after_rl"].pop("seed")
    (part / "record.json").write_text(json.dumps(rec))
    with pytest.raises(ValueError, match="after_rl is neither"):
        records.render_record(part)


def test_merge_makes_one_multi_seed_record_of_single_seed_parts(tmp_path):
    from gaca_openrlhf.report.stats import difference

    # the second part ran after a setting was added, at the value the first implicitly had (IMPLICIT_BEFORE)
    parts = [_plain_part(tmp_path, "s0", 0, [1, 1, 0, 0]),
             _plain_part(tmp_path, "s1", 1, [1, 0, 1, 1], cfg={"env": "alfworld", "max_steps": 15, "sft_seed": 0})]
    (tmp_path / "r" / "keep.txt").write_text("x")
    rec = records.merge(parts, tmp_path / "r")
    assert sorted(rec["runs"]) == ["grpo_seed0", "grpo_seed1", "warm_start"] and rec["config"]["rl_seeds"] == [0, 1]
    assert (tmp_path / "r" / "keep.txt").is_file() and (parts[0] / "record.json").is_file()  # parts stay
    assert json.loads((tmp_path / "r" / "metrics" / "grpo_seed1.jsonl").read_text())["seed"] == 1
    text = records.render_record(tmp_path / "r")
    # GRPO over 2 seeds x 4 games: 5/8 won; gain against the warm start's 1/4, recomputed here from the outcomes
    gain = difference(np.array([[1, 1, 0, 0], [1, 0, 1, 1]]), np.array([[1, 0, 0, 0]]))
    assert "| GRPO | 2 | 62.5 [" in text and gain.fmt() in text and "commits 0000000, 1111111," in text


def test_merge_unites_methods_run_apart_as_a_compare(tmp_path):
    grpo = _plain_part(tmp_path, "g0", 0, [1, 1, 0, 0])
    gaca = _plain_part(tmp_path, "a0", 0, [1, 1, 1, 0], method="gaca")
    rec = records.merge([grpo, gaca], tmp_path / "r")
    assert sorted(rec["runs"]) == ["gaca_seed0", "grpo_seed0", "warm_start"]
    assert rec["config"]["methods"] == ["gaca", "grpo"] and rec["config"]["rl_seeds"] == [0]
    assert "GACA - GRPO" in records.render_record(tmp_path / "r")


@pytest.mark.parametrize("change, match", [
    (dict(cfg={"env": "alfworld", "max_steps": 10}), "differ in setting: max_steps"),
    (dict(cfg={"env": "alfworld", "max_steps": 15, "sft_seed": 1}), "differ in setting: sft_seed"),
    (dict(cpu="Y (AMX)"), "differ in cpu"),
    (dict(warm=(1, 1, 0, 0)), "different warm-start episodes"),
    (dict(seed=0), "in two records"),
])
def test_merge_refuses_parts_that_are_not_one_setting(tmp_path, change, match):
    first = _plain_part(tmp_path, "s0", 0, [1, 1, 0, 0])
    kw = dict(seed=1, wins=[1, 0, 1, 1])
    kw.update(change)
    other = _plain_part(tmp_path, "s1", kw.pop("seed"), kw.pop("wins"), **kw)
    with pytest.raises(ValueError, match=match):
        records.merge([first, other], tmp_path / "r")
    assert records.main(["merge", str(tmp_path / "r"), str(first), str(other)]) == 2


def test_readme_render_replaces_marked_blocks_and_check_fails_on_disagreement(tmp_path):
    records.collect(_fake_out(tmp_path), tmp_path / "results" / "r1")
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- results:r1 -->\nstale numbers\n<!-- /results:r1 -->\nend\n")
    argv = ["render", "--readme", str(readme), "--results", str(tmp_path / "results")]
    assert records.main(argv) == 1  # stale
    assert records.main(argv + ["--write"]) == 0
    assert records.main(argv) == 0 and "stale" not in readme.read_text()
    readme.write_text(readme.read_text().replace("68.8", "70.0"))  # a number edited by hand
    assert records.main(argv) == 1
    readme.write_text("<!-- results:missing -->\nx\n<!-- /results:missing -->\n")
    with pytest.raises(FileNotFoundError, match="missing"):
        records.main(argv)


def test_project_readme_agrees_with_committed_results():
    """Every README table marked as a record equals its rendering from results/ (regenerate with
    `python -m gaca_openrlhf.bench.records render --write`)."""
    proc = subprocess.run([sys.executable, "-m", "gaca_openrlhf.bench.records", "render"], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_curves_figure_is_drawn_from_the_record(tmp_path):
    records.collect(_fake_out(tmp_path), tmp_path / "results" / "r1")
    out = records.plot_record(tmp_path / "results" / "r1")
    assert out == tmp_path / "results" / "r1" / "curves.png" and out.stat().st_size > 5000


def _plain_cfg() -> dict:
    from dataclasses import asdict

    from gaca_openrlhf.bench.quickstart.cli import build_parser, config_from_args

    return json.loads(json.dumps(asdict(config_from_args(build_parser().parse_args([])))))


def test_learning_target_is_judged_on_the_plain_command_s_method_over_five_seeds():
    games = 40
    warm = np.zeros((1, games))
    warm[0, :16] = 1  # 40 %
    strong = np.zeros((5, games))
    strong[:, :26] = 1  # 65 % on every seed: +25 points, every resample above 0
    weak = warm.repeat(5, axis=0)  # no gain
    cfg = _plain_cfg()

    def verdict(mat, c=cfg):
        text = "".join(records.target_lines(c, {"test": (warm, {"gaca": mat})}))
        return text.split("**")[1] if text else None

    assert verdict(strong) == "met"
    assert verdict(weak) == "not met"
    assert verdict(strong[:4]).startswith("not judged yet (4 of 5")
    # a record whose runs are not the plain command's (another budget) says nothing about the plain command
    assert records.plain_command_differs({**cfg, "rl_iterations": cfg["rl_iterations"] + 4}) == ["rl_iterations"]
    assert verdict(strong, {**cfg, "rl_iterations": cfg["rl_iterations"] + 4}) is None
    # methods and training seeds are what a compare adds: they do not make the runs differ
    assert records.plain_command_differs({**cfg, "methods": ["grpo", "gaca"], "rl_seeds": [0, 1, 2, 3, 4]}) == []


def test_grpo_baseline_target_is_judged_at_any_recipe_with_its_rl_time_and_cpu():
    games = 40
    warm = np.zeros((1, games))
    warm[0, :16] = 1
    strong = np.zeros((5, games))
    strong[:, :26] = 1
    other_recipe = {**_plain_cfg(), "rl_iterations": 24, "rl_mini_batch_steps": 64}

    def line(mat, minutes=20.0, cpu="AMD EPYC (AVX2)"):
        text = "".join(records.target_lines(other_recipe, {"test": (warm, {"grpo": mat})}, minutes, cpu))
        return text

    assert "**met** (GRPO over 5" in line(strong) and "RL up to 20 min per seed" in line(strong)
    assert "**not met**" in line(warm.repeat(5, axis=0)) and "not judged yet (3 of 5" in line(strong[:3])
    assert "not an AVX2-only CPU" in line(strong, cpu="AMD EPYC (AVX512-bf16)")
    assert "not an AVX2-only CPU" not in line(strong)
    assert "Learning target (the plain" not in line(strong)  # another recipe says nothing about the plain command
    assert records.target_lines(other_recipe, {"test": (warm, {"grpo": strong})}) == []  # no RL time, no verdict


def test_setting_line_names_every_other_setting_that_differs_from_the_plain_command():
    cfg = {**_plain_cfg(), "rl_mini_batch_steps": 64, "rl_lr": 3e-4, "rl_seeds": [0, 1]}
    line = records.setting_line(cfg, "X (AVX2)")
    assert "other settings than the plain command's: rl_mini_batch_steps 64;" in line
    assert "lr 0.0003" in line and "rl_lr 0.0003" not in line  # named once, where the line names it
    assert "other settings" not in records.setting_line(_plain_cfg(), "X (AVX2)")
    # the quickstart's own report passes its live config (tuples, not a record's lists): the plain run is plain
    from dataclasses import asdict

    from gaca_openrlhf.bench.quickstart.config import plain_config

    assert "other settings" not in records.setting_line(asdict(plain_config()), "X (AVX2)")


def test_machine_line_names_each_phase_dtype_where_the_run_recorded_them(monkeypatch):
    """Records written since the dtypes were recorded name them beside the CPU; older records (no ``dtypes``)
    render exactly as before, so the committed README blocks keep agreeing."""
    from gaca_openrlhf.bench.quickstart.provenance import phase_dtypes
    from gaca_openrlhf.bench.records import machine_line
    from gaca_openrlhf.cpu import CPU_DTYPE_ENV

    assert machine_line("AMD EPYC (AVX2)", None) == "AMD EPYC (AVX2)"
    line = machine_line("Intel Xeon (AVX512-bf16/AMX)", {"eval": "fp32", "rl": "bf16", "sft": "fp32"})
    assert line == "Intel Xeon (AVX512-bf16/AMX); dtypes: sft fp32, rl bf16, eval fp32"
    for forced in ("bf16", "fp32"):  # run.json reads what train_ppo's auto resolves to on this machine
        monkeypatch.setenv(CPU_DTYPE_ENV, forced)
        assert phase_dtypes() == {"sft": "fp32", "rl": forced, "eval": "fp32"}


def test_audit_blocks_render_the_committed_audit_markdown(tmp_path):
    """``<!-- audit:NAME -->`` takes results/NAME/audit.md (headings moved under the README's); a README citing an
    audit without its audit.json fails. Catches: the block left stale, an uncommitted audit cited."""
    rec = tmp_path / "results" / "audit_x"
    rec.mkdir(parents=True)
    (rec / "audit.json").write_text("{}")
    (rec / "audit.md").write_text("## Credit audit\n\n| estimator | sign agreement |\n|---|---|\n| grpo | 0.61 |\n")
    text = "intro\n<!-- audit:audit_x -->\nold numbers\n<!-- /audit:audit_x -->\nend\n"
    out = records.render_readme(text, tmp_path / "results")
    assert "old numbers" not in out and "##### Credit audit" in out and "| grpo | 0.61 |" in out
    assert records.render_readme(out, tmp_path / "results") == out  # stable: rendering again changes nothing
    (rec / "audit.json").unlink()
    with pytest.raises(FileNotFoundError, match="no audit.json"):
        records.render_readme(text, tmp_path / "results")


def test_simd_label_names_amx_only_where_the_cpu_has_it():
    """An AMD Zen 4 VM (avx512_bf16, no amx_*) was recorded as "AVX512-bf16/AMX", which reads as an Intel AMX machine:
    the families the records compare must be told apart by their own flags."""
    zen4 = {"avx2", "avx512f", "avx512_bf16"}
    assert records.simd_label(zen4) == "AVX512-bf16"
    assert records.simd_label(zen4 | {"amx_tile", "amx_bf16"}) == "AMX"
    assert records.simd_label({"avx2", "avx512f"}) == "AVX512"
    assert records.simd_label({"avx2"}) == "AVX2"
    assert records.simd_label({"sse4_2"}) == "no AVX2"
