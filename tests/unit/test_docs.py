"""The documentation against the code it describes: the architecture page's code map has a
sentence for every module, and a file a tutorial quotes is quoted as it is."""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _docs_module(name: str) -> ModuleType:
    """A helper of docs/ (no package), as docs/gen_pages.py loads it."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


code_map = _docs_module("code_map")


def test_every_module_says_what_it_is_for() -> None:
    """The code map is made of the modules' docstrings: one without leaves the map short."""
    assert code_map.missing() == [], (
        "give these a docstring whose first sentence says what the module is for (the "
        "architecture page's code map is made of them)")


def test_the_code_map_lists_every_module() -> None:
    listed = {f"{e.package}/{e.name}" for e in code_map.entries()}
    for top in code_map.PACKAGES:
        for path in (ROOT / top).rglob("*.py"):
            assert str(path.relative_to(ROOT)) in listed
    page = code_map.markdown()
    assert "| `network_api.py` | What the runner" in page
    assert "### `testbed/cluster/`" in page and "| `ops.py` |" in page


def test_the_architecture_page_keeps_its_code_map_marker() -> None:
    assert code_map.CODE_MAP in (ROOT / "docs/design/architecture.md").read_text()


def test_the_drill_tutorial_quotes_the_smoke_drill_as_shipped() -> None:
    """The tutorial's copy of drills/smoke.yaml is the file without its comment lines (the
    schema line kept)."""
    page = (ROOT / "docs/tutorials/writing-a-drill.md").read_text()
    quoted = re.search(r"```yaml\n(# yaml-language-server.*?)```", page, re.S)
    assert quoted, "the tutorial lost its copy of drills/smoke.yaml"
    shipped = (ROOT / "drills/smoke.yaml").read_text().splitlines(keepends=True)
    kept = "".join(line for i, line in enumerate(shipped)
                   if i == 0 or not line.lstrip().startswith("#"))
    assert quoted.group(1) == kept


def test_the_results_page_lists_every_column_of_every_table() -> None:
    """The site writes each table's columns where the results page has the marker: every
    column of the schema, under its table, with its kind."""
    from runcontract import TABLES, tables
    assert tables.MARKER in (ROOT / "docs/manual/results.md").read_text()
    page = tables.markdown()
    for table in TABLES.values():
        section = page.split(f"### `{table.file}`\n", 1)[1].split("### ", 1)[0]
        rows = [line for line in section.splitlines() if line.startswith("| `")]
        assert [r.split("|")[1].strip(" `") for r in rows] == list(table.names()), table.name
        assert all(r.split("|")[2].strip().startswith(c.kind)
                   for r, c in zip(rows, table.columns, strict=True))
