"""Every run names the baseline it ran (Scenario.variant): in meta.json, the run's summary, the
terminal table and the report; a run recorded before the variant was falls back to its
transport."""
from __future__ import annotations

import json
from pathlib import Path

from analysis import report, summary
from analysis.load import load_run
from testbed import scenario
from testbed.run.collect import collect
from testbed.run.results import RunResults
from testbed.run.traffic import AgentOutcome


def _run(base: Path, switch: str, transport: str) -> Path:
    """A results folder as a run writes it (RunResults, collect), from agents' iteration files."""
    text = f"name: v\nswitch: {switch}\nworkload: {{size: 1KiB, iterations: 2, warmup: 0}}\n"
    sc = scenario.parse(text, "t")
    r = RunResults(base, sc, text, 1, transport)
    out = r.dir / "agents"
    for rank, host in enumerate(sc.rank_hosts()):
        (out / host).mkdir(parents=True)
        (out / host / "iterations.json").write_text(json.dumps([
            {"rank": rank, "kind": "all_reduce", "iteration": k, "warmup": False,
             "start": 10.0 + k, "end": 10.5 + k, "bytes": 1024, "verified": True,
             "error": None} for k in range(2)]))
        (out / host / "messages.json").write_text(json.dumps([
            {"iteration": k, "warmup": False, "peer": (rank + 1) % 4, "size": 256,
             "start": 10.0 + k, "end": 10.4 + k, "retransmits": 0, "trims": 0,
             "evs_used": [0]} for k in range(2)]))
        (out / host / "paths.json").write_text(json.dumps({"qps": [
            {"qpn": 1, "peer": (rank + 1) % 4, "data_sent": 2, "retransmits": 0}]}))
    table, _ = collect(out, r.dir, [AgentOutcome(h, i, 0, {})
                                    for i, h in enumerate(sc.rank_hosts())], sc, transport)
    r.write_text("summary.txt", table)
    r.finish("complete", None, {})
    return r.dir


def test_each_place_a_run_is_shown_names_its_variant(tmp_path: Path):
    lossless = _run(tmp_path, "{lossless: true}", "rocev2")
    lossy = _run(tmp_path, "{}", "mrc")
    meta = json.loads((lossless / "meta.json").read_text())
    assert meta["variant"] == meta["facts"]["variant"] == "RoCEv2, lossless, Go-Back-N, DCQCN"
    assert ("over rocev2 (RoCEv2, lossless, Go-Back-N, DCQCN)" in
            (lossless / "summary.txt").read_text())
    runs = [load_run(lossless), load_run(lossy)]
    views = report.views_of(runs)
    text = summary.table(views)
    assert "#   rocev2: RoCEv2, lossless, Go-Back-N, DCQCN\n" in text
    assert "#   mrc: MRC, lossy, SACK, NSCC, trimming\n" in text
    assert list(report.headline(views)["transport"]) == [
        "RoCEv2, lossless, Go-Back-N, DCQCN", "MRC, lossy, SACK, NSCC, trimming"]
    assert "<b>RoCEv2, lossless, Go-Back-N, DCQCN</b>" in report.intro_html(runs, "Comparison")


def test_a_run_without_a_variant_is_named_by_its_transport(tmp_path: Path):
    run = _run(tmp_path, "{}", "rocev2")
    meta = json.loads((run / "meta.json").read_text())
    del meta["variant"], meta["facts"]["variant"]
    (run / "meta.json").write_text(json.dumps(meta))
    views = report.views_of([load_run(run)])
    assert "#   rocev2: rocev2\n" in summary.table(views)
    assert list(report.headline(views)["transport"]) == ["rocev2"]
