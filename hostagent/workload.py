"""What every rank puts into a collective, what it must get back, and the timed iteration loop.

Values are small integers, -64..63, held as float32. Any partial sum of them over at most 2**18
ranks (collectives allow 2**15) is an integer of magnitude at most 2**24, which float32 holds
exactly, so a sum comes out the same in any order: the ring's, numpy's, or the integer sum used
here for the expected result. Verification can therefore compare bits, not allow a tolerance,
and one wrong byte cannot hide inside an epsilon.

Element i of rank r's array is a hash of (seed, iteration, rank, i), not a draw from a stream, so
any block of any rank's input can be produced on its own: the expected result of all-gather,
reduce-scatter or all-to-all costs one pass over `count` elements (all-reduce's, one per rank),
and nothing of the algorithm is reused to compute it.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .collectives import DTYPE, KINDS, Communicator, Kind
from .endpoint import Endpoint, MessageStats

log = logging.getLogger(__name__)

VALUE_RANGE = 128  # values are -64..63
_GAMMA = np.uint64(0x9E3779B97F4A7C15)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a bijection on uint64 whose every output bit depends on all
    input bits (numpy's uint64 array arithmetic wraps, as the algorithm wants)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _values(seed: int, iteration: int, rank: int, index: np.ndarray) -> np.ndarray:
    """Rank `rank`'s elements at `index` in `iteration`, as int64 in -64..63."""
    key = np.zeros(1, dtype=np.uint64)
    for part in (seed, iteration, rank):
        key = _mix(key ^ np.uint64(part))
    bits = _mix(index.astype(np.uint64) * _GAMMA + key) >> np.uint64(57)  # top 7 bits
    return bits.astype(np.int64) - VALUE_RANGE // 2


def _blocks(count: int, world: int) -> list[np.ndarray]:
    """The indexes of each rank's block: the partition the collectives promise (array_split)."""
    return np.array_split(np.arange(count, dtype=np.int64), world)


def inputs(kind: Kind, seed: int, iteration: int, rank: int, world: int,
           count: int) -> np.ndarray:
    """What rank `rank` passes in: its block for all-gather, its whole array otherwise."""
    index = _blocks(count, world)[rank] if kind == "all_gather" else np.arange(count)
    return _values(seed, iteration, rank, index).astype(DTYPE)


def expected(kind: Kind, seed: int, iteration: int, rank: int, world: int,
             count: int) -> np.ndarray:
    """What rank `rank` must get back, from every rank's inputs with integer arithmetic."""
    blocks = _blocks(count, world)

    def total(index: np.ndarray) -> np.ndarray:
        return sum((_values(seed, iteration, q, index) for q in range(world)),
                   np.zeros(len(index), dtype=np.int64))

    if kind == "all_reduce":
        result = total(np.arange(count))
    elif kind == "reduce_scatter":
        result = total(blocks[rank])
    elif kind == "all_gather":
        result = np.concatenate([_values(seed, iteration, q, blocks[q]) for q in range(world)])
    elif kind == "all_to_all":
        result = np.concatenate([_values(seed, iteration, q, blocks[rank])
                                 for q in range(world)])
    else:
        raise ValueError(f"unknown collective {kind!r}; known: {', '.join(KINDS)}")
    return result.astype(DTYPE)


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
                         records: list[IterationRecord] | None = None) -> list[IterationRecord]:
    """`warmup` then `iterations` calls (numbered 0.., warmup first), each verified.

    `compute_gap_s` is slept between calls, standing for the compute a training step does
    between collectives. Inputs are made before `start` and checked after `end`, so neither is
    timed. A wrong result does not stop the run: its record says verified=False and `error`
    names the element, and it is logged as an error. Writes are appended to `messages` when it
    is given, and iteration records to `records` as each completes (so a caller that times out
    keeps those that did). Without `comm` a Communicator sized for `nbytes` is built, which
    registers the endpoint's region: pass one Communicator (of the largest size) to every size
    of a sweep.
    """
    count, remainder = divmod(nbytes, DTYPE.itemsize)
    if remainder:
        raise ValueError(f"nbytes {nbytes} is not a whole number of float32 elements")
    if comm is None:
        comm = Communicator(endpoint, count)
    elif comm.endpoint is not endpoint:
        raise ValueError("comm was built on another endpoint")
    rank, world = endpoint.rank, endpoint.world
    records = [] if records is None else records
    for iteration in range(warmup + iterations):
        if iteration and compute_gap_s > 0:
            await asyncio.sleep(compute_gap_s)
        send = inputs(kind, seed, iteration, rank, world, count)
        start = clock()
        result = await comm.run(kind, send, count)
        end = clock()
        want = expected(kind, seed, iteration, rank, world, count)
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
