"""Two jobs on one real fabric: each job's agents run on its own hosts and transport, start
when it says, and verify every byte; each job's folder is a run folder of its own, and each
job runs alone after (its control), the summary dividing the one by the other."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from .helpers import run_cli

TEXT = """name: two-jobs
fabric: {hosts_per_leaf: 2, host_link: {rate: 25Mbit}, fabric_link: {rate: 25Mbit}}
transport: [mrc]
jobs:
  - name: ring
    hosts: [h0, h2]
    workload: {size: 256KiB, iterations: 3, warmup: 0}
  - name: a2a
    placement: {rule: packed, count: 2}
    start: 0.3
    transport: rocev2
    workload: {collective: all_to_all, size: 256KiB, iterations: 3, warmup: 0}
"""


def test_two_jobs_share_a_fabric_and_each_runs_alone_after(tmp_path: Path, results_dir: Path):
    file = tmp_path / "scenario.yaml"
    file.write_text(TEXT)
    res = run_cli("run", str(file), "--no-report", results=results_dir, timeout=300)
    assert res.returncode == 0, res.stderr
    (run,) = sorted(results_dir.iterdir())
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "complete" and meta["facts"] is None
    jobs = {j["name"]: j for j in meta["jobs"]}
    assert jobs["ring"]["hosts"] == ["h0", "h2"] and jobs["a2a"]["hosts"] == ["h1", "h3"]
    assert (jobs["ring"]["transport"], jobs["a2a"]["transport"]) == ("mrc", "rocev2")
    for name, job in jobs.items():
        assert job["time_s"] > 0 and job["solo_time_s"] > 0, job
        assert job["solo_run"] == f"solo/{name}"
        for folder in (run / "jobs" / name, run / job["solo_run"]):
            mine = json.loads((folder / "meta.json").read_text())
            assert mine["status"] == "complete" and mine["transport"] == job["transport"]
            assert mine["job"]["name"] == name and mine["job"]["solo"] == ("solo" in str(folder))
            it = pd.read_parquet(folder / "iterations.parquet")
            assert sorted(set(it["host"])) == job["hosts"]
            for table in ("iterations", "messages", "qps", "paths"):
                assert set(pd.read_parquet(folder / f"{table}.parquet")["job"]) == {name}
            assert len(it) == 3 * 2 and it["verified"].all()
            if name == "a2a":  # it starts 0.3 s after the common start, alone too
                assert it["start"].min() - mine["workload_start"] >= 0.3
    ring = pd.read_parquet(run / "jobs" / "ring" / "iterations.parquet")
    a2a = pd.read_parquet(run / "jobs" / "a2a" / "iterations.parquet")
    assert set(ring["kind"]) == {"all_reduce"} and set(a2a["kind"]) == {"all_to_all"}
    summary = (run / "summary.txt").read_text()
    assert "## job ring: hosts as listed, h0 h2, mrc" in summary
    assert "## job a2a: packed (2 hosts), h1 h3, rocev2" in summary
    assert "# jobs together against each alone" in summary
    assert f"{jobs['ring']['time_s'] / jobs['ring']['solo_time_s']:.3f}x" in summary
