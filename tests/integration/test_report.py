"""The report of a real quickstart run over both transports, rendered by `mrc-testbed run`;
and `report` on folders that are not whole runs."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from .helpers import run_cli, run_scenario

pytestmark = pytest.mark.root

SCENARIO = """name: report-test
fabric: {host_link: {rate: 25Mbit}, fabric_link: {rate: 25Mbit}, mtu: 4200}
qp: {mss: 4096}
workload: {collective: all_reduce, size: 256KiB, iterations: 3, warmup: 1}
"""
_MAGIC = {".png": b"\x89PNG\r\n\x1a\n", ".pdf": b"%PDF-", ".svg": b"<?xml"}


def _valid_image(path: Path) -> bool:
    data = path.read_bytes()
    return len(data) > 1000 and data.startswith(_MAGIC[path.suffix])


def _check_report(folder: Path, figures: list[str]) -> None:
    html = (folder / "report.html").read_text()
    for name in figures:
        for suffix in (".png", ".pdf"):
            assert _valid_image(folder / f"{name}{suffix}"), f"{folder / name}{suffix}"
    assert not re.search(r'class="[^"]*\b(output_error|output_stderr)\b', html)
    assert html.count("data:image/png;base64,") >= len(figures)  # embedded, not linked
    assert not re.search(r'<script[^>]*src="https?://', html)


def test_run_renders_reports_and_prints_summary(tmp_path: Path, results_dir: Path):
    file = tmp_path / "scenario.yaml"
    file.write_text(SCENARIO)
    res = run_cli("run", str(file), "--quiet", results=results_dir, timeout=300)
    assert res.returncode == 0, res.stderr
    runs = sorted(d for d in results_dir.iterdir() if not d.name.split("-", 1)[1]
                  .startswith("compare"))
    assert [d.name.rsplit("-", 1)[1] for d in runs] == ["mrc", "rocev2"]
    for d in runs:
        _check_report(d / "report", ["cct_cdf", "goodput", "utilisation", "busbw",
                                     "ev_states", "counters", "fidelity"])
    (compare,) = [d for d in results_dir.iterdir() if "-compare-report-test" in d.name]
    _check_report(compare, ["cct_cdf", "goodput", "utilisation", "busbw", "counters",
                            "ev_states-mrc", "ev_states-rocev2", "fidelity-mrc",
                            "fidelity-rocev2"])
    assert "<th>fidelity</th>" in (compare / "report.html").read_text()  # the headline's column
    out = res.stdout.splitlines()
    assert out[-1] == f"report: {compare / 'report.html'}"
    assert any(line.split()[:1] == ["mrc"] for line in out)
    assert any(line.split()[:1] == ["rocev2"] for line in out)
    assert any("CCT p50" in line for line in out)
    assert sum(line.startswith("# fidelity ") for line in out) == 2  # one verdict per run
    # the same comparison from the folders, elsewhere: only it is rendered and named
    res = run_cli("compare", *map(str, runs), "--out", str(tmp_path / "cmp"))
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1] == f"report: {tmp_path / 'cmp' / 'report.html'}"
    assert sum(line.startswith("report: ") for line in res.stdout.splitlines()) == 1
    _check_report(tmp_path / "cmp", ["cct_cdf", "busbw"])
    res = run_cli("compare", str(runs[0]))
    assert res.returncode == 2 and "at least two runs" in res.stderr


def _a_run(tmp_path: Path, results_dir: Path) -> Path:
    return run_scenario(SCENARIO.replace("iterations: 3", "iterations: 1") +
                        "transport: [mrc]\n", tmp_path, results_dir, "--quiet",
                        "--no-report")[0]


def test_report_on_missing_or_incomplete_folder(tmp_path: Path, results_dir: Path):
    res = run_cli("report", str(tmp_path / "nothing-here"))
    assert res.returncode == 2 and "no such run folder" in res.stderr
    assert "Traceback" not in res.stderr

    run = _a_run(tmp_path, results_dir)
    assert not (run / "report").exists()  # --no-report
    broken = tmp_path / "broken"
    shutil.copytree(run, broken)
    (broken / "iterations.parquet").unlink()
    meta = json.loads((broken / "meta.json").read_text())
    (broken / "meta.json").write_text(json.dumps(meta | {"status": "crashed",
                                                         "ended_in_phase": "traffic"}))
    res = run_cli("report", str(broken))
    assert res.returncode == 2, res.stderr
    assert res.stderr.splitlines()[0] == (
        f"error: {broken}: incomplete run (status crashed, ended in phase traffic): it has "
        f"no iterations.parquet, so nothing to report")
    assert "Traceback" not in res.stderr
