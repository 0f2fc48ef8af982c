"""The smoke drill on a real fabric, through the CLI as a user runs it: progress, the verdict
table, drills.json and junit.xml, the fidelity objective decided by the runs' own verdicts
(meta.json `fidelity`), and the exit status that follows; then the same runs judged again as
faithful, to see pass and fail decided on real data."""
from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from analysis import drill_report

from .helpers import CLI, ROOT


def test_smoke_drill_judges_a_real_run(tmp_path: Path):
    res = subprocess.run([*CLI, "drill", str(ROOT / "drills" / "smoke.yaml"), "--results",
                          str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert ("drill 1/1 smoke: mrc control 1/1 (no faults, no background), seed 1  [run 1/2"
            in res.stderr)
    assert "repetition 1/1, seed 1  [run 2/2" in res.stderr and "left]" in res.stderr
    (base,) = tmp_path.glob("*-drills")
    assert (base / "drills.txt").read_text() in res.stdout
    (judged,) = json.loads((base / "drills.json").read_text())
    statuses = {v["objective"]: v["status"] for v in judged["verdicts"]}
    assert statuses["every collective verified"] == "pass"
    runs = [next((base / "smoke" / "mrc" / name).iterdir()) for name in ("rep1", "control1")]
    faithful = all(json.loads((r / "meta.json").read_text())["fidelity"]["verdict"] == "faithful"
                   for r in runs)
    # a run the monitor did not call faithful makes the objective inconclusive, never a pass
    assert statuses["run judged faithful"] == ("pass" if faithful else "inconclusive")
    expected = {"pass": 0, "fail": 5, "inconclusive": 6}[judged["status"]]
    assert res.returncode == expected, res.stdout + res.stderr
    assert f"smoke / mrc: {judged['status'].upper()}" in res.stdout
    suite = ET.parse(base / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("name") == "smoke"
    inconclusive = sum(v == "inconclusive" for v in statuses.values())
    assert suite.get("skipped") == str(inconclusive), "inconclusive objectives show as skipped"

    rep = next((base / "smoke" / "mrc" / "rep1").iterdir())
    control = next((base / "smoke" / "mrc" / "control1").iterdir())
    assert json.loads((rep / "meta.json").read_text())["seed"] == 1
    assert not json.loads((control / "meta.json").read_text()).get("faults", {}).get("actions")
    for run in (rep, control):  # what the fidelity monitor writes when it judges a run
        meta = json.loads((run / "meta.json").read_text())
        meta["fidelity"] = {"verdict": "faithful", "reasons": []}
        (run / "meta.json").write_text(json.dumps(meta))
    lenient = {"verified": True, "no_failed_qp": True, "goodput_ratio": 0.3,
               "max_stall_ms": 2000, "faithful": True}
    ok = drill_report.judge("smoke", "mrc", [rep], [control], lenient, paired=True)
    assert ok.status == "pass", drill_report.table([ok])
    window = next(v for v in ok.verdicts if v.objective == "goodput in the fault window")
    assert 0.3 < window.value < 1.2, window  # a share of the control's goodput
    impossible = {**lenient, "goodput_ratio": 1.5}  # more than the fabric carries without it
    bad = drill_report.judge("smoke", "mrc", [rep], [control], impossible, paired=True)
    assert bad.status == "fail" and drill_report.exit_status([ok, bad]) == 5
