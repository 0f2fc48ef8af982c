"""The documentation against the code it describes: a file a tutorial quotes is quoted as it
is."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


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
