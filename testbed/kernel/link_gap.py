"""The link-gap half of the fidelity monitor: `bpf/link_gap.c` on the kernel's
`qdisc:qdisc_dequeue` tracepoint, its per-port rates and histograms.

Loaded once per fabric, attached machine-wide (the tracepoint has no per-device hook), it keeps
state only for the ports registered here, keyed by ifindex (the plan makes them distinct across
the fabric). The kernel does the per-packet work; this reads one histogram per port at the end.
A kernel without the tracepoint, BTF or eBPF gives a `LinkGapUnavailable` whose message says
which: the run then judges fidelity from the CPU side alone and says so.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

from testbed.kernel import libbpf, tc_bpf

OBJECT = Path(__file__).resolve().parent / "bpf" / "link_gap.o"
PROGRAM = "link_gap"
TRACEPOINT = "qdisc:qdisc_dequeue"
# Upper edges of the histogram's buckets: lateness in percent of a full packet's time at the
# port's rate (the C file counts hundredths of a percent); the last bucket is 10000% and up.
EDGES_PCT = (1, 2, 5, 10, 20, 30, 50, 70, 100, 150, 200, 300, 500, 1000, 2000, 5000, 10000)
BUCKETS = len(EDGES_PCT) + 1


class GapConfig(ctypes.Structure):
    _fields_ = [("rate", ctypes.c_uint64), ("packet", ctypes.c_uint32), ("pad", ctypes.c_uint32)]


class GapState(ctypes.Structure):
    _fields_ = [("free_ns", ctypes.c_uint64), ("last_ns", ctypes.c_uint64),
                ("last_backlog", ctypes.c_uint32), ("pad", ctypes.c_uint32),
                ("dequeues", ctypes.c_uint64),
                ("backlogged", ctypes.c_uint64), ("gap_ns", ctypes.c_uint64),
                ("late_ns", ctypes.c_uint64), ("bulk", ctypes.c_uint64),
                ("hist", ctypes.c_uint64 * BUCKETS)]


assert ctypes.sizeof(GapConfig) == 16 and ctypes.sizeof(GapState) == 64 + 8 * BUCKETS  # as in C


class LinkGapUnavailable(Exception):
    """This kernel (or build) cannot measure link gaps; the message says why."""


@dataclass(frozen=True)
class PortGaps:
    """One port's histogram: `hist[i]` backlogged dequeues late by less than EDGES_PCT[i] % of a
    full packet time (and at least the edge before); the last bucket is the rest. `gap_ns` and
    `late_ns` sum their gaps and their lateness."""

    ifindex: int
    dequeues: int
    backlogged: int
    gap_ns: int
    late_ns: int
    bulk: int
    hist: tuple[int, ...]


class LinkGapMonitor:
    """Load and attach with the constructor; `register` ports, `read` them, always `close()`."""

    def __init__(self, path: Path = OBJECT) -> None:
        if not path.exists():
            raise LinkGapUnavailable(f"{path.name} is not built (run `make bpf`)")
        if tc_bpf.stale(path):
            raise LinkGapUnavailable(f"{path.name} is older than its source (run `make bpf`)")
        try:
            self._obj = libbpf.BpfObject(str(path))
        except libbpf.LibbpfError as exc:
            raise LinkGapUnavailable(f"the kernel refused the link-gap program: {exc}") from None
        try:
            self._config = self._obj.map_fd("gap_config")
            self._state = self._obj.map_fd("gap_state")
            self._obj.attach(PROGRAM)
            self._packet: dict[int, int] = {}
        except libbpf.LibbpfError as exc:
            self._obj.close()
            raise LinkGapUnavailable(
                f"cannot attach to the tracepoint {TRACEPOINT} (this kernel may lack it): "
                f"{exc}") from None

    def register(self, ifindex: int, rate_bps: int, packet_bytes: int) -> None:
        """Watch the port at this rate, lateness counted in packets of `packet_bytes` (a full
        frame), from empty counters."""
        key = ctypes.c_uint32(ifindex)
        self._packet[ifindex] = packet_bytes
        libbpf.update(self._config, key, GapConfig(rate=rate_bps, packet=packet_bytes))
        libbpf.update(self._state, key, GapState())

    def set_rate(self, ifindex: int, rate_bps: int) -> None:
        """The port's shaper changed rate (the degrade fault): its counters carry on."""
        if ifindex in self._packet:
            libbpf.update(self._config, ctypes.c_uint32(ifindex),
                          GapConfig(rate=rate_bps, packet=self._packet[ifindex]))

    def read(self, ifindex: int) -> PortGaps | None:
        state = GapState()
        if not libbpf.lookup(self._state, ctypes.c_uint32(ifindex), state):
            return None
        return PortGaps(ifindex, state.dequeues, state.backlogged, state.gap_ns, state.late_ns,
                        state.bulk, tuple(state.hist))

    def close(self) -> None:
        self._obj.close()
