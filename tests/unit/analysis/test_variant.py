"""Every run names the baseline it ran (Scenario.variant): in meta.json, the run's summary, the
terminal table and the report; a run recorded before the variant was falls back to its
transport."""
from __future__ import annotations

import json
from pathlib import Path

from analysis import report, summary
from analysis.load import load_run
from tests.unit.made_runs import made_run


def _run(base: Path, switch: str, transport: str) -> Path:
    return made_run(base, transport, text=f"name: v\nswitch: {switch}\n"
                    f"workload: {{size: 1KiB, iterations: 2, warmup: 0}}\n")


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
