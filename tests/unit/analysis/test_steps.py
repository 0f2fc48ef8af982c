"""Step metrics on hand-built node records; every expected value worked out by hand below."""
from __future__ import annotations

import pandas as pd
import pytest

from analysis.steps import (
    collective_calls,
    group_exposed,
    iteration_times,
    minus,
    rank_metrics,
    union,
)


def row(rank, kind, start, end, group=None, collective=None, nbytes=0, iteration=0):
    return {"transport": "mrc", "rank": rank, "iteration": iteration, "warmup": False,
            "node": 0, "name": "", "kind": kind, "collective": collective, "group": group,
            "peer": None, "bytes": nbytes, "start": start, "end": end, "verified": True,
            "error": None}


# rank 0: compute 0-4 and 6-8 (6); all-reduce on dp 3-7 (overlaps compute 3-4 and 6-7: exposed
#   4-6 = 2); a send on pp 8-9 (exposed 1); comm 4 + 1 = 5, exposed 3; span 0-9 = 9, all of
#   it covered by compute or comm: idle 0.
# rank 1: compute 0-2; all-reduce on dp 2.5-7.5 (exposed 5); idle 2-2.5 = 0.5; span 0-7.5.
STEPS = pd.DataFrame([
    row(0, "compute", 0, 4), row(0, "compute", 6, 8),
    row(0, "collective", 3, 7, "dp", "all_reduce", 8_000_000_000),
    row(0, "send", 8, 9, "pp", nbytes=4),
    row(1, "compute", 0, 2),
    row(1, "collective", 2.5, 7.5, "dp", "all_reduce", 8_000_000_000),
])


def test_interval_arithmetic():
    assert union([(3, 5), (0, 1), (0.5, 2), (5, 6)]) == [(0, 2), (3, 6)]
    assert minus([(0, 10)], [(1, 2), (4, 6), (9, 12)]) == 10 - 1 - 2 - 1


def test_rank_metrics():
    m = rank_metrics(STEPS).set_index("rank")
    assert m.loc[0, ["time", "compute", "communication", "exposed", "idle"]].tolist() == \
        [9, 6, 5, 3, 0]
    assert m.loc[1, ["time", "compute", "communication", "exposed", "idle"]].tolist() == \
        [7.5, 2, 5, 5, 0.5]


def test_iteration_time_spans_every_rank():
    assert iteration_times(STEPS)["time"].tolist() == [9]


def test_busbw_of_a_call():
    """The call runs from rank 1's start (2.5, the earlier) to rank 1's end (7.5, the later):
    5 s for 8 GB on 2 ranks: algbw 1.6 GB/s, x 2(n-1)/n = 1."""
    (call,) = collective_calls(STEPS).to_dict("records")
    assert call["time"] == 5
    assert call["ranks"] == 2
    assert call["busbw"] == pytest.approx(1.6)


def test_group_exposed():
    """dp: rank 0 exposed 2, rank 1 exposed 5: mean 3.5, max 5. pp: rank 0 only, 1."""
    g = group_exposed(STEPS).set_index("group")
    assert g.loc["dp", ["exposed_mean", "exposed_max", "ranks"]].tolist() == [3.5, 5, 2]
    assert g.loc["pp", ["exposed_mean", "ranks"]].tolist() == [1, 1]
