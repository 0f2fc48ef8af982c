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


def test_a_crash_the_watch_takes_out_ends_nothing(monkeypatch):
    """A job of several stopped by the watch (its agent failed): the others run to their end."""
    monkeypatch.setattr(waiting, "CRASH_GRACE", 0.3)
    monkeypatch.setattr(waiting, "WATCH_EVERY", 0.1)
    procs = {"h0": subprocess.Popen(["sh", "-c", "sleep 1.5"]),
             "h1": subprocess.Popen(["sh", "-c", "exit 3"])}

    def watch(now: float) -> None:
        if procs.get("h1") is not None and procs["h1"].poll() is not None:
            del procs["h1"]  # its job stopped: as run_jobs's watch does

    t0 = time.monotonic()
    out = waiting.wait_for_agents(procs, time.time() + 60, watch=watch)
    assert time.monotonic() - t0 > 1.2, "h0 ran to its end, past the crash grace"
    assert out.why is None and out.stopped == {}


def test_the_deadline_stops_the_rest_and_sigterm_comes_first(tmp_path: Path):
    mark = tmp_path / "stopped"
    # an agent stand-in that writes its results on SIGTERM, as hostagent/runtime/agent.py does
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


def test_progress_rule_by_hand():
    rule = waiting.ProgressRule(first_s=100.0, factor=3.0, floor_s=40.0, slack_s=2.0)
    # before any completion: the first iteration's allowance, from the start
    assert rule.limit(0.0, []) == 100.0
    assert rule.stalled(0.0, [], 100.0) is None
    assert "within 100 s of the start" in rule.stalled(0.0, [], 100.5)
    # 64 hosts as measured: 25 s a step plus 30 s of verification -> completions 55 s apart;
    # the limit is 3 x 55 + 2 = 167 s after the last one, not a fixed 69 s for the whole run
    assert rule.limit(0.0, [55.0, 110.0]) == 167.0
    assert rule.stalled(0.0, [55.0, 110.0], 277.0) is None
    why = rule.stalled(0.0, [55.0, 110.0], 277.5)
    assert why is not None and "after 2 did" in why and "limit 167 s" in why
    # quick iterations: the floor (an agent lingers up to 30 s for its peers) + slack
    assert rule.limit(0.0, [5.0, 6.0, 7.0]) == 42.0
    # the longest interval counts, not the last: one slow (faulted) step widens the limit
    assert rule.limit(0.0, [5.0, 25.0, 26.0]) == 3 * 20.0 + 2.0


def local_files(dirs: list[Path]):
    """The agents' files as a single-machine run reads them (FabricNetwork.read_files)."""
    from types import SimpleNamespace

    from testbed.emulation.network import FabricNetwork
    from testbed.run.traffic import AgentFiles
    network = SimpleNamespace(read_files=lambda wanted: FabricNetwork.read_files(
        None, wanted))  # type: ignore[arg-type]
    return AgentFiles(network, {d.name: SimpleNamespace(out_dir=str(d)) for d in dirs})


def test_iteration_watch_counts_iterations_every_rank_completed(tmp_path: Path):
    from testbed.run.traffic import IterationWatch
    dirs = [tmp_path / "h0", tmp_path / "h1"]
    for d in dirs:
        d.mkdir()
    watch = IterationWatch(local_files(dirs), waiting.ProgressRule(first_s=10.0, floor_s=5.0),
                           start=0.0)
    (dirs[0] / "progress").write_text("\n" * 2)  # h1 has written nothing yet: none on every rank
    assert watch(1.0) is None and watch.completions == []
    (dirs[1] / "progress").write_text("\n" * 1)
    assert watch(4.0) is None and watch.completions == [4.0]
    (dirs[1] / "progress").write_text("\n" * 3)
    (dirs[0] / "progress").write_text("\n" * 3)
    assert watch(6.0) is None and watch.completions == [4.0, 6.0, 6.0]
    # longest interval 4 s -> 3 x 4 = 12 s after the last completion
    assert watch(18.0) is None
    assert "after 3 did" in (watch(18.5) or "")


def test_a_stalled_run_is_stopped_with_the_watchs_reason(monkeypatch):
    monkeypatch.setattr(waiting, "WATCH_EVERY", 0.05)
    procs = {"h0": sleeper(60), "h1": sleeper(60)}
    t0 = time.time()
    out = waiting.wait_for_agents(procs, t0 + 60,
                                  watch=lambda now: "stuck" if now - t0 > 0.3 else None)
    assert time.time() - t0 < 10, "not the 60 s cap"
    assert out.why == "stuck" and set(out.stopped) == {"h0", "h1"}


def test_iteration_watch_ends_the_wait_for_a_host_that_failed_in_a_pooled_process(tmp_path):
    """A pooled process lives on after one of its hosts failed: its result.json says so."""
    from testbed.run.traffic import IterationWatch
    dirs = [tmp_path / "h0", tmp_path / "h1"]
    for d in dirs:
        d.mkdir()
    watch = IterationWatch(local_files(dirs), waiting.ProgressRule(first_s=100.0), start=0.0)
    (dirs[0] / "result.json").write_text('{"status": "ok"}')
    assert watch(1.0) is None
    (dirs[1] / "result.json").write_text('{"status": "failed", "error": "transport failed"}')
    assert watch(2.0) == ("the agent of h1 failed (transport failed): its peers cannot "
                          "complete without it")
