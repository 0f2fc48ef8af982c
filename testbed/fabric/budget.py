"""`rate: auto`: the highest link rate whose offered load this machine's CPU carries (pure).

An emulated fabric is faithful only while the machine keeps up with its packets (see the
fidelity verdict). Every data packet costs the agents' CPU (send, receive, the ACK it earns,
all measured together per delivered data packet) and the kernel's, once per link it crosses
(a veth transmit and the receive and forward in the next namespace). At link rate R, the
workload offers

    packets/s = ranks x planes x R / packet_bits

(every rank injects on every plane its transport uses, as the ideal busbw assumes), and needs

    CPU = packets/s x (agent_s + links_per_packet x kernel_s_per_link)   core-seconds per second,

which must stay within `CPU_SHARE` of the cores: the fidelity verdict's bound on the run's own
CPU (testbed/run/verdict.py, RUN_CPU_DEGRADED). The rate chosen is the highest rung of
`limits.AUTO_RATE_LADDER` at or below the R that solves CPU = CPU_SHARE x cores. The per-packet
costs come from a measurement on this machine (testbed/emulation/calibration.py).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from hostagent.protocol.nic import FRAME_OVERHEAD
from hostagent.protocol.wire import HEADER_SIZE
from testbed.scenario import Scenario
from testbed.scenario.limits import AUTO_RATE_LADDER
from testbed.scenario.units import format_rate

CPU_SHARE = 0.8  # of all cores: the verdict's `faithful` bound on the run's own CPU
SAME_LEAF_LINKS = 2  # host -> leaf -> host
CROSS_LEAF_LINKS = 4  # host -> leaf -> spine -> leaf -> host
RING_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")


@dataclass(frozen=True)
class PacketCost:
    """What one delivered data packet costs this machine, in CPU seconds."""

    agent_s: float  # the agents' processes, ACKs and retransmissions included
    kernel_s_per_link: float  # softirq per link the packet (and its share of ACKs) crosses
    cores: int


@dataclass(frozen=True)
class RateChoice:
    """The rate `rate: auto` chose and the arithmetic behind it (meta.json, the terminal)."""

    rate: int  # bit/s, a rung of the ladder
    max_rate: float  # bit/s at which the offered load takes exactly CPU_SHARE of the cores
    fits: bool  # False: even the lowest rung is over the budget (the run will say so)
    ranks: int
    planes: int
    packet_bits: int
    links_per_packet: float
    agent_s: float
    kernel_s_per_link: float
    cost_per_packet_s: float
    cores: int
    share: float
    packets_per_s: float  # offered at `rate`
    cpu_share: float  # of all cores, at `rate`

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        """The arithmetic, in the order a reader checks it."""
        us = 1e6
        head = (f"model: {format_rate(self.rate)}" if self.fits else
                f"model: {format_rate(self.rate)}, the lowest rung, is OVER the budget "
                f"(the run will likely be not faithful: fewer ranks, fewer planes or larger "
                f"packets would fit)")
        return [
            head,
            f"  cost per delivered packet {self.cost_per_packet_s * us:.1f} us = agents "
            f"{self.agent_s * us:.1f} us + {self.links_per_packet:.2f} links x kernel "
            f"{self.kernel_s_per_link * us:.1f} us",
            f"  budget {self.share:.0%} of {self.cores} cores = "
            f"{self.share * self.cores:.2f} CPU-s/s -> at most "
            f"{self.share * self.cores / self.cost_per_packet_s:,.0f} packets/s",
            f"  offered {self.ranks} ranks x {self.planes} planes x R / {self.packet_bits} bit "
            f"-> R <= {format_rate(self.max_rate)}; at {format_rate(self.rate)}: "
            f"{self.packets_per_s:,.0f} packets/s, {self.cpu_share:.0%} of the cores",
        ]


def packet_bits(scenario: Scenario) -> int:
    """A full data packet on the wire: payload, transport header, UDP/IPv6/Ethernet."""
    return 8 * (scenario.qp.mss + HEADER_SIZE + FRAME_OVERHEAD)


def injecting_planes(scenario: Scenario) -> int:
    """Planes a rank injects on, the most over the scenario's transports (both compare at one
    rate, so the rate must fit the heavier)."""
    return max(scenario.ideal_busbw(t)[1] for t in scenario.transport)


def links_per_packet(scenario: Scenario) -> float:
    """Mean links a data packet crosses: 2 between hosts of one leaf, 4 through a spine, over
    the pairs the collective sends between (ring neighbours in rank order, every pair for
    all_to_all)."""
    f = scenario.fabric
    index = {scenario.naming.host_name(i): i for i in range(f.host_count)}
    leaf = [index[h] // f.hosts_per_leaf for h in scenario.rank_hosts()]
    n = len(leaf)
    if scenario.workload.collective in RING_COLLECTIVES:
        pairs = [(leaf[i], leaf[(i + 1) % n]) for i in range(n)]
    else:
        pairs = [(leaf[i], leaf[j]) for i in range(n) for j in range(n) if i != j]
    return sum(SAME_LEAF_LINKS if a == b else CROSS_LEAF_LINKS for a, b in pairs) / len(pairs)


def choose_rate(scenario: Scenario, cost: PacketCost, share: float = CPU_SHARE,
                ladder: tuple[int, ...] = AUTO_RATE_LADDER) -> RateChoice:
    """The highest rung at which the scenario's offered load stays within `share` of the
    cores (the lowest rung, marked as not fitting, when none does)."""
    ranks, planes = len(scenario.rank_hosts()), injecting_planes(scenario)
    bits, links = packet_bits(scenario), links_per_packet(scenario)
    per_packet = cost.agent_s + links * cost.kernel_s_per_link
    max_rate = share * cost.cores * bits / (ranks * planes * per_packet)
    fitting = [r for r in ladder if r <= max_rate]
    rate = max(fitting) if fitting else min(ladder)
    pps = ranks * planes * rate / bits
    return RateChoice(rate=rate, max_rate=max_rate, fits=bool(fitting), ranks=ranks,
                      planes=planes, packet_bits=bits, links_per_packet=links,
                      agent_s=cost.agent_s, kernel_s_per_link=cost.kernel_s_per_link,
                      cost_per_packet_s=per_packet, cores=cost.cores, share=share,
                      packets_per_s=pps, cpu_share=pps * per_packet / cost.cores)


# The pilot (testbed/run/pilot.py) measures the machine's busy share with the scenario's own
# fabric and workload at a rung. The rung chosen is the highest measured one within
# PILOT_SHARE: the verdict's `degraded` bound on the run's CPU (0.8) less the spread of that
# share between two runs of the same code (about 5 points).
PILOT_SHARE = 0.75


@dataclass(frozen=True)
class PilotStep:
    """What the pilot does next, from the shares measured so far."""

    measure: int | None  # the rung to measure next; None: the choice is made
    rate: int | None  # the rung chosen (when `measure` is None)
    fits: bool  # False: even the lowest rung measured over the share


def pilot_step(measured: dict[int, float], share: float = PILOT_SHARE,
               ladder: tuple[int, ...] = AUTO_RATE_LADDER) -> PilotStep:
    """Pure: from busy shares measured at rungs, the next rung to measure or the choice.

    Below a rung that measured within `share`, nothing is measured (a lower rate offers fewer
    packets); above one that measured over it, nothing either. The next rung up is measured
    when its share, scaled in proportion to the rate from the highest fitting rung, is at most
    the whole machine: the proportional estimate errs high (a packet costs less at a higher
    rate, where one wake-up serves more of them, and the fixed costs do not grow), so a rung it
    puts over the machine is not worth the measurement."""
    rungs = sorted(ladder)
    fitting = [r for r, s in measured.items() if s <= share]
    if fitting:
        best = max(fitting)
        above = [r for r in rungs if r > best]
        up = above[0] if above else None
        if up is not None and up not in measured and measured[best] * up / best <= 1.0:
            return PilotStep(up, None, True)
        return PilotStep(None, best, True)
    lowest = min(measured)
    below = [r for r in rungs if r < lowest]
    if below:
        return PilotStep(below[-1], None, True)
    return PilotStep(None, lowest, False)
