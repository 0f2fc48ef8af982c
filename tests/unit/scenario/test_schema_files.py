"""The committed JSON Schemas are the models' (`make schemas` regenerates them: the scenario's,
the drill's, a results folder's meta.json and its tables' columns), and every
shipped scenario and drill names its schema on line 1, so editors validate and complete it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from runcontract import meta, tables
from testbed import scenario
from testbed.scenario import drill

ROOT = Path(__file__).resolve().parents[3]
SCHEMAS = ROOT / "schemas"
SHIPPED = sorted([*(ROOT / "scenarios").rglob("*.yaml"), *(ROOT / "drills").glob("*.yaml")])
MODELINE = "# yaml-language-server: $schema="


@pytest.mark.parametrize(("file", "schema"), [("scenario.schema.json", scenario.json_schema),
                                               ("drill.schema.json", drill.json_schema),
                                               ("meta.schema.json", meta.json_schema),
                                               ("tables.json", tables.description)])
def test_committed_schema_is_current(file: str, schema):
    committed = json.loads((SCHEMAS / file).read_text())
    assert committed == schema(), f"schemas/{file} is stale: run `make schemas`"


def test_scenarios_and_drills_are_shipped():
    assert len(SHIPPED) > 20  # the rglob found the folders


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_shipped_file_names_its_schema(path: Path):
    first = path.read_text().splitlines()[0]
    assert first.startswith(MODELINE), f"{path.name}: line 1 is not the schema modeline"
    target = (path.parent / first.removeprefix(MODELINE)).resolve()
    kind = "drill" if path.parent.name == "drills" else "scenario"
    assert target == SCHEMAS / f"{kind}.schema.json"


@pytest.mark.parametrize(("flag", "file"), [("--meta", "meta.schema.json"),
                                            ("--tables", "tables.json")])
def test_the_schema_command_prints_the_committed_file(flag: str, file: str, capsys):
    """What `make schemas` writes comes from `mrc-testbed schema`."""
    from testbed import cli
    assert cli.main(["schema", flag]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads((SCHEMAS / file).read_text())
