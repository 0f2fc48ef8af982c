"""A trace of Chakra's PyTorch converter as a scenario's workload, on a real fabric: its
ctrl_deps on nodes absent from the file are dropped as Chakra's feeder drops them, the count
reaches the run's log, meta.json and summary, and every rank replays the trace's nodes."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from analysis import report, summary
from analysis.load import load_run
from hostagent.workloads.chakra import decode, read_file
from testbed import scenario as scenario_mod

from .helpers import ROOT, run_cli

TRACE = "tests/unit/hostagent/data/chakra/pytorch.0.et"  # its README: 3 such ctrl_deps
TEXT = f"""name: chakra-pytorch
fabric: {{host_link: {{rate: 25Mbit}}, fabric_link: {{rate: 25Mbit}}}}
transport: [mrc]
workload:
  iterations: 2
  warmup: 0
  chakra: {{path: {TRACE}, replicate: true, cpu_ops: compute}}
"""
HOSTS = len(scenario_mod.parse(TEXT, "t").rank_hosts())  # the default fabric's


def test_chakras_pytorch_trace_runs_with_its_absent_ctrl_deps_dropped(tmp_path: Path,
                                                                       results_dir: Path):
    """The trace is one rank's (the converter's rank 0 of 8): `replicate` runs it on every
    host, so any fabric fits it."""
    file = tmp_path / "scenario.yaml"
    file.write_text(TEXT)
    res = run_cli("run", str(file), "--no-report", results=results_dir, timeout=300)
    assert res.returncode == 0, res.stderr
    line = (f"chakra trace {TRACE}: {3 * HOSTS} control dependencies on nodes absent from "
            f"their trace file dropped, as Chakra's feeder ignores them (3 in each of the "
            f"{HOSTS} ranks)")
    assert res.stderr.count(f"  {line}\n") == 1, res.stderr  # the run's progress log
    (run,) = sorted(results_dir.iterdir())
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "complete" and meta["facts"]["ctrl_deps_dropped"] == [3] * HOSTS
    steps = pd.read_parquet(run / "steps.parquet")
    _, nodes = decode(read_file(ROOT / TRACE), TRACE)
    assert sorted(set(steps["node"])) == sorted(n.id for n in nodes)  # 216, 217, 430
    assert len(steps[~steps["warmup"]]) == HOSTS * len(nodes) * 2
    text = summary.text(report.views_of([load_run(run)]))
    assert f"# chakra mrc: {line.split(': ', 1)[1]}\n" in text
