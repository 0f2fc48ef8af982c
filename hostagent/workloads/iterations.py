"""What every rank puts into a collective, what it must get back, and the timed iteration loop.

Values are small integers, -64..63, held as float32. Any partial sum of them over at most 2**18
ranks (collectives allow 2**15) is an integer of magnitude at most 2**24, which float32 holds
exactly, so a sum comes out the same in any order: the ring's, numpy's, or the integer sum used
here for the expected result. Verification can therefore compare bits, not allow a tolerance,
and one wrong byte cannot hide inside an epsilon.

Element i of rank r's array is byte i of a counter-based random stream (Philox4x64, keyed by
seed, iteration and rank), halved to -64..63. A counter-based stream has random access, so any
block of any rank's input can be produced on its own: the expected result of all-gather,
reduce-scatter or all-to-all costs one pass over `count` elements (all-reduce's, one per rank),
and nothing of the algorithm is reused to compute it. The stream is generated in C (numpy's
Philox), 8 elements per 64-bit draw: an all-reduce's expected result over 64 ranks of 1 MiB takes
about 16 ms here, against 65 ms for the per-element hash used before.

All-reduce and all-gather give every rank the same result: `expected` keeps the last few of
those, so a process serving many hosts (hostagent/runtime/pooled.py) computes each once per
iteration, not once per host. What it returns is read-only.
"""
from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hostagent.protocol.endpoint import Endpoint, MessageStats
from hostagent.workloads.algorithms import Algorithm
from hostagent.workloads.collectives import DTYPE, KINDS, Communicator, Kind

log = logging.getLogger(__name__)

VALUE_RANGE = 128  # values are -64..63
_DRAW_BYTES = 8  # elements per 64-bit draw
_DRAWS_PER_BLOCK = 4  # Philox4x64 yields four draws per counter step


def _values(seed: int, iteration: int, rank: int, start: int, stop: int) -> np.ndarray:
    """Rank `rank`'s elements start..stop-1 in `iteration`, as int8 in -64..63."""
    if stop <= start:
        return np.zeros(0, dtype=np.int8)
    gen = np.random.Philox(key=np.array([seed, iteration << 32 | rank], dtype=np.uint64))
    first, last = start // _DRAW_BYTES, (stop - 1) // _DRAW_BYTES
    gen.advance(first // _DRAWS_PER_BLOCK)  # counter steps; the first few draws are skipped
    skip = first % _DRAWS_PER_BLOCK
    draws = gen.random_raw(skip + last - first + 1)[skip:].astype("<u8", copy=False)
    lo = start - first * _DRAW_BYTES
    values = draws.view(np.int8)[lo:lo + stop - start]
    return np.right_shift(values, 1, out=values)  # in the draws' own bytes: no copy


def _bounds(count: int, world: int) -> list[int]:
    """Where each rank's block starts, and `count`: the partition the collectives promise
    (np.array_split's: the first count % world blocks have one element more)."""
    base, extra = divmod(count, world)
    bounds = [0]
    for block in range(world):
        bounds.append(bounds[-1] + base + (block < extra))
    return bounds


def inputs(kind: Kind, seed: int, iteration: int, rank: int, world: int,
           count: int, out: np.ndarray | None = None) -> np.ndarray:
    """What rank `rank` passes in: its block for all-gather, its whole array otherwise; into
    `out` (float32, that size) when given, which a loop of calls reuses (a fresh array of
    megabytes costs its page faults again at every call)."""
    if kind == "all_gather":
        bounds = _bounds(count, world)
        values = _values(seed, iteration, rank, bounds[rank], bounds[rank + 1])
    else:
        values = _values(seed, iteration, rank, 0, count)
    if out is None:
        return values.astype(DTYPE)
    if out.dtype != DTYPE or out.shape != values.shape:
        raise ValueError(f"{kind} inputs of rank {rank} are float32[{values.size}], not "
                         f"{out.dtype}{list(out.shape)}")
    np.copyto(out, values)
    return out


def expected(kind: Kind, seed: int, iteration: int, rank: int, world: int,
             count: int) -> np.ndarray:
    """What rank `rank` must get back, from every rank's inputs with integer arithmetic."""
    if kind in ("all_reduce", "all_gather"):
        return _same_for_all(kind, seed, iteration, world, count)
    bounds = _bounds(count, world)
    lo, hi = bounds[rank], bounds[rank + 1]
    if kind == "reduce_scatter":
        result = _total(seed, iteration, world, lo, hi)
    elif kind == "all_to_all":
        result = np.concatenate([_values(seed, iteration, q, lo, hi) for q in range(world)])
    else:
        raise ValueError(f"unknown collective {kind!r}; known: {', '.join(KINDS)}")
    return result.astype(DTYPE)


def _total(seed: int, iteration: int, world: int, lo: int, hi: int) -> np.ndarray:
    """Every rank's elements lo..hi-1 summed as integers."""
    acc = np.zeros(hi - lo, dtype=np.int32)
    for q in range(world):
        acc += _values(seed, iteration, q, lo, hi)
    return acc


@functools.lru_cache(maxsize=2)  # this iteration and the last: hosts of a process drift apart
def _same_for_all(kind: Kind, seed: int, iteration: int, world: int,
                  count: int) -> np.ndarray:
    if kind == "all_reduce":
        result = _total(seed, iteration, world, 0, count).astype(DTYPE)
    else:
        bounds = _bounds(count, world)
        result = np.concatenate([_values(seed, iteration, q, bounds[q], bounds[q + 1])
                                 for q in range(world)]).astype(DTYPE)
    result.flags.writeable = False
    return result


SUM_STEP = 1 << 16  # elements of all-reduce's expected sum made between yields to the loop


async def expected_async(kind: Kind, seed: int, iteration: int, rank: int, world: int,
                         count: int) -> np.ndarray:
    """`expected`, for a rank inside an event loop it shares. All-reduce's result, the sum of
    every rank's input (world x count elements: for 16 ranks of 4 MiB, 15-30 ms of numpy), is
    made `SUM_STEP` elements at a time, yielding to the loop in between: in a pooled process
    other hosts are still in their timed collective, and their timers would wait for it all
    (longer than a port's queue lasts at 10 Mbit/s). The hosts of a process share one sum."""
    if kind != "all_reduce":
        return expected(kind, seed, iteration, rank, world, count)
    key = (asyncio.get_running_loop(), seed, iteration, world, count)  # a future is its loop's
    if key not in _SUMS:
        _SUMS[key] = asyncio.ensure_future(_sum_in_steps(seed, iteration, world, count))
        while len(_SUMS) > 2:  # this iteration's and the last: hosts of a process drift apart
            del _SUMS[next(iter(_SUMS))]
    return await asyncio.shield(_SUMS[key])  # a host stopped while waiting stops no other's


async def _sum_in_steps(seed: int, iteration: int, world: int, count: int) -> np.ndarray:
    result = np.empty(count, dtype=DTYPE)
    for lo in range(0, count, SUM_STEP):
        hi = min(count, lo + SUM_STEP)
        result[lo:hi] = _total(seed, iteration, world, lo, hi)
        await asyncio.sleep(0)
    result.flags.writeable = False
    return result


_SUMS: dict[tuple[asyncio.AbstractEventLoop, int, int, int, int], asyncio.Future[np.ndarray]] = {}


def verify(kind: Kind, result: np.ndarray, expected: np.ndarray) -> tuple[bool, int | None]:
    """Bit-exact comparison: (True, None), or (False, index of the first wrong element; the
    shorter length if the lengths differ). `kind` is checked, so a misspelt one fails loudly."""
    if kind not in KINDS:
        raise ValueError(f"unknown collective {kind!r}; known: {', '.join(KINDS)}")
    if result.dtype != DTYPE or expected.dtype != DTYPE:
        raise TypeError(f"{kind}: compares float32 arrays, not {result.dtype} with "
                        f"{expected.dtype}")
    common = min(result.size, expected.size)
    wrong = np.flatnonzero(result[:common].view(np.uint32) != expected[:common].view(np.uint32))
    if wrong.size:
        return False, int(wrong[0])
    if result.size != expected.size:
        return False, common
    return True, None


def describe_mismatch(kind: Kind, result: np.ndarray, expected: np.ndarray, index: int) -> str:
    """One line naming the first wrong element, its value and bits, and how many are wrong."""
    if index >= min(result.size, expected.size):
        return f"{kind}: {result.size} elements, expected {expected.size}"
    got, want = result[index], expected[index]
    wrong = np.count_nonzero(result.view(np.uint32) != expected.view(np.uint32))
    return (f"{kind}: element {index} is {float(got)} (0x{int(got.view(np.uint32)):08x}), "
            f"expected {float(want)} (0x{int(want.view(np.uint32)):08x}); "
            f"{wrong} of {expected.size} elements wrong")


@dataclass(frozen=True)
class IterationRecord:
    """One rank's view of one collective call (a row of `iterations.parquet`)."""

    kind: str
    rank: int
    iteration: int
    warmup: bool
    start: float  # clock() seconds, just before the call
    end: float  # just after it returned, before verification
    bytes: int  # size of the whole array (nccl-tests' size)
    verified: bool
    error: str | None

    @classmethod
    def of_rows(cls, rows: Iterable[Mapping[str, Any]]) -> list[IterationRecord]:
        """Records from table rows (iterations.parquet's, or result.json's), extra columns
        such as `host` left out."""
        names = cls.__dataclass_fields__
        return [cls(**{k: row[k] for k in names}) for row in rows]


@dataclass(frozen=True)
class MessageRecord:
    """One write of one rank (a row of `messages.parquet`), tagged with its call."""

    rank: int
    iteration: int
    warmup: bool
    peer: int
    size: int
    start: float  # time.time(), as the transport reports
    end: float
    retransmits: int
    trims: int
    evs_used: list[int] = field(default_factory=list)

    @classmethod
    def of(cls, rank: int, iteration: int, warmup: bool, stats: MessageStats) -> MessageRecord:
        return cls(rank, iteration, warmup, stats.peer, stats.size, stats.start, stats.end,
                   stats.retransmits, stats.trims, list(stats.evs_used))


async def run_iterations(endpoint: Endpoint, kind: Kind, nbytes: int, iterations: int,
                         warmup: int, compute_gap_s: float, seed: int,
                         clock: Callable[[], float], *, comm: Communicator | None = None,
                         messages: list[MessageRecord] | None = None,
                         records: list[IterationRecord] | None = None,
                         algorithm: Algorithm | None = None) -> list[IterationRecord]:
    """`warmup` then `iterations` calls (numbered 0.., warmup first), each verified.

    `compute_gap_s` is slept between calls, standing for the compute a training step does
    between collectives. Inputs are made before `start` and checked after `end`, so neither is
    timed. A wrong result does not stop the run: its record says verified=False and `error`
    names the element, and it is logged as an error. Writes are appended to `messages` when it
    is given, and iteration records to `records` as each completes (so a caller that times out
    keeps those that did). Without `comm` a Communicator sized for `nbytes` is built, which
    registers the endpoint's region: pass one Communicator (of the largest size) to every size
    of a sweep. `algorithm` is the collective's (its default when None), never `auto`: the
    caller chooses per size (algorithms.choose).
    """
    count, remainder = divmod(nbytes, DTYPE.itemsize)
    if remainder:
        raise ValueError(f"nbytes {nbytes} is not a whole number of float32 elements")
    if comm is None:
        comm = Communicator(endpoint, count, trees=algorithm == "tree")
    elif comm.endpoint is not endpoint:
        raise ValueError("comm was built on another endpoint")
    rank, world = endpoint.rank, endpoint.world
    records = [] if records is None else records
    # One input array for every call: a fresh one of megabytes would bring in its pages again
    # at each call (numpy asks for huge pages, which the kernel compacts for). The result is
    # read where the collective left it, before the next call (Communicator.run_in_place).
    send = np.empty(comm.input_size(kind, count), dtype=DTYPE)
    for iteration in range(warmup + iterations):
        if iteration and compute_gap_s > 0:
            await asyncio.sleep(compute_gap_s)
        inputs(kind, seed, iteration, rank, world, count, out=send)
        start = clock()
        result = await comm.run_in_place(kind, send, count, algorithm)
        end = clock()
        want = await expected_async(kind, seed, iteration, rank, world, count)
        ok, bad = verify(kind, result, want)
        error = None if bad is None else describe_mismatch(kind, result, want, bad)
        if error:
            log.error("rank %d, iteration %d: %s", rank, iteration, error)
        is_warmup = iteration < warmup
        records.append(IterationRecord(kind, rank, iteration, is_warmup, start, end, nbytes, ok,
                                       error))
        stats = comm.take_messages()
        if messages is not None:
            messages.extend(MessageRecord.of(rank, iteration, is_warmup, s) for s in stats)
    return records
