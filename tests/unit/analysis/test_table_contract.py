"""The tables a report reads, checked against their schema as they are loaded: a folder of an
earlier version loads (columns added since may be absent), a table that does not fit is one
RunError naming the file, the column and the fix, not a KeyError inside a figure."""
from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from analysis.load import RunError, load_run

V1 = Path(__file__).parent / "runs_v1"


def _copy(tmp_path: Path, transport: str) -> Path:
    folder = tmp_path / f"quickstart-{transport}"
    shutil.copytree(V1 / folder.name, folder)
    return folder


def _edit(folder: Path, table: str, edit) -> None:
    path = folder / f"{table}.parquet"
    edit(pd.read_parquet(path)).to_parquet(path, index=False)


def test_a_version_1_folder_loads_without_the_columns_added_since():
    raw_qps = pd.read_parquet(V1 / "quickstart-rocev2" / "qps.parquet")
    raw_states = pd.read_parquet(V1 / "quickstart-rocev2" / "ev_states.parquet")
    assert "failed_at" not in raw_qps and raw_states.columns.empty  # as it was written
    run = load_run(V1 / "quickstart-rocev2")
    assert len(run.qps) == len(raw_qps) and run.ev_states.empty


@pytest.mark.parametrize(("transport", "table", "edit", "says"), [
    ("mrc", "messages", lambda f: f.drop(columns=["size"]),
     "messages.parquet: column 'size' is missing"),
    ("mrc", "paths", lambda f: f.drop(columns=["losses"]),
     "paths.parquet: column 'losses' is missing"),
    ("rocev2", "paths", lambda f: f.drop(columns=["sport"]),
     "paths.parquet: column 'sport' is missing"),
    ("rocev2", "paths", lambda f: f.assign(state=1),
     "paths.parquet: column 'state' holds int values (1) where the schema says str"),
    ("rocev2", "links", lambda f: f.assign(time=None),
     "links.parquet: column 'time' has {rows} null values"),
])
def test_a_table_that_does_not_fit_is_a_run_error_naming_file_and_column(
        tmp_path: Path, transport: str, table: str, edit, says: str):
    folder = _copy(tmp_path, transport)
    _edit(folder, table, edit)
    rows = len(pd.read_parquet(folder / f"{table}.parquet"))
    with pytest.raises(RunError) as info:
        load_run(folder)
    assert f"{folder}/{says.format(rows=rows)}" in str(info.value)
    assert "fix: a table written by another testbed version" in str(info.value)


def test_a_column_only_the_other_transport_writes_may_be_absent(tmp_path: Path):
    folder = _copy(tmp_path, "mrc")
    assert "sport" not in pd.read_parquet(folder / "paths.parquet")
    assert "spine" not in pd.read_parquet(folder / "qps.parquet")
    load_run(folder)


def test_a_column_the_schema_does_not_know_is_left_alone(tmp_path: Path):
    """A notebook may save a table with a column of its own: the report still reads it."""
    folder = _copy(tmp_path, "mrc")
    _edit(folder, "qps", lambda f: f.assign(mine=1))
    assert (load_run(folder).qps["mine"] == 1).all()
