"""meta.json as a versioned contract: a folder written before the version key existed still
renders; a newer version, or a record of the wrong shape, is refused naming what is wrong."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from analysis.load import RunError, load_run
from analysis.render import render_compare
from runcontract import SCHEMA_VERSION, STATUSES, MetaError, parse_meta, read_meta
from runcontract.meta import RunMeta
from tests.unit.made_runs import made_run

# two runs of scenarios/quickstart.yaml each, as the testbed wrote them at versions 1, 2 and 3
V1 = Path(__file__).parent / "runs_v1"
V2 = Path(__file__).parent / "runs_v2"
V3 = Path(__file__).parent / "runs_v3"  # written at 89aa1f2


@pytest.mark.parametrize("folders", [V1, V2, V3], ids=["v1", "v2", "v3"])
def test_older_folders_render_a_comparison(folders: Path, tmp_path: Path):
    rendered = render_compare([folders / "quickstart-mrc", folders / "quickstart-rocev2"],
                              tmp_path)
    html = rendered.html.read_text()
    assert "MRC, lossy, SACK, NSCC, trimming" in html and "RoCEv2, lossy, Go-Back-N" in html
    assert all(r.meta.schema_version == SCHEMA_VERSION for r in rendered.runs)


def test_a_version_2_record_reads_without_similarity():
    raw = json.loads((V2 / "quickstart-mrc" / "meta.json").read_text())
    assert raw["schema_version"] == 2 and "similarity" not in raw
    meta = read_meta(V2 / "quickstart-mrc")
    assert (meta.schema_version, meta.similarity, meta.verdict) == (SCHEMA_VERSION, None,
                                                                   "faithful")


def test_a_version_3_record_reads_as_the_default_algorithm():
    raw = json.loads((V3 / "quickstart-rocev2" / "meta.json").read_text())
    assert raw["schema_version"] == 3 and "algorithm" not in raw["facts"]
    meta = read_meta(V3 / "quickstart-rocev2")
    assert meta.schema_version == SCHEMA_VERSION and meta.facts is not None
    assert (meta.facts.algorithm, meta.facts.algorithm_modelled) == (None, None)
    assert meta.similarity is not None  # what version 3 added is kept


def test_a_version_1_record_reads_as_the_current_one():
    raw = json.loads((V1 / "quickstart-rocev2" / "meta.json").read_text())
    assert "schema_version" not in raw  # what makes it version 1
    meta = read_meta(V1 / "quickstart-rocev2")
    assert (meta.schema_version, meta.status, meta.verdict) == (SCHEMA_VERSION, "complete",
                                                                "faithful")
    assert meta.dcqcn == raw["dcqcn"] and meta.gave_up == []
    assert meta.facts is not None and meta.facts.ideal_busbw == raw["facts"]["ideal_busbw"]


def _copy_with(tmp_path: Path, **fields: object) -> Path:
    folder = tmp_path / "run"
    shutil.copytree(V1 / "quickstart-mrc", folder)
    raw = json.loads((folder / "meta.json").read_text())
    (folder / "meta.json").write_text(json.dumps(raw | fields))
    return folder


def test_a_newer_version_is_refused_by_name(tmp_path: Path):
    folder = _copy_with(tmp_path, schema_version=SCHEMA_VERSION + 1)
    with pytest.raises(RunError) as info:
        load_run(folder)
    assert f"schema version {SCHEMA_VERSION + 1}, newer than this testbed" in str(info.value)
    assert "upgrade mrc-testbed" in str(info.value)


@pytest.mark.parametrize(("fields", "named"), [
    ({"status": "finished"}, "field status"),
    ({"fidelity": {"verdict": "fine", "reasons": []}}, "field fidelity.verdict"),
    ({"gave_up": [{"host": "h1"}]}, "field gave_up.0"),
    ({"schema_version": "2"}, "schema_version '2' is not a version number"),
])
def test_a_record_of_the_wrong_shape_is_refused_naming_the_field(tmp_path: Path, fields,
                                                                  named: str):
    with pytest.raises(MetaError) as info:
        read_meta(_copy_with(tmp_path, **fields))
    assert named in str(info.value) and "fix:" in str(info.value)


def test_not_a_record():
    with pytest.raises(MetaError, match="holds a list"):
        parse_meta([], "meta.json")


def test_what_a_run_writes_is_the_current_version_and_reads_back_whole(tmp_path: Path):
    folder = made_run(tmp_path, "rocev2", status="failed", error="boom")
    raw = json.loads((folder / "meta.json").read_text())
    assert raw["schema_version"] == SCHEMA_VERSION
    meta = read_meta(folder)
    assert meta.to_json() == raw
    assert (meta.status, meta.error, meta.transport) == ("failed", "boom", "rocev2")
    assert meta.similarity is not None and meta.similarity.frame == "emulated"


def test_the_statuses_are_the_records():
    assert set(STATUSES) == set(RunMeta.model_json_schema()["properties"]["status"]["enum"])
    assert {"complete", "gave_up", "crashed"} <= set(STATUSES)
