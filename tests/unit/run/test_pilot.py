"""rate auto's pilot: the window it measures, and where a workload done within it ends."""
from __future__ import annotations

import json
from pathlib import Path

from testbed.emulation.pilot_readings import (
    FIRST_ITERATION_MAX_S,
    SETTLE_S,
    WINDOW_MAX_S,
    window,
    window_closed,
)
from testbed.run.pilot import iterations_done, traffic_end


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


def test_an_iteration_is_done_when_every_host_has_ended_it(tmp_path: Path):
    for host, ends in (("h0", [10.0, 11.5, 13.0]), ("h1", [10.4, 12.25])):
        (tmp_path / host).mkdir()
        (tmp_path / host / "iterations.json").write_text(json.dumps(
            [{"iteration": i, "end": e} for i, e in enumerate(ends)]))
    assert iterations_done(tmp_path) == [10.4, 12.25]
    (tmp_path / "h2").mkdir()
    (tmp_path / "h2" / "iterations.json").write_text("[]")  # one host not done with any
    assert iterations_done(tmp_path) == []


def test_the_window_is_whole_iterations_from_the_first_ones_end():
    """Measured from the steady state (the first seconds ran lighter), and to an iteration's
    end, so that the burst at each iteration's end weighs as in a run."""
    start = 100.0
    every_9s = [109.5, 118.5, 127.5]
    assert window(start, every_9s, 130.0) == (109.5, 118.5)
    every_1s = [101.5 + k for k in range(10)]  # short iterations: whole ones, 4 s at least
    assert window(start, every_1s, 120.0) == (101.5, 105.5)
    # an iteration longer than WINDOW_MAX_S: measured in part
    assert window(start, [109.5], 109.5 + WINDOW_MAX_S + 3) == (109.5, 109.5 + WINDOW_MAX_S)
    # a first iteration sooner than SETTLE_S: from SETTLE_S
    assert window(start, [100.3, 104.0, 106.0], 120.0) == (start + SETTLE_S, 106.0)


def test_a_slow_first_iteration_opens_the_window_at_the_cap():
    start, late = 100.0, 100.0 + FIRST_ITERATION_MAX_S
    assert window(start, [], late + WINDOW_MAX_S) == (late, late + WINDOW_MAX_S)
    assert window(start, [late + 5], late + 9) == (late, late + 5)


def test_a_workload_done_early_is_measured_to_its_end():
    start = 100.0
    # the first iteration ended too close to the last for MIN_WINDOW_S: from SETTLE_S
    assert window(start, [102.8, 103.0], 103.0) == (start + SETTLE_S, 103.0)
    # shorter than SETTLE_S + MIN_WINDOW_S in all: from the start
    assert window(start, [101.0, 101.5], 101.5) == (start, 101.5)
    # stopped before its first iteration ended (no window of iterations): from SETTLE_S
    assert window(start, [], 104.0) == (start + SETTLE_S, 104.0)


def test_the_agents_stop_once_the_window_has_closed():
    start = 100.0
    assert not window_closed(start, [], 120.0)  # the first iteration is still running
    assert not window_closed(start, [109.5], 109.5 + WINDOW_MAX_S - 0.1)
    assert window_closed(start, [109.5, 118.5], 118.6)  # a whole iteration, 4 s or more
    assert not window_closed(start, [109.5, 111.0], 112.0)  # whole, but under WINDOW_S
    assert window_closed(start, [109.5], 109.5 + WINDOW_MAX_S)  # a long one, cut
    late = start + FIRST_ITERATION_MAX_S
    assert not window_closed(start, [], late + WINDOW_MAX_S - 0.1)
    assert window_closed(start, [], late + WINDOW_MAX_S)  # capped: the pilot stays short
