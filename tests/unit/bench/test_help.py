"""Every bench script answers `--help` with its usage and runs nothing: a reader asks a script
what it does before running it, and some build fabrics for many minutes."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"
SCRIPTS = sorted(p.stem for p in BENCH.glob("*.py") if "__main__" in p.read_text())


def test_the_scripts_are_found():
    assert {"agent", "paper", "htsim"} <= set(SCRIPTS)


@pytest.mark.parametrize("name", SCRIPTS)
def test_help_prints_the_usage_and_runs_nothing(name: str):
    done = subprocess.run([sys.executable, "-m", f"bench.{name}", "--help"], cwd=BENCH.parent,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout.startswith("usage:"), done.stdout[:200]
