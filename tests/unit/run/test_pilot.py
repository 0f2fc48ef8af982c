"""rate auto's pilot: the window it measures, and where a workload done within it ends."""
from __future__ import annotations

import json
from pathlib import Path

from testbed.emulation.pilot_readings import (
    FIRST_ITERATION_MAX_S,
    SETTLE_S,
    WINDOW_S,
    window,
    window_closed,
)
from testbed.run.pilot import first_iteration_end, traffic_end


def test_a_finished_workload_ends_with_its_last_iteration(tmp_path: Path):
    for host, ends in (("h0", [10.0, 11.5]), ("h1", [10.2, 12.25])):
        (tmp_path / host).mkdir()
        (tmp_path / host / "iterations.json").write_text(json.dumps(
            [{"iteration": i, "start": e - 1, "end": e} for i, e in enumerate(ends)]))
    (tmp_path / "h2").mkdir()
    (tmp_path / "h2" / "iterations.json").write_text("[{\"end\": 99")  # cut short: not read
    (tmp_path / "h3").mkdir()
    (tmp_path / "h3" / "iterations.json").write_text(json.dumps([{"end": None}]))
    assert traffic_end(tmp_path) == 12.25


def test_no_iteration_ended(tmp_path: Path):
    assert traffic_end(tmp_path) is None


def test_the_first_iteration_ends_when_every_host_has_ended_it(tmp_path: Path):
    for host, ends in (("h0", [10.0, 11.5]), ("h1", [10.4, 12.25])):
        (tmp_path / host).mkdir()
        (tmp_path / host / "iterations.json").write_text(json.dumps(
            [{"iteration": i, "end": e} for i, e in enumerate(ends)]))
    assert first_iteration_end(tmp_path) == 10.4
    (tmp_path / "h2").mkdir()
    (tmp_path / "h2" / "iterations.json").write_text("[]")  # one host not done with it
    assert first_iteration_end(tmp_path) is None


def test_the_window_opens_at_the_first_iterations_end():
    """Measured from the steady state: WINDOW_S from when every rank finished its first
    iteration, not from the start (whose first seconds ran lighter)."""
    start = 100.0
    assert window(start, 109.5, 120.0) == (109.5, 109.5 + WINDOW_S)
    assert window(start, 100.3, 120.0) == (start + SETTLE_S, start + SETTLE_S + WINDOW_S)
    # a first iteration slower than the cap: the window opens at the cap
    late = start + FIRST_ITERATION_MAX_S
    assert window(start, None, late + 9) == (late, late + WINDOW_S)
    assert window(start, late + 5, late + 9) == (late, late + WINDOW_S)
    # not within the run yet (the agents stopped early): from SETTLE_S
    assert window(start, None, 104.0) == (start + SETTLE_S, 104.0)


def test_a_workload_done_early_is_measured_to_its_end():
    start = 100.0
    # the first iteration ended too close to the last for MIN_WINDOW_S: from SETTLE_S
    assert window(start, 102.8, 103.0) == (start + SETTLE_S, 103.0)
    # shorter than SETTLE_S + MIN_WINDOW_S in all: from the start
    assert window(start, 101.0, 101.5) == (start, 101.5)


def test_the_agents_stop_once_the_window_has_closed():
    start = 100.0
    assert not window_closed(start, None, 120.0)  # the first iteration is still running
    assert not window_closed(start, 109.5, 109.5 + WINDOW_S - 0.1)
    assert window_closed(start, 109.5, 109.5 + WINDOW_S)
    assert window_closed(start, 100.2, start + SETTLE_S + WINDOW_S)
    late = start + FIRST_ITERATION_MAX_S
    assert not window_closed(start, None, late + WINDOW_S - 0.1)
    assert window_closed(start, None, late + WINDOW_S)  # capped: the pilot stays short
