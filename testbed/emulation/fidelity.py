"""The fidelity monitor of a run's traffic phase: link gaps from the kernel, CPU from /proc.

Started just before the workload (the build's probes are not part of it) and stopped after:
every port of the fabric is registered with the link-gap program at its link's rate (a degrade
fault changes it, through `FabricNetwork.set_queue_rate`), and the CPU sampler runs alongside.
What it gathers becomes `link_gaps.parquet` and `cpu.parquet` and, with the agents' lag, the
run's verdict (testbed/run/fidelity.py judges).
"""
from __future__ import annotations

import math

from testbed.emulation.cpu import CpuSampler
from testbed.emulation.network import FabricNetwork
from testbed.kernel.link_gap import EDGES_PCT, LinkGapMonitor, LinkGapUnavailable

ETH_HLEN = 14
CPU_PERIOD = 0.25  # s: coarse enough to cost nothing, fine enough to see a fault's window


class FidelityMonitor:
    def __init__(self, network: FabricNetwork) -> None:
        self.network = network
        self.cpu = CpuSampler(CPU_PERIOD)
        self.gaps: LinkGapMonitor | None = None
        self.unavailable: str | None = None
        self.port_rows: list[dict] = []

    def start(self) -> None:
        plan = self.network.plan
        try:
            self.gaps = LinkGapMonitor()
        except LinkGapUnavailable as exc:
            self.unavailable = str(exc)
        if self.gaps is not None:
            frame = plan.scenario.fabric.mtu + ETH_HLEN  # a full packet, as htb counts it
            for link in plan.links:
                for port in (link.lower, link.upper):
                    self.gaps.register(port.ifindex, link.rate, frame)
            self.network.link_gaps = self.gaps
        self.cpu.start()

    def stop(self) -> None:
        """Stop sampling, read every port's histogram, unload the program (idempotent)."""
        self.cpu.stop()
        if self.gaps is None:
            return
        self.network.link_gaps = None
        plan = self.network.plan
        edges = [*map(float, EDGES_PCT), math.inf]
        for link in plan.links:
            for port in (link.lower, link.upper):
                g = self.gaps.read(port.ifindex)
                if g is None:
                    continue
                common = {"node": port.node, "ifname": port.ifname, "link": link.name,
                          "kind": link.kind, "plane": link.plane, "rate_bps": link.rate,
                          "dequeues": g.dequeues, "backlogged": g.backlogged,
                          "gap_ns": g.gap_ns, "late_ns": g.late_ns}
                self.port_rows += [{**common, "bucket": b, "edge_pct": edges[b], "gaps": n}
                                   for b, n in enumerate(g.hist)]
        self.gaps.close()
        self.gaps = None

    def histogram(self) -> tuple[tuple[int, ...], int, int]:
        """The fabric's histogram summed over ports, with the sums of gaps and lateness."""
        hist = [0] * (len(EDGES_PCT) + 1)
        gap_ns = late_ns = 0
        for r in self.port_rows:
            hist[r["bucket"]] += r["gaps"]
            if r["bucket"] == 0:
                gap_ns += r["gap_ns"]
                late_ns += r["late_ns"]
        return tuple(hist), gap_ns, late_ns
