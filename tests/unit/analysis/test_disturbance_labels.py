"""Faults applied together get one label on a figure, not a stack of boxes."""
from __future__ import annotations

import math

import pandas as pd

from analysis.figures import same_window


def test_faults_of_one_kind_and_window_are_one_group_others_stay_apart():
    rows = [("fault", "blackhole", f"blackhole p1 leaf {leaf}-spine 0", 1.25, 3.75)
            for leaf in range(4)]
    rows += [("fault", "router_reboot", "reboot p1s0", 1.25, 3.75),  # same window, other kind
             ("fault", "blackhole", "blackhole p0 leaf 0-spine 1", 1.254, 3.751),  # within 10 ms
             ("background", "incast", "incast", 1.25, math.nan),  # open end: to t_max
             ("background", "incast", "incast", 1.25, 9.0)]  # the same, as it ends at t_max
    d = pd.DataFrame(rows, columns=["source", "kind", "label", "start", "end"])
    groups = same_window(d, t_max=9.0)
    assert [len(g) for g in groups] == [5, 1, 2]
    assert groups[0][0].label == "blackhole p1 leaf 0-spine 0"  # the first keeps its label
    assert groups[1][0].kind == "router_reboot"
