"""Where a router port marks ECN, trims MRC packets and tail-drops (or, lossless, counts an
overflow of its lossless limit): the eBPF program
`bpf/fabric_queue.c` at the egress of every router port, its per-port settings and counters.

The program is built with clang by `scripts/install.sh` (`make bpf`), loaded once per run
through libbpf, and attached to each router port by the build's workers (forked after the
load, so they hold its fd). Ports are keyed by their interface index, which the plan makes
distinct across the fabric. The structs below mirror the C ones (sizes asserted on both sides).
"""
from __future__ import annotations

import ctypes
import time
from pathlib import Path

from testbed.fabric.plan import FabricPlan, Link, Port
from testbed.kernel import libbpf, tc_bpf

BPF_DIR = Path(__file__).resolve().parent / "bpf"
OBJECT = BPF_DIR / "fabric_queue.o"
PROGRAM = "fabric_queue"
COUNTERS = ("packets", "bytes", "marked", "trimmed", "dropped", "queue", "queue_max",
            "overflow")
LOSSLESS = 1  # PortConfig.flags: a drop above `buffer` is a lossless overflow


MILLION = 1_000_000  # PortConfig.pmax and mark_ppm are in millionths


class PortConfig(ctypes.Structure):
    _fields_ = [("rate", ctypes.c_uint64), ("kmin", ctypes.c_uint32), ("kmax", ctypes.c_uint32),
                ("pmax", ctypes.c_uint32), ("trim", ctypes.c_uint32),
                ("buffer", ctypes.c_uint32), ("flags", ctypes.c_uint32)]


class PortState(ctypes.Structure):
    _fields_ = [("lock", ctypes.c_uint32), ("pad", ctypes.c_uint32),
                ("queue", ctypes.c_uint64), ("last_ns", ctypes.c_uint64),
                ("fed_ns", ctypes.c_uint64),
                ("packets", ctypes.c_uint64), ("bytes", ctypes.c_uint64),
                ("marked", ctypes.c_uint64), ("trimmed", ctypes.c_uint64),
                ("dropped", ctypes.c_uint64), ("queue_max", ctypes.c_uint64),
                ("overflow", ctypes.c_uint64)]


assert ctypes.sizeof(PortConfig) == 32 and ctypes.sizeof(PortState) == 88  # as in the C file


def mark_ppm(ahead: int, kmin: int, kmax: int, pmax_ppm: int) -> int:
    """RED's marking probability, in millionths, for a packet with `ahead` bytes queued before
    it: none at or below K_min, P_max's share of the way from K_min to K_max, every packet
    above K_max; K_max 0 is ECN off. The twin of `mark_ppm` in the C file (same integers)."""
    if not kmax or ahead <= kmin:
        return 0
    if ahead > kmax:
        return MILLION
    return pmax_ppm * (ahead - kmin) // (kmax - kmin)


def port_config(link: Link, rate_bps: int | None = None) -> PortConfig:
    """The settings of either end of `link` (both ends share its class): it drains at the
    link's line rate, as the link into it delivers, and drops above the link's queue limit
    (the buffer, or the lossless limit)."""
    rate = link.rate if rate_bps is None else rate_bps
    return PortConfig(rate=rate // 8, kmin=link.ecn.kmin, kmax=link.ecn.kmax,
                      pmax=round(link.ecn.pmax * MILLION), trim=link.trim, buffer=link.limit,
                      flags=LOSSLESS if link.lossless else 0)


def router_ports(plan: FabricPlan) -> list[tuple[Port, Link]]:
    """Every port of a leaf or spine, with its link: where switches queue."""
    out = []
    for link in plan.links:
        for port in (link.lower, link.upper):
            if plan.nodes[port.node].role != "host":
                out.append((port, link))
    return out


def attach(ipr, ifindex: int, prog_fd: int) -> None:
    """The program at the port's egress, ahead of its htb shaper (clsact runs before the root
    qdisc enqueues)."""
    tc_bpf.attach(ipr, ifindex, prog_fd, PROGRAM, tc_bpf.EGRESS)


class FabricQueues:
    """The loaded program and its two maps; `close()` when the fabric is gone."""

    def __init__(self, path: Path = OBJECT) -> None:
        self._obj, self.prog_fd, (self._config, self._state) = tc_bpf.load(
            path, PROGRAM, ("port_config", "port_state"), "the in-fabric ECN/trimming program",
            "run `make bpf` (needs clang and libbpf-dev; scripts/install.sh installs and "
            "builds it), or set `switch: {ecn: false, trim: false}` in the scenario",
            "this kernel needs eBPF with tc (CONFIG_BPF_SYSCALL, CONFIG_NET_CLS_BPF, "
            "CONFIG_NET_SCH_INGRESS) and BTF; or set `switch: {ecn: false, trim: false}` "
            "in the scenario")
        self._rates: dict[int, int] = {}  # ifindex -> bytes/s, as last configured

    def configure(self, ifindex: int, config: PortConfig) -> None:
        """Settings of a port, and an empty queue with zero counters."""
        key = ctypes.c_uint32(ifindex)
        libbpf.update(self._config, key, config)
        libbpf.update(self._state, key, PortState())
        self._rates[ifindex] = config.rate

    def set_rate(self, ifindex: int, config: PortConfig) -> None:
        """New settings for a port whose queue and counters carry on (the degrade fault)."""
        libbpf.update(self._config, ctypes.c_uint32(ifindex), config)
        self._rates[ifindex] = config.rate

    def config(self, ifindex: int) -> PortConfig | None:
        """The port's settings as the program sees them (from the map)."""
        config = PortConfig()
        return config if libbpf.lookup(self._config, ctypes.c_uint32(ifindex), config) else None

    def counters(self, ifindex: int) -> dict[str, int] | None:
        """The port's counters, and its virtual queue as of now (the program drains it only
        when a packet passes: an idle port's last value would overstate it)."""
        state = PortState()
        if not libbpf.lookup(self._state, ctypes.c_uint32(ifindex), state, libbpf.BPF_F_LOCK):
            return None
        idle_ns = max(0, time.monotonic_ns() - state.last_ns)  # bpf_ktime_get_ns's clock
        drained = idle_ns * self._rates.get(ifindex, 0) // 1_000_000_000
        out = {name: getattr(state, name) for name in COUNTERS}
        out["queue"] = max(0, state.queue - drained)
        return out

    def close(self) -> None:
        self._obj.close()
