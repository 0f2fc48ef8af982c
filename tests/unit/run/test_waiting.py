"""Waiting for agents: a crash ends the wait promptly, the deadline stops the rest, and a
stopped agent gets SIGTERM first (time to write what it completed) and SIGKILL only after."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from testbed.run import waiting


def sleeper(seconds: float) -> subprocess.Popen:
    return subprocess.Popen(["sleep", str(seconds)])


def test_every_agent_done_by_itself():
    procs = {"h0": subprocess.Popen(["true"]), "h1": subprocess.Popen(["true"])}
    out = waiting.wait_for_agents(procs, time.time() + 10)
    assert out.why is None and out.stopped == {}


def test_a_crash_ends_the_wait_promptly(monkeypatch):
    monkeypatch.setattr(waiting, "CRASH_GRACE", 0.3)
    procs = {"h0": sleeper(60), "h1": subprocess.Popen(["sh", "-c", "sleep 0.2; exit 3"]),
             "h2": sleeper(60)}
    t0 = time.monotonic()
    out = waiting.wait_for_agents(procs, time.time() + 60)
    assert time.monotonic() - t0 < 5, "not the 60 s deadline"
    assert "the agent of h1 failed (exit 3)" in (out.why or "")
    assert set(out.stopped) == {"h0", "h2"} and all(p.poll() is not None for p in procs.values())


def test_the_deadline_stops_the_rest_and_sigterm_comes_first(tmp_path: Path):
    mark = tmp_path / "stopped"
    # an agent stand-in that writes its results on SIGTERM, as hostagent/agent.py does
    script = (f"import signal, sys, time, pathlib\n"
              f"def bye(*_):\n    pathlib.Path({str(mark)!r}).write_text('term')\n"
              f"    sys.exit(0)\n"
              f"signal.signal(signal.SIGTERM, bye)\ntime.sleep(60)\n")
    procs = {"h0": subprocess.Popen([sys.executable, "-c", script]), "h1": sleeper(0.1)}
    time.sleep(0.3)  # the handler is installed
    out = waiting.wait_for_agents(procs, time.time() + 0.5)
    assert out.why == "the workload's deadline passed" and set(out.stopped) == {"h0"}
    assert mark.read_text() == "term" and procs["h0"].returncode == 0


def test_an_agent_ignoring_sigterm_is_killed(monkeypatch):
    monkeypatch.setattr(waiting, "TERM_GRACE", 0.3)
    proc = subprocess.Popen([sys.executable, "-c",
                             "import signal, time; signal.signal(signal.SIGTERM, "
                             "signal.SIG_IGN); time.sleep(60)"])
    time.sleep(0.3)
    waiting.stop({"h0": proc})
    assert proc.returncode == -9
