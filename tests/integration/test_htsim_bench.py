"""bench/htsim.py end to end on the smallest matched scenario: htsim_uec and one testbed MRC run
of scenarios/htsim/ring-4.yaml, given a uet-htsim checkout in MRC_TESTBED_HTSIM (the bench's
--htsim; it builds htsim there when missing)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HTSIM = os.environ.get("MRC_TESTBED_HTSIM")


@pytest.mark.skipif(not HTSIM, reason="MRC_TESTBED_HTSIM is not set: give a uet-htsim "
                                      "checkout (github.com/ultraethernet/uet-htsim)")
def test_the_bench_prints_htsim_beside_the_testbed(tmp_path: Path):
    done = subprocess.run(
        [sys.executable, "-m", "bench.htsim", "--htsim", str(HTSIM), "--seeds", "1",
         "--variants", "mrc", "--results", str(tmp_path), "scenarios/htsim/ring-4.yaml"],
        cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    cct = [line for line in done.stdout.splitlines()
           if line.startswith("| ring-4 | mrc | htsim_uec | CCT |")]
    assert len(cct) == 1, done.stdout
    htsim = cct[0].split("|")[5].strip()
    assert htsim != "-", f"htsim made no result: {done.stdout}"
    assert float(htsim.split("/")[1]) >= 1.0  # nothing beats the ideal
