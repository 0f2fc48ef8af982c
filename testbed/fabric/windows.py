"""A QP's window: where it starts (`qp.init_cwnd`, MRC's NSCC) and its cap on bytes in flight
(`qp.max_cwnd`, both transports), as the scenario sets them or by default (pure).

Sizes stay bytes of the real fabric under time dilation, so a cap that covers a path's BDP in
one frame covers it in the other; what matters is the cap against the BDP. Without a real
fabric the defaults are fixed (64 KiB and 256 KiB: several times the 4-5 packets an emulated
path without latency holds). With `fabric.real_rate` they follow the fabric: NSCC's cap is 1.5
times the base BDP of its NIC, and its window starts at the cap (UEC's reference simulator,
uet-htsim, `UecSrc::initNscc`: `setMaxWnd(1.5 * _bdp)`, `_cwnd = _maxwnd`). The BDP is the
one of the ports the QP sends on, across a spine: every plane for an MRC QP, one for a
RoCEv2 QP, whose cap then stands for an RNIC's outstanding requests and covers its port's
path the same way.
"""
from __future__ import annotations

from hostagent.protocol.nic import FRAME_OVERHEAD
from hostagent.protocol.wire import HEADER_SIZE
from testbed.errors import ScenarioError
from testbed.fabric.frame import Frame
from testbed.fabric.latency import ACROSS_A_SPINE, bdp_packets
from testbed.scenario import Scenario
from testbed.scenario.limits import MAX_WINDOW
from testbed.scenario.units import format_size

SMALL_INIT = 64 * 1024  # bytes: the window MRC starts at without a real fabric
SMALL_MAX = 256 * 1024  # bytes: the cap without a real fabric
NSCC_CAP_BDPS = 1.5  # uet-htsim's NSCC: maxwnd = 1.5 x the base BDP


def qp_planes(scenario: Scenario, transport: str) -> int:
    """Planes one QP sends on: an MRC QP sprays every plane, a RoCEv2 QP keeps to one."""
    return scenario.fabric.planes if transport == "mrc" else 1


def qp_bdp(scenario: Scenario, transport: str) -> float:
    """Bytes one QP has in flight at line rate over a path across a spine, every queue empty,
    on every port it sends on."""
    packet = scenario.qp.mss + HEADER_SIZE + FRAME_OVERHEAD
    return bdp_packets(scenario, ACROSS_A_SPINE) * packet * qp_planes(scenario, transport)


def windows(scenario: Scenario, transport: str) -> tuple[int, int]:
    """(init_cwnd, max_cwnd) in bytes for a QP of `transport`: as set, else the defaults."""
    q = scenario.qp
    if Frame.of(scenario).real:
        cap = min(MAX_WINDOW, int(NSCC_CAP_BDPS * qp_bdp(scenario, transport)))
        default_max, default_init = cap, cap
    else:
        default_max, default_init = SMALL_MAX, SMALL_INIT
    most = default_max if q.max_cwnd is None else q.max_cwnd
    start = min(default_init, most) if q.init_cwnd is None else q.init_cwnd
    return start, most


def check(scenario: Scenario, source: str) -> None:
    """Raises `ScenarioError` where a window, as set or derived, could not work: a start
    below one packet or above the cap."""
    mss = scenario.qp.mss
    problems = []
    for transport in scenario.transport:
        start, most = windows(scenario, transport)
        if start < mss:
            problems.append(f"{transport}: init_cwnd {format_size(start)} is less than one "
                            f"packet (mss {mss})")
        if start > most:
            problems.append(f"{transport}: init_cwnd {format_size(start)} exceeds max_cwnd "
                            f"{format_size(most)}")
    if problems:
        raise ScenarioError(f"{source}: qp: " + "; ".join(problems),
                            "set qp.init_cwnd between one mss and qp.max_cwnd, or leave both "
                            "to their defaults")
