"""Packet captures of chosen ports for the whole workload (`run --capture IFNAME`).

tcpdump runs inside the port's node, on the machine holding it (in the cluster mode spawned by
that server's agent), writes `capture-<ifname>.pcap` (headers only: 160 bytes a packet is
enough for IPv6, UDP and the transport header), is stopped when the workload ends, and the
file is gathered into the results. Wireshark decodes the files; the uSID destination shifting
from one port to the next is visible in them.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from testbed.errors import ScenarioError
from testbed.fabric.plan import FabricPlan
from testbed.lifecycle.cleanup import end_process

SNAPLEN = 160


def port_of(plan: FabricPlan, ifname: str) -> str:
    """The node that owns interface `ifname`; a clear error if the fabric has no such port."""
    node = re.sub(r"-eth\d+$", "", ifname)
    if node not in plan.nodes or ifname not in {p.ifname for p in plan.ports(node)}:
        example = plan.ports(plan.hosts[0])[0].ifname
        raise ScenarioError(f"--capture {ifname}: no such port in this fabric",
                            f"name a port like {example} (node-ethN)")
    return node


class Captures:
    def __init__(self, network, ifnames: list[str], out: Path) -> None:
        self.network = network
        self.targets = [(port_of(network.plan, i), i) for i in ifnames]
        self.out = out
        self.procs: list[subprocess.Popen] = []
        self.files: list[Path] = []

    def start(self) -> None:
        for node, ifname in self.targets:
            path = self.out / f"capture-{ifname}.pcap"
            self.files.append(path)
            remote = self.network.node_path(node, path)
            self.procs.append(self.network.spawn(
                node, f"capture-{ifname}",
                ["tcpdump", "-Z", "root", "-i", ifname, "-s", str(SNAPLEN), "-U",
                 "--immediate-mode", "-w", remote],
                self.network.node_path(node, self.out / f"capture-{ifname}.log")))

    def stop(self) -> None:
        """tcpdump ended (it flushes its file), then its file gathered into the results."""
        for proc in self.procs:
            end_process(proc, grace=5)
        for (node, ifname), path in zip(self.targets, self.files, strict=True):
            for local in (path, self.out / f"capture-{ifname}.log"):
                self.network.fetch(node, self.network.node_path(node, local), local)
