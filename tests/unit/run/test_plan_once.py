"""The fault timeline is checked on the plan a run makes, once, after `rate: auto` is chosen;
`validate` checks a `rate: auto` scenario's timeline without the rate, which it does not read."""
from __future__ import annotations

from pathlib import Path

import pytest

from testbed import cli
from testbed.fabric import plan as plan_mod
from testbed.run import runner

AUTO_WITH_FAULTS = """name: auto-down
fabric: {host_link: {rate: auto, buffer: 100KB}, fabric_link: {rate: auto, buffer: 100KB},
         mtu: 4200}
switch: {ecn: false, trim: false}
qp: {mss: 4096}
workload: {collective: all_reduce, size: 1MiB, iterations: 10, warmup: 0}
faults:
  - {at: 0.5, kind: link_down, target: {plane: 0, leaf: 1, spine: SPINE}, duration: 2.0}
"""

FIXED_WITH_FAULTS = AUTO_WITH_FAULTS.replace("rate: auto", "rate: 25Mbit").replace("SPINE", "0")


@pytest.fixture
def no_calibration(tmp_path: Path, monkeypatch) -> None:
    """No calibration cached: `validate` cannot preview the rate `run` would choose."""
    from testbed.emulation import calibration
    monkeypatch.setattr(calibration, "CACHE_DIR", tmp_path / "cache")


def test_validate_checks_the_timeline_of_an_auto_rate_scenario(tmp_path: Path, capsys,
                                                                no_calibration):
    f = tmp_path / "auto.yaml"
    f.write_text(AUTO_WITH_FAULTS.replace("SPINE", "0"))
    assert cli.main(["validate", str(f)]) == 0
    out = capsys.readouterr().out
    assert "faults: 1 checked against the fabric" in out
    assert "checked by `run` at the rate it chooses" in out
    f.write_text(AUTO_WITH_FAULTS.replace("SPINE", "7"))  # a spine the fabric does not have
    assert cli.main(["validate", str(f)]) == 2
    assert "faults.0: no link p0 leaf 1-spine 7 in this fabric" in capsys.readouterr().err


def test_a_run_plans_once(tmp_path: Path, monkeypatch):
    """From the command line to the build: one plan, the one the timeline is checked on."""
    made = []
    original = plan_mod.FabricPlan

    def counted(*args, **kwargs):
        made.append(args[0].name)
        return original(*args, **kwargs)
    monkeypatch.setattr(plan_mod, "FabricPlan", counted)  # every plan is made through it
    monkeypatch.setattr(cli, "_require_root", lambda args: None)
    monkeypatch.setattr(runner, "preflight", lambda progress, held: {"end_sids": "seg6local"})
    handed = []
    monkeypatch.setattr(runner, "_run_once", lambda *a, **k: handed.append(a[0]) or tmp_path)
    f = tmp_path / "down.yaml"
    f.write_text(FIXED_WITH_FAULTS)
    assert cli.main(["run", str(f), "--verify-only", "--results", str(tmp_path), "--quiet"]) == 0
    assert made == ["auto-down"]
    assert handed[0].scenario.faults  # the plan the run goes on with is the one checked


def test_a_run_checks_the_timeline_on_its_plan(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(cli, "_require_root", lambda args: None)
    monkeypatch.setattr(runner, "preflight", lambda progress, held: {"end_sids": "seg6local"})
    monkeypatch.setattr(runner, "_run_once", lambda *a, **k: pytest.fail("built"))
    f = tmp_path / "down.yaml"
    f.write_text(FIXED_WITH_FAULTS.replace("spine: 0", "spine: 7"))
    assert cli.main(["run", str(f), "--verify-only", "--results", str(tmp_path), "--quiet"]) == 2
