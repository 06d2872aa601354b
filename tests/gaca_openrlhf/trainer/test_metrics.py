"""metrics.jsonl records: required keys always present, NaN as null, append across a resumed run."""
import json

from gaca_openrlhf.trainer.metrics import REQUIRED_KEYS, MetricsWriter, build_record


def test_record_has_required_keys_and_json_nulls(tmp_path):
    rec = build_record(3, {"policy_loss": 0.5, "adv/lambda_mean": float("nan"), "extra": 2, "text": "x"})
    assert rec["iteration"] == 3 and all(k in rec for k in REQUIRED_KEYS)
    assert rec["adv/lambda_mean"] is None and rec["extra"] == 2 and "text" not in rec
    w = MetricsWriter(str(tmp_path))
    w.write(rec)
    MetricsWriter(str(tmp_path)).write(build_record(4, {}))
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in lines] == [3, 4]


def test_start_keeps_only_this_runs_records(tmp_path):
    """A resumed run keeps the records up to its checkpoint; later ones (written after that checkpoint by the
    interrupted run) and a whole earlier run are moved aside, never mixed with the new records."""
    import json

    from gaca_openrlhf.trainer.metrics import MetricsWriter

    w = MetricsWriter(str(tmp_path))
    for i in (1, 2, 3):
        w.write({"iteration": i, "x": i})
    assert w.start(resumed_at=2) == ['{"iteration": 3, "x": 3}']
    w.write({"iteration": 3, "x": 30})
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [(r["iteration"], r["x"]) for r in rows] == [(1, 1), (2, 2), (3, 30)]
    dropped = list(tmp_path.glob("metrics.jsonl.dropped-*"))
    assert len(dropped) == 1 and json.loads(dropped[0].read_text())["x"] == 3  # nothing lost
    assert len(w.start(resumed_at=0)) == 3  # a fresh run in the same folder starts an empty file
    assert (tmp_path / "metrics.jsonl").read_text() == ""
    assert MetricsWriter(str(tmp_path / "new")).start(0) == []
