"""`mrc-testbed list` says which runs have their report, and how to make a missing one."""
from __future__ import annotations

from pathlib import Path

import pytest

from testbed import cli
from tests.unit.made_runs import made_run


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def rows(out: str) -> dict[str, list[str]]:
    """The table's rows by run name, split into columns."""
    return {line.split()[0]: line.split() for line in out.splitlines()[1:]
            if line.startswith("2")}


def test_a_complete_run_without_its_report_says_how_to_make_it(tmp_path: Path, capsys):
    base = tmp_path / "results"
    reported, cut_short = made_run(base, "mrc"), made_run(base, "rocev2")
    (reported / "report").mkdir()
    (reported / "report" / "report.html").write_text("<html></html>")
    (cut_short / "report").mkdir()  # figures and the notebook, no HTML yet
    (cut_short / "report" / "report.ipynb").write_text("{}")
    assert cli.main(["list", "--results", str(base)]) == 0
    out = capsys.readouterr().out
    table = rows(out)
    # status, the run's duration (as long as making it took), its unit, the report
    for run, report in ((reported, "yes"), (cut_short, "missing")):
        status, duration, unit, has = table[run.name][1:]
        assert (status, unit, has) == ("complete", "s", report) and float(duration) >= 0
    assert out.rstrip().endswith(f"\n  mrc-testbed report {cut_short}")
    assert str(reported) not in out


def test_a_report_in_the_users_cache_counts(tmp_path: Path, capsys):
    run = made_run(tmp_path / "results")
    cached = tmp_path / "cache" / "mrc-testbed" / "reports" / run.name / "report"
    cached.mkdir(parents=True)
    (cached / "report.html").write_text("")
    assert cli.main(["list", "--results", str(tmp_path / "results")]) == 0
    out = capsys.readouterr().out
    assert rows(out)[run.name][-1] == "yes" and "mrc-testbed report" not in out


def test_a_run_with_nothing_to_report_is_not_asked_for_one(tmp_path: Path, capsys):
    verified = made_run(tmp_path / "results", workload=False)  # --verify-only
    assert cli.main(["list", "--results", str(tmp_path / "results")]) == 0
    out = capsys.readouterr().out
    assert rows(out)[verified.name][-1] == "-" and "mrc-testbed report" not in out
