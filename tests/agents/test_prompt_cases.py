"""``python -m agents.prompt_cases --cases IN.json --out OUT.json`` in a subprocess, against verl-agent's vectors.

Reference: tests/data/reference/verl_agent_prompt_vectors.json (rendered with verl-agent's templates and rules).
The CLI gets the cases without their expected fields, so it cannot echo them back.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VECTORS = Path(os.environ.get("GACA_REFERENCE_DIR", ROOT / "tests" / "data" / "reference")) / \
    "verl_agent_prompt_vectors.json"


def _cli(*args, cwd=ROOT):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "agents.prompt_cases", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def _strip_expected(cases):
    return [{k: v for k, v in c.items() if not k.startswith("expected_")} for c in cases]


def test_cli_reproduces_every_reference_case(tmp_path):
    ref = json.loads(VECTORS.read_text(encoding="utf-8"))
    src = tmp_path / "in.json"
    src.write_text(json.dumps({"source": ref["source"], "cases": _strip_expected(ref["cases"])}), encoding="utf-8")
    out = tmp_path / "out.json"
    res = _cli("--cases", src, "--out", out)
    assert res.returncode == 0, res.stderr
    got = json.loads(out.read_text(encoding="utf-8"))
    assert got["source"] == ref["source"] and len(got["cases"]) == len(ref["cases"])
    for want, have in zip(ref["cases"], got["cases"]):
        assert have["name"] == want["name"]
        if "response" in want:
            assert (have["action"], have["valid"]) == (want["expected_action"], want["expected_valid"]), want["name"]
            assert "prompt" not in have
        else:
            assert have["prompt"] == want["expected_prompt"], want["name"]
            assert "action" not in have


def test_cli_takes_a_plain_list_and_projects_per_environment(tmp_path):
    response = "<think>ok</think> then I would click the Buy Now button"
    cases = [{"env": "alfworld", "response": response}, {"env": "webshop", "response": response}]
    src, out = tmp_path / "in.json", tmp_path / "out.json"
    src.write_text(json.dumps(cases))
    res = _cli("--cases", src, "--out", out)
    assert res.returncode == 0, res.stderr
    got = json.loads(out.read_text())
    assert isinstance(got, list)
    assert [(c["action"], c["valid"]) for c in got] == [(response.lower()[-30:], 0), (response.lower()[-20:], 0)]


def test_cli_rejects_bad_input_with_a_clear_error(tmp_path):
    src, out = tmp_path / "in.json", tmp_path / "out.json"
    src.write_text(json.dumps([{"env": "alfworld", "task": "t", "observation": "o"}]))  # no admissible actions
    res = _cli("--cases", src, "--out", out)
    assert res.returncode == 2 and "admissible_actions" in res.stderr and not out.exists()
    src.write_text(json.dumps([{"env": "nowhere", "response": "x"}]))
    res = _cli("--cases", src, "--out", out)
    assert res.returncode == 2 and "unknown environment" in res.stderr and not out.exists()
    src.write_text(json.dumps({"no": "cases"}))
    res = _cli("--cases", src, "--out", out)
    assert res.returncode == 2 and "cases" in res.stderr
