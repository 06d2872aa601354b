"""The comparison report includes a run's credit audit (``DIR/audit/audit.md``, docs/credit_audit.md section 5)."""
import json


def test_report_includes_the_credit_audit(tmp_path):
    # guards: the audit section written by the offline command left out of the report
    from gaca_openrlhf.diagnostics.audit_rollouts import markdown
    from gaca_openrlhf.diagnostics.credit_audit import audit_advantages
    from gaca_openrlhf.report.build import build_report
    from gaca_openrlhf.report.data import load_run

    run = tmp_path / "gaca"
    (run / "audit").mkdir(parents=True)
    (run / "metrics.jsonl").write_text(json.dumps({"iteration": 1, "rollout/success_rate": 0.5}) + "\n")
    result = audit_advantages({"grpo": [1.0, -1.0, 1.0, 1.0]}, [1, -1, 1, -1], [True, False, True, False],
                              [0, 0, 1, 1], [False] * 4, n_boot=50)
    (run / "audit" / "audit.md").write_text(markdown(result, "Credit audit: ckpt on toy"))
    build_report([load_run("gaca", str(run))], str(tmp_path / "report"))
    md = (tmp_path / "report" / "report.md").read_text()
    assert "### gaca: credit audit: ckpt on toy" in md and "| grpo | 0.750 [" in md
