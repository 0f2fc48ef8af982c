"""A run that chose its algorithm says so: in meta.json, the summary and the figures' titles;
one that did not stays as it was."""
from __future__ import annotations

from pathlib import Path

from analysis import report, summary
from analysis.load import load_run
from tests.unit.made_runs import TEXT, made_run


def _view(folder: Path) -> report.RunView:
    return report.views_of([load_run(folder)])[0]


def test_a_tree_run_names_its_algorithm(tmp_path: Path):
    text = TEXT.replace("warmup: 0}", "warmup: 0, algorithm: tree}")
    view = _view(made_run(tmp_path, text=text))
    assert view.run.facts.algorithm == "tree"
    assert "# algorithm mrc: tree\n" in summary.text([view])
    assert "all_reduce (tree) of 1,024 B" in report._title([view], "Goodput")


def test_a_run_without_a_choice_is_as_before(tmp_path: Path):
    view = _view(made_run(tmp_path))
    assert view.run.facts.algorithm is None
    assert "# algorithm" not in summary.text([view])
    assert "all_reduce of 1,024 B" in report._title([view], "Goodput")
