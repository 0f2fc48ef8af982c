"""The shortest time one iteration of a collective can take on the fabric, latency included
(pure).

The bandwidth ideal (`Scenario.ideal_busbw`: a rank's planes at line rate) ignores latency,
which is right for a fabric whose links have none and wrong in the real frame, where a 1 MiB
all-reduce over 8 ranks spends about as long crossing the hops as serializing its bytes. A
share of that ideal then says as much about the hop latency as about the transport.

This ideal is a lower bound for the agents' ring (hostagent/workloads/collectives.py): in step
s every rank writes one block (size / world bytes) to its right neighbour, and starts step
s + 1 once its left neighbour's block of step s has arrived whole and its own NIC has sent its
block of step s. A block's last byte arrives its serialization at the rank's rate (planes x
the host link's rate, as the bandwidth ideal) after the block starts, plus the pair's one-way
latency (every link's hop latency and both NICs') and the store-and-forward of one packet on
every link after the first. Neighbours on one leaf cross 2 links, others 4, so the chain of
waits is worked out rank by rank rather than with one latency for every step. All-to-all
writes to every peer at once: its bytes at the rank's rate plus the longest pair's latency.
Emulated seconds, as the agents' iteration records; None for step-graph workloads, whose
ideal is their own graph's.
"""
from __future__ import annotations

from dataclasses import dataclass

from hostagent.workloads.nccl import bus_factor
from testbed.fabric.latency import PathShape, arrival_delay
from testbed.fabric.paths import evs
from testbed.fabric.plan import FabricPlan
from testbed.run import algorithm

# ring steps of one iteration, in units of world - 1
_RING_STEPS = {"all_reduce": 2, "all_gather": 1, "reduce_scatter": 1}


@dataclass(frozen=True)
class IdealIteration:
    """One iteration's ideal time and its two parts, emulated seconds."""

    seconds: float
    serialization: float  # the bytes of the rank's chain of steps at its rate
    steps: int

    @property
    def latency(self) -> float:
        """What the hops add over the bytes alone."""
        return self.seconds - self.serialization


def _arrival_delay(plan: FabricPlan, src: str, dst: str) -> float:
    """Emulated seconds from a block's last byte leaving src to its arriving at dst."""
    return arrival_delay(plan.scenario, PathShape.of(plan, evs(plan, src, dst)[0]))


def ideal_iteration(plan: FabricPlan, transport: str) -> IdealIteration | None:
    """The ideal iteration of the scenario's collective (None: a step-graph workload, or an
    algorithm other than the ring and the direct all-to-all)."""
    sc = plan.scenario
    w = sc.workload
    if w.steps or algorithm.resolve(sc).algorithm not in ("ring", "direct"):
        return None  # the bound below is the ring's and the direct all-to-all's
    hosts = sc.rank_hosts()
    world = len(hosts)
    rate = sc.ideal_busbw(transport)[0] * 8e9  # bit/s a rank injects
    if w.collective == "all_to_all":
        send = w.size * bus_factor(w.collective, world) * 8 / rate
        longest = max(_arrival_delay(plan, a, b) for a in hosts for b in hosts if a != b)
        return IdealIteration(send + longest, send, 1)
    steps = _RING_STEPS[w.collective] * (world - 1)
    block = w.size / world * 8 / rate
    delay = [_arrival_delay(plan, hosts[r - 1], hosts[r]) for r in range(world)]  # into r
    start = [0.0] * world  # when each rank starts sending its block of the current step
    for _ in range(steps - 1):
        start = [max(start[r - 1] + block + delay[r], start[r] + block) for r in range(world)]
    end = max(start[r - 1] + block + delay[r] for r in range(world))
    return IdealIteration(end, steps * block, steps)
