"""Collectives over the in-memory loopback: every kind, world and awkward size, bit-exact.

The reordered fabric cuts writes into 7-byte pieces (not even whole float32 elements), lands
them in a seeded random order and lets later writes overtake earlier ones, so a collective that
reads a landing slot before its imm, or reuses one too early, fails here.
"""
from __future__ import annotations

import asyncio
import gc
import logging
import random
import time
from collections.abc import Awaitable, Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostagent.workloads.algorithms import AVAILABLE
from hostagent.workloads.collectives import KINDS, Communicator, block_bounds, registered_region
from hostagent.workloads.iterations import IterationRecord, expected, inputs, run_iterations
from hostagent.workloads.loopback import Flip, LoopbackEndpoint, LoopbackFabric

WORLDS = (1, 2, 3, 4, 8)
COUNTS = (0, 1, 5, 8, 37, 256)  # empty, below every world, not divisible, divisible
FABRICS = {"in-order": {}, "reordered": {"reorder": True, "chunk": 7, "seed": 3}}
TIMEOUT = 10.0  # a lost imm shows as a timeout, not a hung test run
# every collective with every algorithm it has; trees in chunks of 3 elements, so even these
# small arrays climb and descend in many pipelined chunks
CASES = [(kind, algorithm) for kind in KINDS for algorithm in AVAILABLE[kind]]
TREE_CHUNK = 3


def run_ranks(world: int, per_rank: Callable[[LoopbackEndpoint], Awaitable], **fabric) -> list:
    """Every rank's coroutine on one loopback fabric; their results in rank order."""
    net = LoopbackFabric(world, **fabric)

    async def main():
        ranks = (per_rank(net.endpoint(rank)) for rank in range(world))
        return await asyncio.wait_for(asyncio.gather(*ranks), TIMEOUT)

    return asyncio.run(main())


def iterate(world: int, kind: str, count: int, *, iterations: int = 2, warmup: int = 1,
            data_seed: int = 0, gap: Callable[[int], float] = lambda rank: 0.0,
            algorithm: str | None = None, **fabric) -> list[IterationRecord]:
    def comm(ep: LoopbackEndpoint) -> Communicator:
        return Communicator(ep, count, trees=algorithm == "tree", tree_chunk=TREE_CHUNK)

    per_rank = run_ranks(world, lambda ep: run_iterations(
        ep, kind, 4 * count, iterations, warmup, gap(ep.rank), data_seed, time.perf_counter,
        comm=comm(ep), algorithm=algorithm), **fabric)
    return [record for records in per_rank for record in records]


def assert_all_verified(records: list[IterationRecord], world: int, calls: int) -> None:
    assert len(records) == world * calls
    assert [r.error for r in records if not r.verified] == []


# ---- every collective, world and size -------------------------------------------------------

@pytest.mark.parametrize("fabric", FABRICS)
@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize(("kind", "algorithm"), CASES)
def test_collective_verified(kind, algorithm, world, count, fabric):
    records = iterate(world, kind, count, algorithm=algorithm, **FABRICS[fabric])
    assert_all_verified(records, world, calls=3)


@given(world=st.integers(1, 12), count=st.integers(0, 200), seed=st.integers(0, 2**32),
       case=st.sampled_from(CASES), reorder=st.booleans(),
       chunk=st.one_of(st.none(), st.integers(1, 40)))
@settings(max_examples=80, deadline=None)
def test_collective_verified_property(world, count, seed, case, reorder, chunk):
    kind, algorithm = case
    records = iterate(world, kind, count, iterations=2, warmup=0, data_seed=seed,
                      algorithm=algorithm, reorder=reorder, chunk=chunk, seed=seed)
    assert_all_verified(records, world, calls=2)


@pytest.mark.parametrize(("kind", "algorithm"), CASES)
def test_skewed_ranks(kind, algorithm):
    """Odd ranks compute longer between calls, so even ranks run ahead into the next call."""
    records = iterate(5, kind, 23, iterations=4, gap=lambda rank: 0.002 * (rank % 2),
                      algorithm=algorithm, **FABRICS["reordered"])
    assert_all_verified(records, 5, calls=5)


def test_mixed_calls_on_one_communicator():
    """Kinds and sizes in turn, with random stalls, reuse both halves of the region."""
    world, capacity = 4, 50
    plan = [(kind, count) for count in (50, 3, 17) for kind in KINDS] * 2

    async def rank_main(ep):
        comm = Communicator(ep, capacity)
        stall = random.Random(ep.rank)
        for call, (kind, count) in enumerate(plan):
            for _ in range(stall.randint(0, 5)):
                await asyncio.sleep(0)
            got = await comm.run(kind, inputs(kind, 9, call, ep.rank, world, count), count)
            np.testing.assert_array_equal(got, expected(kind, 9, call, ep.rank, world, count))
        return len(plan)

    assert run_ranks(world, rank_main, **FABRICS["reordered"]) == [len(plan)] * world


def test_result_shapes():
    """nccl's contract, extended to any count: rank r gets block r (array_split) of the sum for
    reduce-scatter, and block r of every rank, in rank order, for all-to-all."""
    world, count = 3, 10  # blocks of 4, 3, 3

    async def rank_main(ep):
        comm = Communicator(ep, count)
        sizes = [len(await comm.run(k, inputs(k, 0, 0, ep.rank, world, count), count))
                 for k in KINDS]
        assert sizes == [comm.output_size(k, count) for k in KINDS]
        return sizes

    assert run_ranks(world, rank_main) == [[10, 10, 4, 12], [10, 10, 3, 9], [10, 10, 3, 9]]


def test_result_into_a_given_array():
    """`out` gets what a fresh result would hold, for every kind, and is what `run` returns;
    one `out` serves calls whose region halves alternate."""
    world, count = 3, 10

    async def rank_main(ep):
        comm = Communicator(ep, count)
        for call, kind in enumerate(KINDS * 2):
            out = np.full(comm.output_size(kind, count), np.nan, np.float32)
            got = await comm.run(kind, inputs(kind, 4, call, ep.rank, world, count), count, out)
            assert got is out
            np.testing.assert_array_equal(out, expected(kind, 4, call, ep.rank, world, count))

    run_ranks(world, rank_main)


def test_result_in_place_is_the_regions_own_read_only_view():
    """`run_in_place` gives what `run` would, for every kind and both halves of the region, as
    a read-only view of the region itself (nothing copied), intact until the next call."""
    world, count = 3, 10

    async def rank_main(ep):
        comm = Communicator(ep, count)
        for call, kind in enumerate(KINDS * 2):
            got = await comm.run_in_place(kind, inputs(kind, 4, call, ep.rank, world, count),
                                          count)
            assert np.shares_memory(got, comm._region) and not got.flags.writeable
            for _ in range(3):  # the peers go on into the next call meanwhile
                await asyncio.sleep(0)
            np.testing.assert_array_equal(got, expected(kind, 4, call, ep.rank, world, count))

    run_ranks(world, rank_main, **FABRICS["reordered"])


def test_registered_region_has_its_pages():
    """Writing a fresh region faults in no page (a plain np.zeros of the same size does)."""
    import resource

    def faults_writing(array: np.ndarray) -> int:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        array[:] = 1
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

    elements = 10 << 20  # 40 MiB: above glibc's largest mmap threshold, so mapped afresh
    assert faults_writing(np.zeros(elements, np.float32)) > 4
    assert faults_writing(registered_region(elements)) <= 1


def test_block_bounds_match_array_split():
    for world in range(1, 10):
        for count in range(30):
            sizes = [len(b) for b in np.array_split(np.arange(count), world)]
            assert np.diff(block_bounds(count, world)).tolist() == sizes


# ---- corruption is loud ----------------------------------------------------------------------

def test_flipped_byte_in_all_to_all_names_the_element(caplog):
    """Rank 1's first write to rank 2 is its block 2, kept by rank 2 at 1 x 3 elements."""
    with caplog.at_level(logging.ERROR):
        records = iterate(4, "all_to_all", 12, iterations=1, warmup=0, flip=Flip(1, 2, 0, 0))
    bad = [r for r in records if not r.verified]
    assert [(r.rank, r.iteration) for r in bad] == [(2, 0)]
    assert bad[0].error.startswith("all_to_all: element 3 is ")
    assert "expected" in bad[0].error and "1 of 12 elements wrong" in bad[0].error
    assert "rank 2, iteration 0: all_to_all: element 3" in caplog.text


@pytest.mark.parametrize("kind", KINDS)
def test_flipped_byte_fails_verification(kind):
    """A sign-and-exponent byte flipped in rank 0's first write to rank 1, in the first call."""
    records = iterate(4, kind, 40, iterations=1, warmup=1, flip=Flip(0, 1, 0, 3),
                      **FABRICS["reordered"])
    bad = [r for r in records if not r.verified]
    assert bad and {r.iteration for r in bad} == {0}
    assert all(r.error.startswith(f"{kind}: element ") for r in bad)
    assert all(r.verified for r in records if r.iteration == 1)


# ---- the communicator's contract --------------------------------------------------------------

def test_communicator_rejects_bad_calls():
    async def rank_main(ep):
        comm = Communicator(ep, 8)
        assert comm.half == (2 * 2 - 1) * 4
        with pytest.raises(ValueError, match="capacity"):
            await comm.run("all_reduce", np.zeros(9, np.float32), 9)
        with pytest.raises(ValueError, match=r"takes float32\[8\], not float64\[8\]"):
            await comm.run("all_reduce", np.zeros(8), 8)
        with pytest.raises(ValueError, match=r"takes float32\[4\]"):
            await comm.run("all_gather", np.zeros(8, np.float32), 8)
        with pytest.raises(ValueError, match="unknown collective"):
            await comm.run("broadcast", np.zeros(8, np.float32), 8)
        with pytest.raises(ValueError, match=r"returns float32\[4\], not float32\[8\]"):
            await comm.run("reduce_scatter", np.zeros(8, np.float32), 8,
                           np.zeros(8, np.float32))

    run_ranks(2, rank_main)


def test_one_call_at_a_time():
    async def rank_main(ep):
        comm = Communicator(ep, 4)
        first = asyncio.ensure_future(comm.run("all_reduce", np.ones(4, np.float32), 4))
        await asyncio.sleep(0)
        with pytest.raises(RuntimeError, match="one collective at a time"):
            await comm.run("all_reduce", np.ones(4, np.float32), 4)
        return (await first).tolist()

    assert run_ranks(2, rank_main) == [[2.0] * 4] * 2


def test_messages_are_recorded_per_write():
    async def rank_main(ep):
        comm = Communicator(ep, 12)
        await comm.run("all_reduce", np.ones(12, np.float32), 12)
        first = comm.take_messages()
        return [(m.peer, m.size) for m in first], comm.take_messages()

    (sent, rest), *_ = run_ranks(3, rank_main)
    assert sent == [(1, 16)] * 4 and rest == []  # 2 x (3-1) steps of one 4-element block


# ---- the loopback's own semantics -------------------------------------------------------------

def test_imm_waits_for_every_earlier_write():
    """A big write without imm, then a small one with: the small one lands first, but its imm
    fires only when the big one has landed too."""
    net = LoopbackFabric(2, reorder=True, chunk=4, seed=1)
    sender, receiver = net.endpoint(0), net.endpoint(1)
    landing = bytearray(1024)
    receiver.register(memoryview(landing))
    big, small = bytes(range(256)) * 3, b"\xaa" * 8
    done = []

    async def write(data, offset, imm=None):
        await sender.write(1, memoryview(data), offset, imm)
        done.append(len(data))

    async def receive():
        await receiver.wait_imm(0, 7)
        return bytes(landing[:len(big)]), bytes(landing[1000:1008])

    async def main():
        return await asyncio.gather(receive(), write(big, 0), write(small, 1000, 7))

    (seen_big, seen_small), *_ = asyncio.run(main())
    assert done == [len(small), len(big)]  # the later write completed first
    assert seen_big == big and seen_small == small


def test_imm_before_or_after_the_wait_and_per_sender():
    net = LoopbackFabric(3)
    for rank in range(3):
        net.endpoint(rank).register(memoryview(bytearray(8)))

    async def main():
        await net.endpoint(0).write(2, memoryview(b"ab"), 0, imm=5)  # lands before the wait
        await net.endpoint(2).wait_imm(0, 5)
        waiting = asyncio.ensure_future(net.endpoint(2).wait_imm(1, 6))
        await net.endpoint(0).write(2, memoryview(b"cd"), 2, imm=6)  # right imm, wrong sender
        await asyncio.sleep(0.01)
        assert not waiting.done()
        await net.endpoint(1).write(2, memoryview(b"ef"), 4, imm=6)
        await asyncio.wait_for(waiting, TIMEOUT)

    asyncio.run(main())


def test_write_waits_for_the_peer_to_register():
    net = LoopbackFabric(2)
    landing = bytearray(4)

    async def main():
        write = asyncio.ensure_future(net.endpoint(0).write(1, memoryview(b"xyzw"), 0))
        await asyncio.sleep(0)
        net.endpoint(1).register(memoryview(landing))
        return await asyncio.wait_for(write, TIMEOUT)

    stats = asyncio.run(main())
    assert landing == b"xyzw" and (stats.peer, stats.size) == (1, 4) and stats.end >= stats.start


@pytest.mark.parametrize("offset", [-1, 5, 100])
def test_write_outside_the_peer_buffer_is_an_error(offset):
    net = LoopbackFabric(2)
    net.endpoint(1).register(memoryview(bytearray(8)))
    with pytest.raises(ValueError, match=r"rank 0 -> rank 1: a write of 4 B at offset "
                                         rf"{offset} falls outside rank 1's 8-byte buffer"):
        asyncio.run(net.endpoint(0).write(1, memoryview(b"abcd"), offset))


def test_loopback_rejects_misuse():
    net = LoopbackFabric(2)
    ep = net.endpoint(0)
    ep.register(memoryview(bytearray(4)))
    with pytest.raises(RuntimeError, match="twice"):
        ep.register(memoryview(bytearray(4)))
    with pytest.raises(ValueError, match="writable"):
        net.endpoint(1).register(memoryview(b"read-only"))
    for peer in (0, 2, -1):
        with pytest.raises(ValueError, match="is not a peer"):
            asyncio.run(ep.write(peer, memoryview(b"a"), 0))
    with pytest.raises(ValueError, match="32 bits"):
        asyncio.run(ep.write(1, memoryview(b"a"), 0, imm=2**32))
    with pytest.raises(ValueError, match="chunk"):
        LoopbackFabric(2, chunk=0)


# ---- a call that ends early --------------------------------------------------------------------

def test_call_ended_early_cancels_its_writes():
    """Rank 1 never joins, so rank 0's write to it waits for its buffer and rank 0's wait for
    rank 1's imm never ends. When the call is cancelled (a stop, a deadline), the write must go
    with it, not stay behind in the loop sending into a run that has ended."""
    net = LoopbackFabric(2)

    async def main():
        comm = Communicator(net.endpoint(0), 8)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(comm.run("all_reduce", np.ones(8, np.float32), 8), 0.05)
        await asyncio.sleep(0)  # a cancelled task finishes on its next step
        return [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]

    assert asyncio.run(main()) == []


def test_call_ended_early_consumes_its_failed_writes(caplog):
    """Rank 1 registers a buffer too small for rank 0's block, so rank 0's write fails while
    rank 0 waits for rank 1's imm. The call's own error (here a timeout) says how it ended; the
    write's error must not surface later as asyncio's 'exception was never retrieved', after
    the agent's last log line."""
    net = LoopbackFabric(2)
    net.endpoint(1).register(memoryview(bytearray(4)))

    async def main():
        comm = Communicator(net.endpoint(0), 8)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(comm.run("all_reduce", np.ones(8, np.float32), 8), 0.05)

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        asyncio.run(main())
        gc.collect()  # asyncio reports an unretrieved exception when the task is collected
    assert [r.getMessage() for r in caplog.records if "never retrieved" in r.getMessage()] == []


def test_a_tree_whose_chunks_would_overflow_the_step_numbering_is_refused():
    """imm steps are 16 bits, 4 a chunk: 2**14 chunks of at least 32 KiB (8,192 elements) per
    tree's half is the first count refused, before any region is made; one chunk fewer passes
    that check (and fails only on the too-small region given here)."""
    ep = LoopbackFabric(2).endpoint(0)
    with pytest.raises(ValueError, match="too large for a tree all-reduce"):
        Communicator(ep, 2 * 2**14 * 8192, trees=True)
    with pytest.raises(ValueError, match="region must be"):
        Communicator(ep, 2 * (2**14 - 1) * 8192, trees=True, region=np.zeros(1, np.float32))
