"""The headline is two tables, each narrow enough for a report's page: the classic HTML
template's output area at a 1400 px window holds the index and 12 columns of this table; more
went behind a horizontal scroll bar, and with them the loss counters at its end."""
from __future__ import annotations

from pathlib import Path

from analysis import report
from analysis.load import load_runs
from tests.unit.made_runs import made_run

FITS = 12  # columns besides the index


def test_the_counters_have_a_table_of_their_own_and_neither_is_too_wide(tmp_path: Path):
    runs = load_runs([made_run(tmp_path, "mrc"), made_run(tmp_path, "rocev2")])
    views = report.views_of(runs)
    first, counters = report.headline(views), report.headline_counters(views)
    assert len(first.columns) <= FITS and len(counters.columns) <= FITS
    assert {"retransmits", "timeouts", "nacks sent", "trims received"} <= set(counters.columns)
    assert not set(first.columns) & {"retransmits", "timeouts", "nacks sent", "trims received",
                                     "port drops"}
    assert list(first.index) == list(counters.index) == [r.name for r in runs]
    assert list(counters["retransmits"]) == [0, 0]


def test_both_notebooks_show_both_tables():
    for notebook in ("run_report.ipynb", "compare_report.ipynb"):
        text = (Path(report.__file__).parent / notebook).read_text()
        assert "report.headline(views)" in text and "report.headline_counters(views)" in text
