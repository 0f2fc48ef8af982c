"""Collectives over the real transports: every rank's QPs (MrcQP or RoceQP) on the simulated
network, with loss, trims and (for MRC) a dead path, every result verified bit for bit."""
from __future__ import annotations

import asyncio
import random

import pytest

from hostagent.protocol.dcqcn import REFERENCE_RTT
from hostagent.protocol.evs import EVPolicy, EVSet
from hostagent.protocol.mrc import MrcQP
from hostagent.protocol.qp import QPConfig
from hostagent.protocol.rocev2 import RoceQP
from hostagent.workloads.collectives import KINDS
from hostagent.workloads.iterations import run_iterations

from .simnet import PathModel, SimFabric
from .test_transport import TABLE

CFG = QPConfig(mss=256, init_cwnd=8 * 1024, max_cwnd=32 * 1024, timeout=0.002,
               linear_cnt=7, exp_cnt=25, base_rtt=REFERENCE_RTT)
EMPTY = memoryview(bytearray(0))


def mrc_pair(i: int, j: int):
    pol = EVPolicy(probe_interval=0.002)
    return (MrcQP(j, i, EMPTY, CFG, EVSet.build(TABLE, pol, random.Random(i * 31 + j)), i),
            MrcQP(i, j, EMPTY, CFG, EVSet.build(TABLE, pol, random.Random(j * 31 + i)), j))


def roce_pair(i: int, j: int):
    return RoceQP(j, i, EMPTY, CFG, i), RoceQP(i, j, EMPTY, CFG, j)


def lossy(dead_ev: int | None):
    def shape(net) -> None:
        for side in ("a", "b"):
            for ev in range(8):
                net.paths[(side, ev)] = PathModel(loss=0.02, trim=0.02, jitter=100e-6,
                                                  dead=side == "a" and ev == dead_ev)
    return shape


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("transport", ["mrc", "rocev2"])
def test_collectives_verified_over_the_transports(kind, transport):
    world, size = 4, 4 * 3001  # not a multiple of the world, nor of the packet size
    fabric = SimFabric(world, mrc_pair if transport == "mrc" else roce_pair, seed=5,
                       path=lossy(dead_ev=2 if transport == "mrc" else None))

    async def main():
        return await fabric.run(run_iterations(fabric.endpoint(r), kind, size, 2, 1, 0.0, 7,
                                               lambda: fabric.now) for r in range(world))

    records = [rec for per_rank in asyncio.run(main()) for rec in per_rank]
    assert len(records) == world * 3
    assert [r.error for r in records if not r.verified] == []
    retransmits = sum(qp.counters.retransmits for peers in fabric.qps.values()
                      for qp in peers.values())
    assert retransmits > 0, "the network lost packets: the transports recovered them"
