"""The headline is two tables, each narrow enough for a report's page: the classic HTML
template's output area at a 1400 px window holds the index and 12 columns of this table; more
went behind a horizontal scroll bar, and with them the loss counters at its end."""
from __future__ import annotations

from pathlib import Path

from analysis import report, summary
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


def test_the_summary_under_the_headline_fits_the_page_unwrapped(tmp_path: Path):
    """Each line of the terminal table (the header's is the widest) at the report's monospace
    size (0.6 em a character) fits the output area, 840 px at a 1400 px window."""
    runs = load_runs([made_run(tmp_path, "mrc"), made_run(tmp_path, "rocev2")])
    lines = summary.table(report.views_of(runs)).splitlines()
    columns = [line for line in lines if line.startswith("# transport")]
    html = report.pre_html("\n".join(lines))
    size = (float(html.split("font-size: ", 1)[1].split("px", 1)[0]) if "font-size" in html
            else 14.0)  # the classic template's output text
    assert columns and max(len(line) for line in columns) * 0.6 * size <= 840
