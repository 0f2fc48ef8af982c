"""Which protocol build a run's agents ran (meta.json `protocol`, from their result.json) is one
line of the summary and of the report's top, and agents that disagree are said there."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from analysis import report, summary
from analysis.load import load_run
from tests.unit.made_runs import run_meta

from .test_hostile_runs import _run
from .test_steps import row

SAME = {"build": "compiled: 0123456789ab", "agents": {"compiled: 0123456789ab": 2}}
MIXED = {"build": "mixed", "agents": {"compiled: 0123456789ab": 1, "sources: no build": 1}}


def _view(label: str, record: dict | None, folder: Path) -> SimpleNamespace:
    """A run as summary.text reads it (a training step's: the smallest whole run)."""
    steps = pd.DataFrame([row(0, "compute", 0, 1), row(1, "compute", 0, 2)]).assign(
        host=["h0", "h1"])
    folder.mkdir()
    (folder / "scenario.yaml").write_text("name: s\n")
    run = SimpleNamespace(steps=steps, tables={"steps": steps}, world=2,
                          meta=run_meta(protocol=record), dir=folder, transport="mrc",
                          messages=pd.DataFrame(), events=pd.DataFrame(),
                          facts=SimpleNamespace(scenario="s", ctrl_deps_dropped=None,
                                                algorithm=None),
                          scenario={"name": "s"})
    return SimpleNamespace(label=label, run=run, recoveries=pd.DataFrame())


def test_the_summary_says_each_runs_build_loud_when_agents_disagree(tmp_path: Path):
    text = summary.text([_view("mrc", SAME, tmp_path / "a"), _view("new", MIXED, tmp_path / "b"),
                         _view("old", None, tmp_path / "c")])
    assert "# protocol mrc: compiled: 0123456789ab (all 2 agents)\n" in text
    assert ("# protocol new: AGENTS DISAGREE: compiled: 0123456789ab on 1, sources: no build "
            "on 1\n") in text
    assert "# protocol old: not recorded\n" in text


def test_the_reports_top_names_the_build(tmp_path: Path):
    folder = _run(tmp_path)
    meta = json.loads((folder / "meta.json").read_text())
    (folder / "meta.json").write_text(json.dumps({**meta, "protocol": SAME}))
    html = report.intro_html([load_run(folder)], "Run report")
    assert "protocol compiled: 0123456789ab (all 2 agents)" in html
