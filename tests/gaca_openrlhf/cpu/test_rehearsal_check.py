"""The multi-node rehearsal's check (gaca_openrlhf/cpu/rehearsal_check.py) on synthetic run folders: a rehearsal.json
whose actors all ran on one node fails, one spread over both nodes passes; failed episodes and missing iterations
fail; WebShop needs no env-worker actors (its episodes run in the engines), ALFWorld does."""
from __future__ import annotations

import json

import pytest

from gaca_openrlhf.cpu import rehearsal_check as rc

A, B = "a" * 56, "b" * 56


def report(policy=(A, B), reference=(A, B), engines=(A, B), env_workers=(A, A, B, A), trainer=(B,), nodes=(A, B)):
    return {"nodes": [{"node_id": n, "alive": True, "gpus": 1.0, "cpus": 5.0} for n in nodes],
            "placement": {"policy": list(policy), "reference": list(reference), "engines": list(engines),
                          "env_workers": list(env_workers), "trainer": list(trainer)}}


def run_folder(tmp_path, rep, failed=(0, 0), env="alfworld"):
    (tmp_path / "rehearsal.json").write_text(json.dumps(rep))
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps({"rollout/failed_episodes": f}) + "\n"
                                                    for f in failed))
    (tmp_path / "command.sh").write_text(f"python -m gaca_openrlhf.cli.train_ppo --env.name {env} --x 1")
    return str(tmp_path)


def failed(results):
    return [text for ok, text in results if not ok]


def test_a_run_spread_over_both_nodes_passes(tmp_path):
    assert failed(rc.checks(run_folder(tmp_path, report()), 2, 2)) == []
    assert rc.main([str(tmp_path), "--num-nodes", "2", "--iterations", "2"]) == 0


@pytest.mark.parametrize("role", ["policy", "reference", "engines"])
def test_a_role_on_one_node_only_fails(tmp_path, role):
    save = run_folder(tmp_path, report(**{role: (A, A)}))
    bad = failed(rc.checks(save, 2, 2))
    assert len(bad) == 1 and bad[0].startswith(f"{role}:") and "1 distinct node(s)" in bad[0]
    assert rc.main([save, "--num-nodes", "2"]) == 1


def test_everything_on_one_node_of_a_one_node_cluster_fails_against_two(tmp_path):
    one = report(policy=(A, A), reference=(A, A), engines=(A, A), env_workers=(A,), trainer=(A,), nodes=(A,))
    bad = failed(rc.checks(run_folder(tmp_path, one), 2, 2))
    assert any("1 alive nodes (need 2)" in t for t in bad) and len(bad) == 4
    assert failed(rc.checks(str(tmp_path), 1, 2)) == []  # the same run is a valid one-node run


def test_unknown_or_foreign_nodes_fail(tmp_path):
    bad = failed(rc.checks(run_folder(tmp_path, report(engines=(A, ""), env_workers=(A, "c" * 56))), 2, 2))
    assert [t.split(":")[0] for t in bad] == ["engines", "env workers"]


def test_failed_episodes_and_missing_iterations_fail(tmp_path):
    bad = failed(rc.checks(run_folder(tmp_path, report(), failed=(0, 1)), 2, 2))
    assert len(bad) == 1 and "failed_episodes" in bad[0]
    bad = failed(rc.checks(run_folder(tmp_path, report(), failed=(0,)), 2, 2))
    assert len(bad) == 1 and "holds 1 iterations (need 2)" in bad[0]


def test_env_workers_needed_on_alfworld_not_on_webshop(tmp_path):
    assert failed(rc.checks(run_folder(tmp_path, report(env_workers=()), env="webshop"), 2, 2)) == []
    bad = failed(rc.checks(run_folder(tmp_path, report(env_workers=()), env="alfworld"), 2, 2))
    assert len(bad) == 1 and bad[0].startswith("env workers: 0")


def test_env_name_from_the_command(tmp_path):
    """Catches: --env.name not recognised, or the first of two values used (the later option wins, as in
    argparse)."""
    for flags in ("--env.name webshop", "--env.name alfworld --env.name webshop"):
        (tmp_path / "command.sh").write_text(f"python -m gaca_openrlhf.cli.train_ppo {flags} --x 1")
        assert rc._env_name(str(tmp_path)) == "webshop"


def test_a_report_without_placement_or_a_missing_report_fails(tmp_path):
    bad = failed(rc.checks(run_folder(tmp_path, {"nodes": [], "placement_error": "RuntimeError('x')"}), 2, 2))
    assert any("no placement" in t and "RuntimeError" in t for t in bad)
    (tmp_path / "rehearsal.json").unlink()
    assert any("rehearsal.json missing" in t for t in failed(rc.checks(str(tmp_path), 2, 2)))


def test_a_validated_run_needs_val_lines_in_its_last_record(tmp_path):
    """With --eval.dataset in the command, the last record must carry the validation panel's figures (episodes, none
    failed); without it, nothing is asked. Catches: the check never made, or made on a run without a panel."""
    save = run_folder(tmp_path, report())
    assert failed(rc.checks(save, 2, 2)) == []
    (tmp_path / "command.sh").write_text("python -m gaca_openrlhf.cli.train_ppo --env.name alfworld "
                                         "--eval.dataset /x/val_tasks.jsonl")
    assert any("no val/* in its record" in t for t in failed(rc.checks(save, 2, 2)))
    rows = [{"rollout/failed_episodes": 0}, {"rollout/failed_episodes": 0, "val/success_rate": 0.0,
                                             "val/num_episodes": 1.0, "val/failed_episodes": 0.0}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert failed(rc.checks(save, 2, 2)) == []
    rows[-1]["val/failed_episodes"] = 1.0
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert any("validation after the last iteration" in t for t in failed(rc.checks(save, 2, 2)))
