"""The run's similarity to the real fabric it stands for (meta.json `similarity`), pure.

The ratios are computed from the scenario as the run applies it: the path round trips and
BDPs of testbed/fabric/latency.py, the buffers and thresholds of the fabric's leaf-spine
ports, the ACK timeout the agents get, the workload's largest message. The departures are the
quantities the run does not scale by the time dilation D, each with what a real fabric has
and why the run cannot: a reader of a real-frame result knows which of its numbers to
distrust without reading the code.
"""
from __future__ import annotations

from hostagent.protocol.nic import FRAME_OVERHEAD
from hostagent.protocol.wire import HEADER_SIZE
from runcontract.similarity import Departure, PathRatios, Similarity
from testbed.fabric.frame import Frame
from testbed.fabric.latency import (
    ACROSS_A_SPINE,
    PathShape,
    bdp_packets,
    one_way_latency,
    round_trip,
)
from testbed.fabric.timeline import condition
from testbed.fabric.timers import timers
from testbed.fabric.windows import qp_bdp, windows
from testbed.kernel.shaping import burst_bytes
from testbed.run.traffic import nic_limits, step_job
from testbed.scenario import Scenario
from testbed.scenario.schema import Transport
from testbed.scenario.units import format_size, format_time

TRANSPORTS: tuple[Transport, ...] = ("mrc", "rocev2")  # both, whichever the run is
SAME_LEAF = PathShape(host_links=2, fabric_links=0)  # host-leaf-host
NIC_QUEUE_PACKETS = 4  # packets a NIC's port queue holds where the agents' wake-ups allow it
# BFD's detection at a common 3 x 300 ms plus BGP's updates (the MRC notes: "seconds for
# BGP/ECMP fabrics"): how long a real fabric's routing takes to steer around a dead link
REAL_CONVERGENCE = "about 1 s (BFD 3 x 300 ms plus BGP updates)"


def shapes(scenario: Scenario) -> dict[str, PathShape]:
    """The kinds of path between two hosts the fabric has, shortest first."""
    f = scenario.fabric
    out = {}
    if f.hosts_per_leaf > 1:
        out["same leaf"] = SAME_LEAF
    if f.leaves_per_plane > 1:
        out["across a spine"] = ACROSS_A_SPINE
    return out


def largest_message(scenario: Scenario) -> int:
    """Bytes of the workload's largest message: the collective's size (nccl-tests' size), or
    a step's largest communication."""
    job = step_job(scenario)
    if job is None:
        return scenario.workload.size
    return max((n.bytes for g in job.graphs for n in g.nodes), default=0)


def similarity(scenario: Scenario) -> Similarity:
    """The record of how this scenario's emulation compares with its real fabric."""
    f, frame = scenario.fabric, Frame.of(scenario)
    kinds = shapes(scenario)
    longest = list(kinds.values())[-1]
    packet = scenario.qp.mss + HEADER_SIZE + FRAME_OVERHEAD
    bdp = bdp_packets(scenario, longest)
    bdp_bytes = bdp * packet
    rtt = round_trip(scenario, longest)
    ecn, sw = f.fabric_link.ecn(), scenario.switch
    return Similarity(
        frame="real" if frame.real else "emulated", dilation=frame.dilation,
        real_rate=f.real_rate, emulated_rate=f.host_link.rate,
        paths=[PathRatios(path=name, links=shape.links,
                          rtt_s=frame.in_real(round_trip(scenario, shape)),
                          bdp_packets=bdp_packets(scenario, shape))
               for name, shape in kinds.items()],
        bdp_packets=bdp, buffer_bdp=f.fabric_link.buffer / bdp_bytes,
        ecn_kmin_bdp=ecn.kmin / bdp_bytes if sw.ecn and ecn.marks else None,
        trim_bdp=f.fabric_link.trim() / bdp_bytes if sw.trimming else None,
        ack_timeout_rtts={t: timers(scenario, t).timeout / rtt for t in TRANSPORTS},
        window_bdp={t: windows(scenario, t)[1] / qp_bdp(scenario, t) for t in TRANSPORTS},
        message_bdp=largest_message(scenario) / bdp_bytes,
        departures=departures(scenario))


def departures(scenario: Scenario) -> list[Departure]:
    """Each quantity the run does not scale by D, in the real frame: both transports' timers
    and constants (testbed/fabric/timers.py, each named with its transport, whichever the run
    is, so that the runs of one scenario carry one record), then the testbed's own (none of
    these without a real fabric, where nothing is scaled)."""
    out: list[Departure] = []
    for t in TRANSPORTS:
        for d in timers(scenario, t).departures:
            named = d.quantity if d.quantity.startswith(t) else f"{t} {d.quantity}"
            record = Departure(quantity=named, stated=d.stated, used=d.used, why=d.why)
            if record not in out:
                out.append(record)
    frame = Frame.of(scenario)
    if frame.real:
        out += [*_routing(scenario, frame), *_nic_queue(scenario), *_shaper_burst(scenario),
                *_background(scenario, frame)]
    return out


def _real(frame: Frame, emulated: float) -> str:
    return f"{format_time(frame.in_real(emulated))} ({format_time(emulated)} emulated)"


def _routing(scenario: Scenario, frame: Frame) -> list[Departure]:
    """Routing converges only around a link that goes down: without such a fault (a loss or a
    blackhole routing never sees) its delay does not matter."""
    if not any(condition(f.kind) == "down" for f in scenario.faults):
        return []
    delay = scenario.routing.convergence_delay
    return [Departure(
        quantity="routing.convergence_delay", stated=REAL_CONVERGENCE,
        used=_real(frame, delay),
        why="routing's delay is emulated seconds: scaled by D, a second of the real fabric "
            "would hold the run for hours")]


def _nic_queue(scenario: Scenario) -> list[Departure]:
    """The host port's queue is sized for the agents' millisecond wake-ups when that is more
    than a NIC's few packets."""
    packet = scenario.qp.mss + HEADER_SIZE + FRAME_OVERHEAD
    limit = nic_limits(scenario).limit
    if limit <= NIC_QUEUE_PACKETS * packet:
        return []
    return [Departure(
        quantity="host port queue", stated=f"a few packets ({NIC_QUEUE_PACKETS} x "
                                           f"{format_size(packet)})",
        used=format_size(limit),
        why="the agents wake about once a millisecond (emulated): 4 ms of the emulated line "
            "keeps the port busy between two wake-ups")]


def _shaper_burst(scenario: Scenario) -> list[Departure]:
    """A shaped port that has idled sends its burst above line rate (testbed/kernel/shaping.py):
    a collective's step that starts on an idle link ends that much sooner than the real
    fabric allows."""
    f = scenario.fabric
    packet = scenario.qp.mss + HEADER_SIZE + FRAME_OVERHEAD
    bursts = {burst_bytes(int(link.rate), f.mtu) for link in (f.host_link, f.fabric_link)}
    used = " / ".join(f"{format_size(b)} ({b / packet:.1f} packets)" for b in sorted(bursts))
    return [Departure(
        quantity="link shaper burst", stated="none (line rate from the first byte)",
        used=f"{used} at once after an idle period",
        why="htb holds its rate on a busy 2-core host only with a burst of a few packets: a "
            "step that starts on an idle link sends them at veth speed")]


def _background(scenario: Scenario, frame: Frame) -> list[Departure]:
    """iperf3's flows are kernel sockets: the agents' delay line never holds them (the links
    delay them only with latency_by: netem), and their durations are whole emulated seconds."""
    if not scenario.background:
        return []
    out = []
    latency = one_way_latency(scenario, ACROSS_A_SPINE)
    if latency > 0 and scenario.fabric.latency_by == "agents":
        out.append(Departure(
            quantity="background flows' link latency",
            stated=f"{_real(frame, latency)} one way across a spine", used="none",
            why="iperf3's kernel sockets bypass the agents' delay line: their round trip is "
                "serialization only (fabric.latency_by: netem delays them, where the kernel "
                "has netem)"))
    stated = [b.duration for b in scenario.background]
    used = [frame.in_real(b.duration) for b in frame.background(scenario.background)]
    changed = [(s, u) for s, u in zip(stated, used, strict=True) if abs(s - u) > 1e-9 * s]
    if changed:
        out.append(Departure(
            quantity="background flows' durations",
            stated=", ".join(format_time(s) for s, _ in changed),
            used=", ".join(format_time(u) for _, u in changed),
            why="iperf3 -t counts whole seconds: a duration becomes whole emulated seconds"))
    return out
