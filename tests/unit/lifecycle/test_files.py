"""Results files are written whole and never through a planted symlink."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from runcontract.meta import SCHEMA_VERSION, read_meta
from testbed import scenario
from testbed.errors import EnvironmentProblem
from testbed.lifecycle.files import mark_ended_elsewhere, write_json, write_text
from testbed.run import results
from testbed.run.results import RunResults


def test_a_write_replaces_a_planted_symlink_instead_of_writing_through_it(tmp_path: Path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "meta.json").symlink_to(victim)
    write_json(tmp_path / "meta.json", {"a": 1})
    assert victim.read_text() == "precious"
    assert not (tmp_path / "meta.json").is_symlink()
    assert json.loads((tmp_path / "meta.json").read_text()) == {"a": 1}


def test_a_planted_temporary_name_is_not_followed(tmp_path: Path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "meta.tmp").symlink_to(victim)  # the fixed name the old writer used
    write_json(tmp_path / "meta.json", {"a": 1})
    assert victim.read_text() == "precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["meta.json", "meta.tmp", "victim"]


def test_files_are_readable_by_every_user(tmp_path: Path):
    write_text(tmp_path / "summary.txt", "x")
    assert (tmp_path / "summary.txt").stat().st_mode & 0o777 == 0o644


def test_a_results_folder_is_never_reused(tmp_path: Path):
    stem = "20260101T000000Z-x"
    (tmp_path / stem).mkdir()
    victim = tmp_path / "victim"
    victim.mkdir()
    (tmp_path / f"{stem}-1").symlink_to(victim)
    assert results._new_folder(tmp_path, stem) == f"{stem}-2"
    for n in range(3, 1000):
        (tmp_path / f"{stem}-{n}").mkdir()
    (tmp_path / f"{stem}-2").rmdir()
    (tmp_path / f"{stem}-2").mkdir()
    with pytest.raises(EnvironmentProblem, match="1,000 folders"):
        results._new_folder(tmp_path, stem)
    assert list(victim.iterdir()) == []


def test_run_results_records_the_scenario_digest(tmp_path: Path):
    sc = scenario.parse("name: x", "x")
    r = RunResults(tmp_path, sc, "name: x\n", 1, "mrc")
    meta = json.loads((r.dir / "meta.json").read_text())
    # sha256 of the 8 bytes "name: x\n", computed by coreutils' sha256sum
    assert (meta["scenario_sha256"] ==
            "a2a79ea37edb1963efaae29281523ab441a8a99df048d204f22f3f413e325afc")


def test_unwritable_results_are_one_clear_error(tmp_path: Path):
    sc = scenario.parse("name: x", "x")
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(EnvironmentProblem, match="cannot write the results"):
        RunResults(blocker / "sub", sc, "name: x\n", 1, "mrc")


def test_mark_ended_elsewhere_ignores_what_is_not_a_record(tmp_path: Path):
    (tmp_path / "meta.json").write_text("[]")
    mark_ended_elsewhere(tmp_path, "crashed")  # no AttributeError
    assert (tmp_path / "meta.json").read_text() == "[]"


def _running(tmp_path: Path) -> Path:
    """A results folder as a runner leaves it when it dies: meta.json says `running`."""
    return RunResults(tmp_path, scenario.parse("name: x", "x"), "name: x\n", 1, "mrc").dir


def test_a_run_ended_elsewhere_is_recorded_through_its_model(tmp_path: Path):
    run = _running(tmp_path)
    before = json.loads((run / "meta.json").read_text())
    mark_ended_elsewhere(run, "its runner died")
    after = json.loads((run / "meta.json").read_text())
    assert {k for k in after if after[k] != before[k]} == {"status", "error", "ended"}
    meta = read_meta(run)  # the record every reader reads, written as the runner writes it
    assert (meta.status, meta.error) == ("crashed", "its runner died")
    assert after["ended"] == meta.to_json()["ended"]


def test_a_record_of_an_older_version_is_rewritten_in_the_current_one(tmp_path: Path):
    run = _running(tmp_path)
    old = json.loads((run / "meta.json").read_text())
    for key in ("schema_version", "gave_up", "similarity"):  # version 1 had none of them
        del old[key]
    (run / "meta.json").write_text(json.dumps(old))
    mark_ended_elsewhere(run, "its runner died")
    assert json.loads((run / "meta.json").read_text())["schema_version"] == SCHEMA_VERSION


def test_a_record_newer_than_this_testbed_is_left_as_it_is(tmp_path: Path):
    run = _running(tmp_path)
    newer = {**json.loads((run / "meta.json").read_text()), "schema_version": SCHEMA_VERSION + 1,
             "a_later_key": 1}
    (run / "meta.json").write_text(json.dumps(newer))
    mark_ended_elsewhere(run, "its runner died")
    assert json.loads((run / "meta.json").read_text()) == newer
