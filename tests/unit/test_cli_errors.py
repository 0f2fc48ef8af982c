"""Exit statuses as documented: 2 for any bad input, with one
message and no traceback; 1 only for bugs."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed import cli, scenario
from testbed.errors import TestbedError as Problem
from testbed.run import runner
from tests.unit.made_runs import run_meta


def test_validate_checks_every_file_and_reports_each_bad_one(tmp_path: Path, capsys):
    good, bad1, bad2 = (tmp_path / n for n in ("good.yaml", "bad1.yaml", "bad2.yaml"))
    good.write_text("name: g\n")
    bad1.write_text("name: [\n")
    bad2.write_text("name: b\nfabric: {plnaes: 2}\n")
    assert cli.main(["validate", str(bad1), str(good), str(bad2)]) == 2
    out, err = capsys.readouterr()
    assert f"ok: {good}" in out
    assert f"{bad1}: line" in err and "plnaes" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("text", [
    "name: x\nseed: " + "9" * 5000, "name: x\n" + "a: " * 3000 + "1",
    "name: x\ndescription: " + "[" * 3000 + "]" * 3000, "name: x\n? [a]\n: 1",
    "name: x\nworkload: {size: '" + "9" * 400 + "KB'}",
])
def test_inputs_that_used_to_be_internal_errors_exit_2(tmp_path: Path, text: str, capsys):
    file = tmp_path / "x.yaml"
    file.write_text(text)
    assert cli.main(["validate", str(file)]) == 2
    assert "internal error" not in capsys.readouterr().err


def test_a_symlink_loop_exits_2(tmp_path: Path, capsys):
    (tmp_path / "a.yaml").symlink_to(tmp_path / "a.yaml")
    assert cli.main(["validate", str(tmp_path / "a.yaml")]) == 2
    assert "cannot read it" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["nan", "-1", "inf", "x"])
def test_hold_must_be_finite_seconds(value: str, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["run", "--hold", value])
    assert info.value.code == 2
    assert "--hold" in capsys.readouterr().err


def test_list_survives_a_meta_json_that_is_not_a_record(tmp_path: Path, capsys):
    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / "meta.json").write_text("[]")
    (tmp_path / "r2").mkdir()
    (tmp_path / "r2" / "meta.json").write_text(json.dumps(
        {"run_id": ["x"], "status": "complete", "duration_s": "long"}))
    (tmp_path / "r3").mkdir()
    (tmp_path / "r3" / "meta.json").write_text(json.dumps({"schema_version": 99}))
    assert cli.main(["list", "--results", str(tmp_path)]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert "unreadable" in lines["r1"] and "holds a list" in lines["r1"]
    assert "unreadable" in lines["r2"] and "field run_id" in lines["r2"]
    assert "unreadable" in lines["r3"] and "schema version 99, newer" in lines["r3"]


def test_report_out_pointing_at_a_file_exits_2(tmp_path: Path, capsys):
    (tmp_path / "f").write_text("")
    assert cli.main(["report", str(tmp_path / "nothing")]) == 2
    assert cli.main(["compare", str(tmp_path), str(tmp_path), "--out", str(tmp_path / "f")]) == 2
    assert "internal error" not in capsys.readouterr().err


class _Results:
    """Stands in for RunResults where the disk is full: finish() fails."""

    def __init__(self) -> None:
        self.meta = run_meta(status="running")

    def finish(self, *_args) -> None:
        raise OSError(28, "No space left on device")


def test_a_failure_while_ending_never_hides_the_runs_own_error(capsys):
    from testbed.lifecycle.progress import Progress
    original = Problem("3 of 4 agents failed")
    runner._end(None, None, None, Progress(quiet=True), _Results(), "failed", str(original),
                "traffic", original)  # does not raise: the caller re-raises the original
    assert "No space left on device" in capsys.readouterr().err
    with pytest.raises(OSError):  # with no error before, the failure is the error
        runner._end(None, None, None, Progress(quiet=True), _Results(), "complete", None,
                    None, None)


def test_validate_with_rate_auto_needs_no_root_and_says_what_run_will_do(tmp_path: Path, capsys,
                                                                          monkeypatch):
    from testbed.emulation import calibration
    monkeypatch.setattr(calibration, "CACHE_DIR", tmp_path / "cache")
    f = tmp_path / "auto.yaml"
    f.write_text("name: auto\nfabric: {host_link: {rate: auto}, fabric_link: {rate: auto}, "
                 "mtu: 4200}\nqp: {mss: 4096}\n")
    assert cli.main(["validate", str(f)]) == 0
    out = capsys.readouterr().out
    assert "host links auto" in out and "`run` will first measure" in out
    # 100 us + 5 us per link; quickstart's shape: 4 ranks x 2 planes, 3 links a packet:
    # R = 0.8 x cores x 33,584 / (8 x 115e-6)
    calibration.save(calibration.from_measurement(1.0, 0.15, 10_000, 5.0, 3.0))
    assert cli.main(["validate", str(f)]) == 0
    out = capsys.readouterr().out
    cores = calibration.cached()[0].cores
    want = 0.8 * cores * 33_584 / (8 * 115e-6)
    rung = max(r for r in (200e3, 500e3, 1e6, 2e6, 5e6, 10e6, 25e6, 50e6, 100e6, 200e6)
               if r <= want)
    assert f"model: {rung / 1e6:.3g} Mbit/s" in out, out
    assert "pilot: not yet run for this scenario's shape" in out, out
    # a pilot of this shape cached: its rung, not the model's, is what run will use
    from testbed.emulation import pilot_readings as pilot
    sc = scenario.parse(f.read_text(), "t")
    pilot.save(pilot.PilotResult(rate=200_000, fits=True, share=0.75, shape=pilot.shape(sc),
                                 readings=[pilot.Reading(200_000, "mrc", 0.3, 4.0)]))
    assert cli.main(["validate", str(f)]) == 0
    out = capsys.readouterr().out
    assert "pilot 200 kbit/s: mrc 30% of the cores busy" in out, out
    assert "rate auto: 200 kbit/s (the highest rung measured within 75%)" in out, out


def test_validate_with_rate_auto_needs_no_mininet(tmp_path: Path):
    """validate reads the cached calibration and pilot without importing Mininet (a laptop, or
    `make dev` without system packages): the cache lookups live apart from the measuring."""
    import os
    import subprocess
    import sys

    from testbed.emulation import calibration
    cache = tmp_path / "cache"
    cache.mkdir()
    found = calibration.from_measurement(1.0, 0.15, 10_000, 5.0, 3.0)
    (cache / calibration.cache_path().name).write_text(json.dumps(found.__dict__))
    f = tmp_path / "auto.yaml"
    f.write_text("name: auto\nfabric: {host_link: {rate: auto}, fabric_link: {rate: auto}, "
                 "mtu: 4200}\nqp: {mss: 4096}\n")
    code = ("import sys; sys.modules['mininet'] = None\n"
            "from testbed import cli\n"
            f"sys.exit(cli.main(['validate', {str(f)!r}]))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=os.environ | {"MRC_TESTBED_CACHE": str(cache)}, timeout=60,
                         cwd=Path(__file__).resolve().parents[2])
    assert res.returncode == 0, res.stdout + res.stderr
    assert "pilot: not yet run" in res.stdout, res.stdout
