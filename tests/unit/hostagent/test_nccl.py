"""nccl-tests' metrics and table, checked against numbers worked out by hand."""
from __future__ import annotations

import pytest

from hostagent.workloads.iterations import IterationRecord
from hostagent.workloads.nccl import (
    Row,
    algbw,
    bus_factor,
    busbw,
    cct,
    format_table,
    loop_time,
    summarize,
)


@pytest.mark.parametrize("kind, world, factor", [
    ("all_reduce", 8, 1.75),  # 2 x 7/8
    ("all_reduce", 2, 1.0),
    ("all_gather", 8, 0.875),
    ("reduce_scatter", 4, 0.75),
    ("all_to_all", 2, 0.5),
    ("all_reduce", 1, 0.0),  # one rank: nothing crosses a link
])
def test_bus_factor(kind, world, factor):
    assert bus_factor(kind, world) == factor


def test_bandwidths():
    assert algbw(10**9, 1.0) == 1.0
    assert algbw(2 * 10**6, 0.001) == 2.0
    assert busbw("all_reduce", 8, 2 * 10**6, 0.001) == 3.5
    with pytest.raises(ValueError, match="unknown collective"):
        bus_factor("broadcast", 4)


def record(rank, iteration, start, end, *, warmup=False, verified=True, kind="all_reduce",
           size=10**6):
    return IterationRecord(kind, rank, iteration, warmup, start, end, size, verified,
                           None if verified else "wrong")


# two ranks, one warmup and two timed iterations of 1 MB
RECORDS = [
    record(0, 0, 0.0, 0.5, warmup=True), record(1, 0, 0.1, 0.6, warmup=True, verified=False),
    record(0, 1, 1.0, 1.003), record(1, 1, 1.001, 1.004),  # CCT 4 ms
    record(0, 2, 2.0, 2.006), record(1, 2, 2.001, 2.005),  # CCT 6 ms
]


def test_cct_is_last_end_minus_first_start():
    assert cct(RECORDS) == pytest.approx({0: 0.6, 1: 0.004, 2: 0.006})


def test_summarize_hand_example():
    [row] = summarize(RECORDS, world=2)
    assert (row.collective, row.size, row.count, row.type, row.redop, row.wrong) == (
        "all_reduce", 10**6, 250_000, "float", "sum", 1)
    # the loop starts at 1.0; rank 0 spends 3 + 6 ms in it, rank 1 1 ms late + 3 + 4 ms:
    # (9 + 8) / 2 ranks / 2 iterations; warmup left out
    assert row.time_us == pytest.approx(4250)
    assert row.algbw == pytest.approx(1e6 / 4.25e-3 / 1e9)
    assert row.busbw == pytest.approx(row.algbw)  # x 2(2-1)/2


def test_loop_time_counts_the_overlap_of_drifting_ranks_once():
    """Rank 1 runs 5 s behind rank 0 throughout: two iterations of 10 s each end at 25 s.
    Each CCT is 15 s (rank 0's start to rank 1's end), yet the loop took 20 and 25 s."""
    drifting = [record(0, 0, 0.0, 10.0), record(1, 0, 5.0, 15.0),
                record(0, 1, 10.0, 20.0), record(1, 1, 15.0, 25.0)]
    assert cct(drifting) == pytest.approx({0: 15.0, 1: 15.0})
    assert loop_time(drifting) == pytest.approx((20.0 + 25.0) / 2 / 2)


def test_loop_time_leaves_out_each_ranks_gaps_between_iterations():
    """Making and checking buffers (here 2 s on rank 0, 1 s on rank 1) is outside nccl-tests'
    timed loop; a rank that starts late still counts from the loop's start."""
    gaps = [record(0, 0, 0.0, 4.0), record(1, 0, 1.0, 4.0),
            record(0, 1, 6.0, 10.0), record(1, 1, 5.0, 10.0)]
    assert loop_time(gaps) == pytest.approx(((4 + 4) + (1 + 3 + 5)) / 2 / 2)


def test_summarize_one_row_per_size_in_order():
    small = [record(r, 0, 0.0, 1e-3, kind="all_gather", size=64) for r in range(2)]
    large = [record(r, 0, 0.0, 1.0, kind="all_gather", size=10**9) for r in range(2)]
    rows = summarize(large + small, world=2)
    assert [(r.size, r.count, r.redop, r.busbw) for r in rows] == [
        (64, 16, "none", pytest.approx(64 / 1e-3 / 1e9 / 2)), (10**9, 250_000_000, "none", 0.5)]


def test_summarize_refuses_incomplete_or_mixed_records():
    with pytest.raises(ValueError, match=r"iterations \[2\] lack some of the 2 ranks"):
        summarize(RECORDS[:-1], world=2)
    with pytest.raises(ValueError, match="no timed"):
        summarize(RECORDS[:2], world=2)
    with pytest.raises(ValueError, match="several collectives"):
        summarize([*RECORDS, record(0, 0, 0, 1, kind="all_to_all", size=8)], world=2)


TABLE = """\
# all_reduce over mrc, 8 ranks
#
#       size         count      type   redop     time     algbw     busbw  #wrong
#        (B)    (elements)                       (us)    (GB/s)    (GB/s)
        1024           256     float     sum    12.35    0.0829    0.1452       0
     1048576        262144     float     sum   1234.5    0.8494    1.4865       0
  1073741824     268435456     float     sum   123457    8.6970     15.22       2
# Wrong results        : 2 FAILED
# Avg bus bandwidth    : 5.6172
"""


def test_format_table_hand_example():
    rows = [Row("all_reduce", 1024, 256, "float", "sum", 12.3456, 0.08295, 0.14516, 0),
            Row("all_reduce", 2**20, 2**18, "float", "sum", 1234.5, 0.8494, 1.4865, 0),
            Row("all_reduce", 2**30, 2**28, "float", "sum", 123456.7, 8.697, 15.22, 2)]
    assert format_table(rows, transport="mrc", world=8) == TABLE


def test_format_table_from_records():
    text = format_table(summarize(RECORDS, world=2), transport="rocev2", world=2)
    assert text.splitlines()[0] == "# all_reduce over rocev2, 2 ranks"
    assert text.splitlines()[4] == (
        "     1000000        250000     float     sum   4250.0    0.2353    0.2353       1")
    assert "# Wrong results        : 1 FAILED" in text


def test_format_table_is_one_collective():
    rows = [Row("all_reduce", 8, 2, "float", "sum", 1, 0, 0, 0),
            Row("all_gather", 8, 2, "float", "none", 1, 0, 0, 0)]
    with pytest.raises(ValueError, match="one collective"):
        format_table(rows, transport="mrc", world=2)
