"""Root safety end to end: code planted in the working directory never
runs, a run's text never runs in its report, and one run at a time holds the lock."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.lifecycle import registry

from .helpers import ROOT

pytestmark = pytest.mark.root

ENTRY = Path(sys.executable).parent / "mrc-testbed"  # the installed command a user runs
EVIL = "<script>alert(1)</script>"


def _plant(cwd: Path, marker: Path) -> None:
    """hostagent/ and analysis/ that would leave `marker` behind if anything imported them."""
    code = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    for package, modules in (("hostagent", ("__init__", "agent")), ("analysis", ("__init__",))):
        (cwd / package).mkdir(parents=True)
        for module in modules:
            (cwd / package / f"{module}.py").write_text(code)


def test_planted_code_never_runs_and_a_runs_text_never_runs_in_its_report(tmp_path: Path):
    cwd, marker = tmp_path / "cwd", tmp_path / "PLANTED-CODE-RAN"
    _plant(cwd, marker)
    scenario = cwd / "evil.yaml"
    scenario.write_text(f"name: evil\ndescription: {EVIL!r}  # {EVIL}\ntransport: [mrc]\n"
                        "workload: {size: 64KiB, iterations: 1, warmup: 0}\n")
    results = tmp_path / "results"
    res = subprocess.run([str(ENTRY), "run", str(scenario), "--quiet", "--results",
                          str(results)], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert not marker.exists(), marker.read_text()
    assert res.returncode == 0, res.stderr
    (run,) = list(results.iterdir())
    html = (run / "report" / "report.html").read_text()
    assert EVIL not in html
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 2  # description, scenario
    # `report` again, from the planted folder: the notebook kernel must not import it either
    res = subprocess.run([str(ENTRY), "report", str(run)], cwd=cwd, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert not marker.exists(), marker.read_text()


def test_a_second_run_is_refused_while_the_lock_is_held(tmp_path: Path):
    with registry.run_lock():
        res = subprocess.run([sys.executable, "-m", "testbed.cli", "run", "--verify-only",
                              "--results", str(tmp_path)], cwd=ROOT, capture_output=True,
                             text=True, timeout=60)
    assert res.returncode == 3, res.stderr
    assert f"another run is active (pid {os.getpid()})" in res.stderr
    assert not any(tmp_path.iterdir())  # nothing made
