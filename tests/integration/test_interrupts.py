"""Runs stopped at every phase, by every signal, leave nothing behind and say how they ended.

The leak check of conftest runs after each test: zero namespaces, links, processes and
registry entries of the testbed may remain.
"""
from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from .helpers import CLI, ROOT, run_cli


def start(results: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(CLI + ["run", *args, "--results", str(results)], cwd=ROOT,
                            stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def wait_for(proc: subprocess.Popen, marker: str, timeout: float = 60) -> list[str]:
    """Read the run's progress lines until one contains `marker`. A run that does not get
    there is stopped (SIGTERM: it tears its fabric down) before the test fails, so that the
    tests after it do not find it still active."""
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            raise AssertionError(f"run ended before {marker!r}:\n{''.join(lines)}")
        lines.append(line)
        if marker in line:
            return lines
    proc.send_signal(signal.SIGTERM)
    try:
        proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
    raise AssertionError(f"no {marker!r} within {timeout} s:\n{''.join(lines)}")


def finish(proc: subprocess.Popen) -> tuple[int, str]:
    out, err = proc.communicate(timeout=60)
    proc.stdout.close()
    proc.stderr.close()
    return proc.returncode, err


def meta_of(results: Path) -> dict:
    (run,) = results.iterdir()
    return json.loads((run / "meta.json").read_text())


# (scenario, progress line after which the signal is sent, delay, phases the run may end in);
# ref-64's nodes phase lasts about a second and its verification about three.
PHASES = {
    "build": ("scenarios/ref-64.yaml", "  results ", 0.4, {"nodes", "links"}),
    "verify": ("scenarios/ref-64.yaml", "  routes ", 0.3, {"verify"}),
    "verify-late": ("scenarios/ref-64.yaml", "  routes ", 1.2, {"verify", "hold"}),
    "hold": ("scenarios/quickstart.yaml", "holding the fabric", 0.0, {"hold"}),
}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("phase", sorted(PHASES))
def test_signal_during_phase_tears_down(phase: str, sig: signal.Signals, results_dir: Path):
    file, marker, delay, phases = PHASES[phase]
    proc = start(results_dir, file, "--hold", "60")
    wait_for(proc, marker)
    time.sleep(delay)
    proc.send_signal(sig)
    code, err = finish(proc)
    assert code == 130, err
    assert f"error: interrupted by {sig.name}" in err and "Traceback" not in err
    assert "teardown" in err
    meta = meta_of(results_dir)
    assert meta["status"] == "interrupted"
    assert meta["ended_in_phase"] in phases, meta


def test_sigkill_then_clean(results_dir: Path):
    """A runner killed outright cannot clean up: `clean` does, and marks the run crashed."""
    proc = start(results_dir, "--hold", "60")
    wait_for(proc, "holding the fabric")
    proc.kill()
    finish(proc)
    assert meta_of(results_dir)["status"] == "running"  # nobody could say otherwise yet
    listing = run_cli("list", results=results_dir).stdout
    assert "crashed?" in listing
    res = run_cli("clean")
    assert res.returncode == 0, res.stderr
    assert "cleaned: 12 nodes recorded" in res.stdout
    meta = meta_of(results_dir)
    assert meta["status"] == "crashed" and "mrc-testbed clean" in meta["error"]


def test_sigkill_during_build_then_clean(results_dir: Path):
    """Killed while shells are still booting: nodes recorded without a namespace yet are found
    by their own pid and name."""
    proc = start(results_dir, "scenarios/ref-64.yaml", "--verify-only")  # builds at once:
    wait_for(proc, "  results ")  # no workload, so no pilot before the build
    time.sleep(0.3)
    proc.kill()
    finish(proc)
    res = run_cli("clean")
    assert res.returncode == 0 and "cleaned: " in res.stdout, res.stdout
    assert meta_of(results_dir)["status"] == "crashed"


def test_next_run_cleans_a_crashed_one(results_dir: Path, tmp_path: Path):
    proc = start(results_dir, "--hold", "60")
    wait_for(proc, "holding the fabric")
    proc.kill()
    finish(proc)
    second = tmp_path / "second"
    res = run_cli("run", "--verify-only", results=second)
    assert res.returncode == 0, res.stderr
    assert "cleaned what crashed run" in res.stderr
    assert meta_of(results_dir)["status"] == "crashed"


def test_second_run_is_refused_while_one_is_active(results_dir: Path, tmp_path: Path):
    proc = start(results_dir, "--hold", "60")
    try:
        wait_for(proc, "holding the fabric")
        res = run_cli("run", "--verify-only", results=tmp_path / "other")
        assert res.returncode == 3
        assert "another run is active" in res.stderr and f"kill {proc.pid}" in res.stderr
        assert not (tmp_path / "other").exists()
    finally:
        proc.send_signal(signal.SIGINT)
        finish(proc)
    assert meta_of(results_dir)["status"] == "interrupted"
