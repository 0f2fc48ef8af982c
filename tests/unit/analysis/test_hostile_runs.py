"""Run folders as data, not as trusted input: a report
escapes what a run says, and a damaged folder is one clear `RunError` (exit 2)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from analysis import render, report
from analysis.load import RunError, load_run, load_runs
from tests.unit.made_runs import made_run

EVIL = "<script>alert(1)</script>"


def _run(base: Path, description: str = "plain") -> Path:
    """A run that failed with an error quoting `EVIL`, of a scenario with `description`."""
    return made_run(base, status="failed", error=f"agent said {EVIL}",
                    text=f"name: c\ndescription: {json.dumps(description)}\n"
                    f"workload: {{size: 1KiB, iterations: 2, warmup: 0}}\n")


def test_the_report_escapes_description_error_and_scenario_text(tmp_path: Path):
    run = load_run(_run(tmp_path, f"look {EVIL}"))
    html = report.intro_html([run], "Run report") + report.scenario_html(run)
    assert "<script>" not in html
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 3  # description, error, yaml
    assert "<pre " in report.pre_html("a <b> table") and "&lt;b&gt;" in report.pre_html("<b>")


def test_meta_json_that_is_not_a_record_is_a_run_error(tmp_path: Path):
    folder = _run(tmp_path)
    (folder / "meta.json").write_text("[]")
    with pytest.raises(RunError, match="holds a list"):
        load_run(folder)


def test_a_truncated_table_is_a_run_error(tmp_path: Path):
    folder = _run(tmp_path)
    data = (folder / "iterations.parquet").read_bytes()
    (folder / "iterations.parquet").write_bytes(data[: len(data) // 2])
    with pytest.raises(RunError, match="iterations.parquet: not a readable table"):
        load_run(folder)


def test_a_loaded_run_carries_the_scenario_it_ran(tmp_path: Path):
    """What no table records (a straggler's schedule) is read from the folder's copy."""
    run = load_run(_run(tmp_path))
    assert run.scenario["name"] == "c" and run.scenario["workload"]["iterations"] == 2


def test_a_scenario_file_that_is_not_the_one_run_is_noticed(tmp_path: Path):
    folder = _run(tmp_path)
    load_run(folder)
    with open(folder / "scenario.yaml", "a") as fh:
        fh.write("# edited after the run\n")
    with pytest.raises(RunError, match="not the file this run ran"):
        load_run(folder)


def test_the_same_run_twice_is_not_a_comparison(tmp_path: Path):
    folder = _run(tmp_path)
    (tmp_path / "alias").symlink_to(folder)
    with pytest.raises(RunError, match="the same run as"):
        load_runs([folder, tmp_path / "alias"])


def test_a_report_is_never_written_through_a_symlink_or_into_a_file(tmp_path: Path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (tmp_path / "report").symlink_to(victim)
    with pytest.raises(render.RenderError, match="symbolic link"):
        render._prepare(tmp_path / "report")
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.html").symlink_to(victim / "x")
    with pytest.raises(render.RenderError, match="holds symbolic links"):
        render._prepare(out)
    (tmp_path / "file").write_text("")
    with pytest.raises(render.RenderError, match="not a folder"):
        render._prepare(tmp_path / "file")
    assert list(victim.iterdir()) == []


def test_a_run_folder_this_user_cannot_write_gets_its_report_in_the_users_cache(
        tmp_path: Path, monkeypatch):
    folder = _run(tmp_path / "results")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    real_access = os.access
    monkeypatch.setattr(render.os, "access", lambda p, mode: False if Path(p) in (
        folder, folder / "report", folder.parent) else real_access(p, mode))
    assert (render._writable_beside(folder, "report") ==
            tmp_path / "cache" / "mrc-testbed" / "reports" / folder.name / "report")
    runs = load_runs([folder])
    assert (render.default_compare_dir(runs).parent ==
            tmp_path / "cache" / "mrc-testbed" / "reports")
