"""nccl-tests' numbers for a run: algbw, busbw, collective completion time, and the table.

algbw = S / t with S the whole array in bytes (for all-gather and reduce-scatter too); busbw
scales it by the share of the data each rank must move over its links, so that busbw of a good
implementation is comparable with the link rate whatever the collective and world size
(nccl-tests' doc/PERFORMANCE.md).

t in the table is nccl-tests' time: each rank times its loop of timed iterations from the
moment the loop starts, divided by the iterations (`rank_times`), and the ranks' times are
averaged (`loop_time`). The collective completion time (CCT: last rank's end minus first
rank's start of one iteration) is the per-iteration number the tails and fault windows use.
Its mean is not t: iterations run back to back without a barrier, so when ranks drift apart
consecutive iterations overlap, and a mean of CCTs counts the overlap twice (ref-64 at
63605f1: MRC read 72% of the ideal for iterations that completed at 88%). The emulated hosts
share one machine's clock, so starts and ends of different ranks are comparable.
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from statistics import fmean
from typing import cast

from hostagent.workloads.collectives import DTYPE, KINDS, Kind
from hostagent.workloads.iterations import IterationRecord

_TYPE_NAME = "float"  # nccl-tests' name for float32
_REDOP = {"all_reduce": "sum", "reduce_scatter": "sum", "all_gather": "none", "all_to_all": "none"}


def bus_factor(kind: Kind, world: int) -> float:
    """all-reduce moves each byte out and back in (2(n-1)/n); the others move the n-1 blocks
    that are not already in place ((n-1)/n). Zero for one rank: nothing crosses a link."""
    if kind not in KINDS:
        raise ValueError(f"unknown collective {kind!r}; known: {', '.join(KINDS)}")
    share = (world - 1) / world
    return 2 * share if kind == "all_reduce" else share


def algbw(size: int, seconds: float) -> float:
    """GB/s (10**9 bytes per second, as nccl-tests prints)."""
    return size / seconds / 1e9


def busbw(kind: Kind, world: int, size: int, seconds: float) -> float:
    """GB/s."""
    return algbw(size, seconds) * bus_factor(kind, world)


def cct(records: Iterable[IterationRecord]) -> dict[int, float]:
    """Seconds per iteration, from every rank's record of one collective and size."""
    first: dict[int, float] = {}
    last: dict[int, float] = {}
    for r in records:
        first[r.iteration] = min(first.get(r.iteration, r.start), r.start)
        last[r.iteration] = max(last.get(r.iteration, r.end), r.end)
    return {it: last[it] - first[it] for it in sorted(first)}


def rank_times(records: Iterable[IterationRecord]) -> dict[int, float]:
    """Each rank's seconds per iteration in nccl-tests' timed loop, from every rank's records
    of the timed iterations of one collective and size. nccl-tests starts every rank's timer
    after a barrier and runs the iterations back to back. Here the loop starts at the earliest
    start of any rank (a rank that enters later pays for it, as a rank arriving late at the
    barrier would make the others wait), and a rank's time leaves out its own gaps between
    iterations: making and checking buffers, and `compute_gap`, which nccl-tests' loop does not
    have."""
    by_rank: dict[int, list[IterationRecord]] = defaultdict(list)
    for r in records:
        by_rank[r.rank].append(r)
    if not by_rank:
        raise ValueError("no iteration records")
    begin = min(r.start for group in by_rank.values() for r in group)
    iterations = len({r.iteration for group in by_rank.values() for r in group})
    return {rank: (min(r.start for r in group) - begin + sum(r.end - r.start for r in group))
            / iterations for rank, group in sorted(by_rank.items())}


def loop_time(records: Iterable[IterationRecord]) -> float:
    """nccl-tests' seconds per iteration: the ranks' times (`rank_times`) averaged."""
    return fmean(rank_times(records).values())


def iteration_begins(spans: Mapping[int, tuple[float, float]]) -> dict[int, float]:
    """When each iteration's time begins, from each iteration's (first start, last end) over
    the ranks: its first start, or the last end of the iterations before it, when later. A rank
    done early starts its next iteration at once (a sender of write flows posts its next write,
    which waits for the receiver's clear-to-send); counting from its start would count that
    wait in two iterations. So begun, the iterations' times add up to the loop's, as a training
    loop's step times (from one step's end to the next's) do."""
    out: dict[int, float] = {}
    done = -math.inf
    for iteration in sorted(spans):
        start, end = spans[iteration]
        out[iteration] = max(start, done)
        done = max(done, end)
    return out


@dataclass(frozen=True)
class Row:
    """One line of the table: one message size. `wrong` counts the rank-iterations whose result
    failed verification, warmup included: nccl-tests counts wrong elements instead, but a record
    keeps only pass/fail and the first wrong element."""

    collective: str
    size: int  # bytes of the whole array
    count: int  # elements
    type: str
    redop: str
    time_us: float  # nccl-tests' time of the timed (non-warmup) iterations: loop_time
    algbw: float  # GB/s
    busbw: float  # GB/s
    wrong: int


def summarize(records: Iterable[IterationRecord], world: int) -> list[Row]:
    """One row per size, from every rank's records of one collective. Refuses an iteration
    that misses a rank, since its CCT would silently be too short."""
    by_size: dict[int, list[IterationRecord]] = defaultdict(list)
    for r in records:
        by_size[r.bytes].append(r)
    kinds = {r.kind for group in by_size.values() for r in group}
    if len(kinds) > 1:
        raise ValueError(f"records of several collectives: {', '.join(sorted(kinds))}")
    rows = []
    for size, group in sorted(by_size.items()):
        # a record's kind is a str read back from JSON; an unknown one fails below (_REDOP)
        kind = cast(Kind, group[0].kind)
        per_iteration: dict[int, set[int]] = defaultdict(set)
        for r in group:
            per_iteration[r.iteration].add(r.rank)
        incomplete = sorted(it for it, ranks in per_iteration.items() if len(ranks) != world)
        if incomplete:
            raise ValueError(f"{kind} {size} B: iterations {incomplete} lack some of the "
                             f"{world} ranks")
        timed = [r for r in group if not r.warmup]
        if not timed:
            raise ValueError(f"{kind} {size} B: no timed (non-warmup) iteration")
        seconds = loop_time(timed)
        rows.append(Row(kind, size, size // DTYPE.itemsize, _TYPE_NAME, _REDOP[kind],
                        seconds * 1e6, algbw(size, seconds), busbw(kind, world, size, seconds),
                        sum(not r.verified for r in group)))
    return rows


# (heading, unit, width): nccl-tests' columns without `root` and the in-place half
_COLUMNS = (("size", "(B)", 12), ("count", "(elements)", 12), ("type", "", 8),
            ("redop", "", 6), ("time", "(us)", 7), ("algbw", "(GB/s)", 8),
            ("busbw", "(GB/s)", 8), ("#wrong", "", 6))


def _time(us: float) -> str:
    """Fewer decimals for longer times, as nccl-tests does, to keep the column 7 wide."""
    decimals = 0 if us >= 10000 else 1 if us >= 100 else 2
    return f"{us:7.{decimals}f}"


def _bw(gbytes_per_s: float) -> str:
    """nccl-tests prints 2 decimals; emulated links run at Mbit/s, which 2 decimals of GB/s
    would show as 0.00, so smaller values get more decimals (never an exponent)."""
    decimals = 2 if gbytes_per_s >= 10 else 4 if gbytes_per_s >= 0.01 else 6
    return f"{gbytes_per_s:.{decimals}f}"


def _line(cells: Iterable[str], lead: str = "") -> str:
    """Cells right-aligned in their columns; a heading's `#` takes the first column's room."""
    widths = [width for *_, width in _COLUMNS]
    widths[0] -= len(lead)
    return (lead + "  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True))).rstrip()


def format_table(rows: list[Row], *, transport: str, world: int) -> str:
    """The nccl-tests table (out-of-place half), headed by the collective, transport and world.
    The trailer gives the total of wrong results and the mean busbw, as nccl-tests does."""
    collectives = {row.collective for row in rows}
    if len(collectives) != 1:
        raise ValueError(f"a table shows one collective, not {sorted(collectives)}")
    lines = [f"# {collectives.pop()} over {transport}, {world} ranks",
             "#",
             _line((c[0] for c in _COLUMNS), "#"),
             _line((c[1] for c in _COLUMNS), "#")]
    lines += [_line((str(r.size), str(r.count), r.type, r.redop, _time(r.time_us),
                     _bw(r.algbw), _bw(r.busbw), str(r.wrong))) for r in rows]
    wrong = sum(r.wrong for r in rows)
    lines += [f"# Wrong results        : {wrong} {'OK' if wrong == 0 else 'FAILED'}",
              f"# Avg bus bandwidth    : {fmean(r.busbw for r in rows):.4f}"]
    return "\n".join(lines) + "\n"
