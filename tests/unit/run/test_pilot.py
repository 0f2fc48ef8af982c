"""rate auto's pilot: where a workload done within the window ends."""
from __future__ import annotations

import json
from pathlib import Path

from testbed.run.pilot import traffic_end


def test_a_finished_workload_ends_with_its_last_iteration(tmp_path: Path):
    for host, ends in (("h0", [10.0, 11.5]), ("h1", [10.2, 12.25])):
        (tmp_path / host).mkdir()
        (tmp_path / host / "iterations.json").write_text(json.dumps(
            [{"iteration": i, "start": e - 1, "end": e} for i, e in enumerate(ends)]))
    (tmp_path / "h2").mkdir()
    (tmp_path / "h2" / "iterations.json").write_text("[{\"end\": 99")  # cut short: not read
    (tmp_path / "h3").mkdir()
    (tmp_path / "h3" / "iterations.json").write_text(json.dumps([{"end": None}]))
    assert traffic_end(tmp_path) == 12.25


def test_no_iteration_ended(tmp_path: Path):
    assert traffic_end(tmp_path) is None
