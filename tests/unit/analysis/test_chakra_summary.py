"""A Chakra trace's ctrl_deps on absent nodes, dropped as Chakra's feeder does, reach the user:
counted per rank in meta.json's facts, one line of the summary; runs of other workloads and
runs recorded before the count have no line."""
from __future__ import annotations

import json
from pathlib import Path

from analysis import report, summary
from analysis.load import load_run
from runcontract.facts import ctrl_deps_line
from tests.unit.made_runs import made_run

# data/chakra/README.md: Chakra's protobuf reader finds 3 such ctrl_deps in this file
PYTORCH = "tests/unit/hostagent/data/chakra/pytorch.0.et"
FEEDER = "as Chakra's feeder ignores them"


def _run(base: Path, chakra: str | None) -> Path:
    workload = "size: 1KiB, iterations: 2, warmup: 0" + (f", chakra: {chakra}" if chakra else "")
    return made_run(base, "mrc", text=f"name: c\nworkload: {{{workload}}}\n")


def test_a_run_of_chakras_pytorch_trace_records_and_shows_its_count(tmp_path: Path):
    run = _run(tmp_path, f"{{path: {PYTORCH}, replicate: true}}")
    meta = json.loads((run / "meta.json").read_text())
    ranks = len(meta["facts"]["ctrl_deps_dropped"])
    assert ranks > 1 and meta["facts"]["ctrl_deps_dropped"] == [3] * ranks
    text = summary.text(report.views_of([load_run(run)]))
    assert (f"# chakra mrc: {3 * ranks} control dependencies on nodes absent from their trace "
            f"file dropped, {FEEDER} (3 in each of the {ranks} ranks)\n") in text


def test_other_workloads_and_older_runs_have_no_line(tmp_path: Path):
    plain = _run(tmp_path, None)
    assert json.loads((plain / "meta.json").read_text())["facts"]["ctrl_deps_dropped"] is None
    older = _run(tmp_path, f"{{path: {PYTORCH}, replicate: true}}")
    meta = json.loads((older / "meta.json").read_text())
    del meta["facts"]["ctrl_deps_dropped"]
    (older / "meta.json").write_text(json.dumps(meta))
    for run in (plain, older):
        assert "# chakra" not in summary.text(report.views_of([load_run(run)]))


def test_the_line_names_the_ranks_that_dropped_some():
    assert ctrl_deps_line([0, 0]) == (f"0 control dependencies on nodes absent from their "
                                      f"trace file dropped, {FEEDER}")
    one = ctrl_deps_line([1])
    assert one.startswith("1 control dependency on") and one.endswith(f"{FEEDER} (rank 0: 1)")
    assert ctrl_deps_line([2, 0, 1]).endswith(f"{FEEDER} (rank 0: 2, rank 2: 1)")
    many = ctrl_deps_line(list(range(1, 11)))
    assert many.startswith("55 control") and many.endswith("rank 7: 8, 2 more ranks)")
