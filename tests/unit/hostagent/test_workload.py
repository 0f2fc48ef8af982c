"""Inputs, expected results, bit-exact verification and the iteration driver."""
from __future__ import annotations

import asyncio
import itertools
import logging

import numpy as np
import pytest

from hostagent.workloads.collectives import KINDS, Communicator
from hostagent.workloads.iterations import (
    MessageRecord,
    describe_mismatch,
    expected,
    inputs,
    run_iterations,
    verify,
)
from hostagent.workloads.loopback import Flip, LoopbackFabric


def every_input(kind, seed, iteration, world, count):
    return [inputs(kind, seed, iteration, r, world, count) for r in range(world)]


# ---- inputs -----------------------------------------------------------------------------------

def test_inputs_are_deterministic_small_integers():
    a = inputs("all_reduce", 5, 2, 1, 4, 10_000)
    assert a.dtype == np.float32 and a.shape == (10_000,)
    assert np.array_equal(a, inputs("all_reduce", 5, 2, 1, 4, 10_000))
    assert np.array_equal(a, np.round(a)) and (a.min(), a.max()) == (-64, 63)
    for other in [(6, 2, 1), (5, 3, 1), (5, 2, 0)]:  # seed, iteration, rank
        assert np.mean(a != inputs("all_reduce", *other, 4, 10_000)) > 0.9


def test_inputs_into_a_given_array():
    out = np.full(3, np.nan, np.float32)
    assert inputs("all_gather", 1, 0, 2, 3, 11, out=out) is out
    assert np.array_equal(out, inputs("all_gather", 1, 0, 2, 3, 11))
    with pytest.raises(ValueError, match=r"all_reduce inputs of rank 2 are float32\[11\], "
                                         r"not float32\[3\]"):
        inputs("all_reduce", 1, 0, 2, 3, 11, out=out)


def test_input_does_not_depend_on_the_collective_or_count():
    """A rank's element i is the same value whatever it is cut into; all-gather gets a block."""
    whole = inputs("all_reduce", 1, 0, 2, 3, 11)
    assert np.array_equal(inputs("all_to_all", 1, 0, 2, 3, 11), whole)
    assert np.array_equal(inputs("all_reduce", 1, 0, 2, 3, 20)[:11], whole)
    assert np.array_equal(inputs("all_gather", 1, 0, 2, 3, 11), whole[8:11])  # blocks 4, 4, 3


# ---- expected results, recomputed here from the inputs in other ways -------------------------

@pytest.mark.parametrize("world, count", [(1, 5), (3, 11), (4, 16), (8, 3)])
def test_expected_results(world, count):
    send = every_input("all_reduce", 7, 1, world, count)
    total = np.sum(np.array(send, dtype=np.float64), axis=0)
    blocks = [np.array_split(s, world) for s in send]
    for rank in range(world):
        want = {kind: expected(kind, 7, 1, rank, world, count) for kind in KINDS}
        assert np.array_equal(want["all_reduce"], total)
        assert np.array_equal(want["reduce_scatter"], np.array_split(total, world)[rank])
        assert np.array_equal(want["all_gather"],
                              np.concatenate([b[q] for q, b in enumerate(blocks)]))
        assert np.array_equal(want["all_to_all"], np.concatenate([b[rank] for b in blocks]))
        assert all(w.dtype == np.float32 for w in want.values())


def test_all_to_all_is_a_transpose_when_count_divides():
    send = np.array(every_input("all_to_all", 3, 0, 4, 8)).reshape(4, 4, 2)  # rank, block, elt
    for rank in range(4):
        assert np.array_equal(expected("all_to_all", 3, 0, rank, 4, 8), send[:, rank].ravel())


def test_sums_are_exact_at_the_bound():
    """The docstring's claim: 2**18 ranks all at -64, added one by one in float32, are exact
    at every partial sum."""
    partial = np.cumsum(np.full(2**18, -64, np.float32), dtype=np.float32)
    assert np.array_equal(partial, -64 * np.arange(1, 2**18 + 1, dtype=np.float64))


def test_unknown_kind():
    with pytest.raises(ValueError, match="unknown collective 'bcast'"):
        expected("bcast", 0, 0, 0, 2, 4)
    with pytest.raises(ValueError, match="unknown collective"):
        verify("bcast", np.zeros(1, np.float32), np.zeros(1, np.float32))


# ---- verification -------------------------------------------------------------------------------

def test_verify_is_bit_exact():
    want = np.arange(6, dtype=np.float32)
    assert verify("all_reduce", want.copy(), want) == (True, None)
    got = want.copy()
    got[4] = np.nextafter(np.float32(4), np.float32(5))
    got[5] = 0
    assert verify("all_reduce", got, want) == (False, 4)
    zeros = np.zeros(2, np.float32)
    assert verify("all_gather", -zeros, zeros) == (False, 0)  # -0.0 == 0.0, but not bitwise
    assert verify("all_gather", want[:5], want) == (False, 5)
    assert verify("all_gather", want, want[:5]) == (False, 5)
    with pytest.raises(TypeError, match="float32"):
        verify("all_reduce", want.astype(np.float64), want)


def test_mismatch_description():
    want = np.array([1, 2, 3, 4], np.float32)
    got = np.array([1, 2, -3, 5], np.float32)
    assert describe_mismatch("reduce_scatter", got, want, 2) == (
        "reduce_scatter: element 2 is -3.0 (0xc0400000), expected 3.0 (0x40400000); "
        "2 of 4 elements wrong")
    assert describe_mismatch("all_gather", got[:3], want, 3) == (
        "all_gather: 3 elements, expected 4")


# ---- the driver ---------------------------------------------------------------------------------

def drive(world, kind, nbytes, *, iterations=2, warmup=1, gap=0.0, fabric=None):
    """Every rank's records and messages, with a fake clock that ticks once per reading."""
    net = LoopbackFabric(world, **(fabric or {}))
    messages: list[MessageRecord] = []
    ticks = iter(range(10**6))

    async def main():
        ranks = (run_iterations(net.endpoint(r), kind, nbytes, iterations, warmup, gap, 4,
                                lambda: float(next(ticks)), messages=messages)
                 for r in range(world))
        return await asyncio.wait_for(asyncio.gather(*ranks), 10)

    per_rank = asyncio.run(main())
    return [rec for records in per_rank for rec in records], messages


def test_records_and_messages():
    records, messages = drive(3, "all_reduce", 4 * 10)
    assert sorted((r.rank, r.iteration, r.warmup) for r in records) == [
        (rank, it, it < 1) for rank in range(3) for it in range(3)]
    assert all(r.kind == "all_reduce" and r.bytes == 40 and r.verified and r.error is None
               and r.start < r.end for r in records)
    # ring all-reduce: 2 x (world-1) writes per rank and call, all to the right neighbour
    assert len(messages) == 3 * 3 * 4
    for rank in range(3):
        for it in range(3):
            mine = [m for m in messages if (m.rank, m.iteration) == (rank, it)]
            assert [m.peer for m in mine] == [(rank + 1) % 3] * 4
            assert all(m.warmup == (it == 0) and m.retransmits == 0 for m in mine)
            # blocks of 4, 3, 3 elements: reduce-scatter sends all but block `rank`,
            # all-gather all but block rank+1
            sizes = [4, 3, 3]
            assert sum(m.size for m in mine) == 4 * (2 * 10 - sizes[rank] - sizes[(rank + 1) % 3])


def test_compute_gap_separates_calls():
    net = LoopbackFabric(2)

    async def main():
        loop = asyncio.get_running_loop()
        ranks = (run_iterations(net.endpoint(r), "all_gather", 64, 3, 0, 0.01, 0, loop.time)
                 for r in range(2))
        return await asyncio.gather(*ranks)

    for records in asyncio.run(main()):
        assert all(b.start - a.end >= 0.01 for a, b in itertools.pairwise(records))


def test_one_communicator_for_a_sweep():
    net = LoopbackFabric(2)

    async def rank_main(ep):
        comm = Communicator(ep, 16)
        records = []
        for nbytes in (4, 64, 28):
            records += await run_iterations(ep, "reduce_scatter", nbytes, 1, 0, 0, 0,
                                            lambda: 0.0, comm=comm)
        return records

    async def main():
        return await asyncio.gather(*(rank_main(net.endpoint(r)) for r in range(2)))

    records = [rec for recs in asyncio.run(main()) for rec in recs]
    assert len(records) == 6 and all(r.verified for r in records)


def test_driver_rejects_bad_arguments():
    net = LoopbackFabric(2)
    with pytest.raises(ValueError, match="whole number of float32"):
        asyncio.run(run_iterations(net.endpoint(0), "all_reduce", 6, 1, 0, 0, 0, lambda: 0.0))
    comm = Communicator(net.endpoint(1), 4)
    with pytest.raises(ValueError, match="another endpoint"):
        asyncio.run(run_iterations(net.endpoint(0), "all_reduce", 16, 1, 0, 0, 0, lambda: 0.0,
                                   comm=comm))


def test_wrong_byte_is_reported_not_raised(caplog):
    with caplog.at_level(logging.ERROR, logger="hostagent.workloads.iterations"):
        records, _ = drive(2, "all_gather", 4 * 6, iterations=1, warmup=0,
                           fabric={"flip": Flip(0, 1, 0, 1)})
    bad = [r for r in records if not r.verified]
    assert [(r.rank, r.iteration) for r in bad] == [(1, 0)]
    assert bad[0].error.startswith("all_gather: element 0 is ")
    assert "rank 1, iteration 0: all_gather: element 0 is " in caplog.text


def test_any_block_of_an_input_is_the_slice_of_the_whole():
    """Random access into the stream: every block, whatever draws and counter steps it starts
    and ends in, equals that slice of the whole array (what all-gather's and reduce-scatter's
    expected results rely on)."""
    from hostagent.workloads.iterations import _values
    whole = _values(3, 2, 5, 0, 400)
    for start in range(130):
        for stop in (start, start + 1, start + 7, start + 33, start + 200):
            assert np.array_equal(_values(3, 2, 5, start, stop), whole[start:stop]), (start, stop)


def test_expected_shared_by_every_rank_is_computed_once_and_read_only():
    a = expected("all_reduce", 1, 0, 0, 5, 100)
    assert expected("all_reduce", 1, 0, 4, 5, 100) is a  # cached: one computation per process
    assert not a.flags.writeable
    with pytest.raises(ValueError):
        a[0] = 1


# ---- all-reduce's expected sum, made a block at a time inside the event loop ------------------

@pytest.mark.parametrize("kind", KINDS)
def test_expected_async_is_expected(kind, monkeypatch):
    from hostagent.workloads import iterations
    monkeypatch.setattr(iterations, "SUM_STEP", 7)  # many blocks, the last one short
    for world, count in [(1, 5), (3, 50), (4, 64)]:
        for rank in range(world):
            got = asyncio.run(iterations.expected_async(kind, 2, 1, rank, world, count))
            assert np.array_equal(got.view(np.uint32),
                                  expected(kind, 2, 1, rank, world, count).view(np.uint32))


def test_expected_sum_lets_other_hosts_run_and_is_made_once(monkeypatch):
    """While one host's all-reduce sum is being made, the loop keeps turning (another host's
    timers run between blocks), and every host of the process gets the one result."""
    from hostagent.workloads import iterations
    monkeypatch.setattr(iterations, "SUM_STEP", 10)
    made: list[int] = []
    total = iterations._total
    monkeypatch.setattr(iterations, "_total", lambda *a: made.append(1) or total(*a))

    async def main() -> tuple[int, list[np.ndarray]]:
        turns = 0

        async def other_host() -> None:
            nonlocal turns
            while True:
                turns += 1
                await asyncio.sleep(0)

        ticker = asyncio.ensure_future(other_host())
        await asyncio.sleep(0)
        start = turns
        hosts = await asyncio.gather(*(iterations.expected_async("all_reduce", 3, 0, r, 4, 100)
                                       for r in range(4)))
        ticker.cancel()
        return turns - start, hosts

    turns, hosts = asyncio.run(main())
    assert turns >= 9, "the loop turned between the sum's 10 blocks"
    assert len(made) == 10, "one sum for the process's 4 hosts, 10 blocks of it"
    assert all(h is hosts[0] for h in hosts) and not hosts[0].flags.writeable
