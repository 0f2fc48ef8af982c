"""The fidelity monitor on one machine: the link-gap program on its kernel for the ports of
the nodes it holds, and its CPU sampler.

One per run on a single machine (FabricNetwork); in the cluster mode one per server, run by
the server's agent (the link-gap program attaches to its own kernel's tracepoint and sees only
that kernel's ports). `stop()` returns what the machine measured as plain data (what the agent
sends back): every port's histogram rows (link_gaps.parquet's) and the CPU rows, which carry
the share of the cores the monitor's own process used (the runner, or the server's agent).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from testbed.emulation.cpu import CpuSampler, summarize
from testbed.fabric.plan import FabricPlan
from testbed.kernel.link_gap import EDGES_PCT, LinkGapMonitor, LinkGapUnavailable

ETH_HLEN = 14
CPU_PERIOD = 0.25  # s: coarse enough to cost nothing, fine enough to see a fault's window


class MachineMonitor:
    """Started by the constructor (program loaded, ports registered, CPU sampled); `set_rate`
    when a degrade fault changes a shaper; always `stop()` (idempotent)."""

    def __init__(self, plan: FabricPlan, nodes: set[str]) -> None:
        self.ports = [(link, port) for link in plan.links for port in (link.lower, link.upper)
                      if port.node in nodes]
        self.cpu = CpuSampler(CPU_PERIOD)
        self.gaps: LinkGapMonitor | None = None
        self.unavailable: str | None = None
        try:
            self.gaps = LinkGapMonitor()
        except LinkGapUnavailable as exc:
            self.unavailable = str(exc)
        if self.gaps is not None:
            frame = plan.scenario.fabric.mtu + ETH_HLEN  # a full packet, as htb counts it
            for link, port in self.ports:
                self.gaps.register(port.ifindex, link.rate, frame)
        self.cpu.start()
        self.result: dict | None = None

    def set_rate(self, ifindex: int, rate_bps: int) -> None:
        if self.gaps is not None:
            self.gaps.set_rate(ifindex, rate_bps)

    def stop(self) -> dict:
        """{"ports": histogram rows, "unavailable", "cpu_rows", "cores"}."""
        if self.result is not None:
            return self.result
        self.cpu.stop()
        rows: list[dict] = []
        edges = [*map(float, EDGES_PCT), math.inf]
        if self.gaps is not None:
            for link, port in self.ports:
                g = self.gaps.read(port.ifindex)
                if g is None:
                    continue
                common = {"node": port.node, "ifname": port.ifname, "link": link.name,
                          "kind": link.kind, "plane": link.plane, "rate_bps": link.rate,
                          "dequeues": g.dequeues, "backlogged": g.backlogged,
                          "gap_ns": g.gap_ns, "late_ns": g.late_ns}
                rows += [{**common, "bucket": b, "edge_pct": edges[b], "gaps": n}
                         for b, n in enumerate(g.hist)]
            self.gaps.close()
            self.gaps = None
        self.result = {"ports": rows, "unavailable": self.unavailable,
                       "cpu_rows": self.cpu.rows, "cores": self.cpu.cores}
        return self.result


@dataclass
class Machine:
    """What one machine measured: its servers (none on a single machine), the nodes it held,
    its ports' histogram rows and its CPU: the machine's (`cpu_rows`) and, in `processes`,
    each of the run's own processes on it (the runner, servers' agents: they compete with the
    agents for its cores), each by its CPU rows' `process` share. `clock_offset`: its clock
    minus the runner's, s."""

    servers: list[str]
    nodes: set[str]
    ports: list[dict]
    unavailable: str | None
    cpu_rows: list[dict]
    cores: int
    label: str = field(default="this machine")
    processes: dict[str, list[dict]] = field(default_factory=dict)
    clock_offset: float = 0.0

    def histogram(self) -> tuple[tuple[int, ...], int, int]:
        return histogram(self.ports)

    def cpu(self, since: float | None = None) -> dict:
        """The machine's CPU summary over the rows after `since` (the runner's clock), with
        `runner`: the share of all cores the run's own processes used here (None when one of
        them has no measure)."""
        at = None if since is None else since + self.clock_offset
        out = summarize(self.cpu_rows, at)
        shares = [summarize(rows, at)["process"] for rows in self.processes.values()]
        out["runner"] = (None if not shares or any(s is None for s in shares)
                         else round(sum(s for s in shares if s is not None), 4))
        return out


def histogram(rows: list[dict]) -> tuple[tuple[int, ...], int, int]:
    """Histogram rows summed over ports, with the sums of gaps and lateness."""
    hist = [0] * (len(EDGES_PCT) + 1)
    gap_ns = late_ns = 0
    for r in rows:
        hist[r["bucket"]] += r["gaps"]
        if r["bucket"] == 0:
            gap_ns += r["gap_ns"]
            late_ns += r["late_ns"]
    return tuple(hist), gap_ns, late_ns
