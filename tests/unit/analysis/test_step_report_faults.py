"""Which steps the step-time figure rings: those that overlap a fault's window."""
from __future__ import annotations

import math

import pandas as pd

from analysis.step_report import in_fault


def test_a_step_is_ringed_when_it_overlaps_a_window_and_not_when_it_only_touches_it():
    t0 = 100.0  # the workload's start: windows count from it, steps are absolute
    times = pd.DataFrame({"start": [100.0, 101.0, 102.0, 103.0],
                          "end": [101.0, 102.0, 103.0, 104.0]})
    spans = pd.DataFrame({"start": [1.5, 3.2], "end": [2.0, math.nan]})  # the second never ends
    # step 0 (0-1 s) ends before the first window; step 1 (1-2 s) holds it; step 2 (2-3 s)
    # starts as it ends; step 3 (3-4 s) meets the open window from 3.2 s
    assert in_fault(times, spans, t0).tolist() == [False, True, False, True]
    assert not in_fault(times, spans.iloc[0:0], t0).any()
