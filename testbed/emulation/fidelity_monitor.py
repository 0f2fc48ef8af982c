"""The fidelity monitor of a run's traffic phase: link gaps from the kernel, CPU from /proc.

Started just before the workload (the build's probes are not part of it) and stopped after.
The network runs one `MachineMonitor` (monitor.py) per machine that forwards the fabric: this
one, or in the cluster mode every server (through its agent), each watching the ports of its
own nodes at their links' rates (a degrade fault changes them, through
`FabricNetwork.set_queue_rate`). Servers that share one kernel (emulated servers: the same
boot id) are one machine: one CPU, one set of cores. What the machines gathered becomes
`link_gaps.parquet` and `cpu.parquet` and, with the agents' lag, the run's verdict
(testbed/run/verdict.py judges each machine and keeps the worst).
"""
from __future__ import annotations

from testbed.emulation.machine_monitor import Machine
from testbed.emulation.network_api import Network


class FidelityMonitor:
    def __init__(self, network: Network) -> None:
        self.network = network
        self.machines: list[Machine] = []

    def start(self) -> None:
        self.network.start_monitor()

    def stop(self) -> None:
        """Stop every machine's monitor and keep what each measured (idempotent)."""
        if not self.machines:
            self.machines = self.network.stop_monitor()

    @property
    def port_rows(self) -> list[dict]:
        return [r for m in self.machines for r in m.ports]

    @property
    def cpu_rows(self) -> list[dict]:
        """Each machine's CPU rows; with several, each row names its machine's first server."""
        if len(self.machines) == 1:
            return self.machines[0].cpu_rows
        return [{**r, "server": m.servers[0]} for m in self.machines for r in m.cpu_rows]
