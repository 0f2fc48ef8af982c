"""What the runner, the build, verification, telemetry, faults and the workload ask of a
fabric: the `Network` protocol. Two implementations, siblings on a small shared base
(shells.py): `FabricNetwork` (network.py), every node on this machine, and `ClusterNetwork`
(testbed/cluster/network.py), nodes on servers, each reached through its server's agent. Nothing
above this interface asks which one it holds.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from ipaddress import IPv6Network
from pathlib import Path
from typing import Any, Protocol

from testbed.emulation.machine_monitor import Machine
from testbed.emulation.port_counters import PortSample
from testbed.emulation.probes import ProbeJob, ProbeOutcome
from testbed.fabric.plan import FabricPlan, Link, Port
from testbed.lifecycle.progress import Progress

# an nftables job's outcome: started, finished (wall clock, s; None: not applied), error
NftDone = Callable[[float | None, float | None, str | None], None]


class Process(Protocol):
    """A process in a node: the part of `subprocess.Popen` the runner uses."""

    pid: int
    returncode: int | None

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def send_signal(self, sig: int) -> None: ...

    def terminate(self) -> None: ...

    def kill(self) -> None: ...


class NftWorker(Protocol):
    """A node's nftables worker for the fault injector."""

    def ready(self, timeout: float = 10.0) -> None: ...

    def submit(self, at: float | None, script: str, done: NftDone) -> None: ...

    def close(self) -> None: ...


class Network(Protocol):
    plan: FabricPlan
    ifindex: dict[str, dict[str, int]]  # node -> interface name -> index
    results_dir: Path | None  # the run's results folder (the runner sets it)
    net: Any  # Mininet's network (`--cli`)

    # ---- the build, in this order (testbed/run/build.py) ----
    def prepare(self, progress: Progress) -> None:
        """Whatever the nodes need first (the cluster's servers), as phases of its own."""

    def facts(self) -> dict[str, Any] | None:
        """The machines under the fabric as meta.json records them; None: this one only."""

    def add_nodes(self) -> None: ...

    def add_links(self) -> str:
        """The links made; a summary line."""

    def configure(self) -> None: ...

    def close(self, on_step: Callable[[str], None] | None = None) -> int:
        """Tear everything down (idempotent); processes ended."""

    # ---- nodes ----
    def node(self, name: str) -> Any: ...

    def pid(self, name: str) -> int: ...

    # ---- verification ----
    def probe_evs(self, job: ProbeJob, progress: Progress) -> ProbeOutcome: ...

    def end_sid_counters(self, progress: Progress) -> dict[tuple[str, IPv6Network], int]: ...

    # ---- telemetry, the fidelity monitor, the underlay ----
    def sample_ports(self, queues: bool) -> dict[str, dict[str, PortSample]]: ...

    def start_monitor(self) -> None: ...

    def stop_monitor(self) -> list[Machine]: ...

    def underlay_counters(self) -> dict[str, tuple[int, ...]]:
        """Per server, its underlay device's counters; empty on one machine."""

    # ---- faults ----
    def nft_worker(self, node: str, stop: threading.Event, setup: str) -> NftWorker: ...

    def set_link(self, a: str, b: str, up: bool) -> None: ...

    def set_routes(self, node: str, delete: list[str],
                   replace: list[tuple[str, list[tuple[str, str]]]]) -> None: ...

    def set_port_rate(self, port: Port, link: Link, rate_bps: int) -> None: ...

    def set_port_delay(self, port: Port, link: Link, delay_s: float | None) -> None: ...

    def set_queue_rate(self, port: Port, link: Link, rate_bps: int) -> None: ...

    def rx_packets(self, node: str, ifname: str) -> int: ...

    def send_udp(self, host: str, src: str, sport: int, dst: str, dport: int,
                 count: int) -> None: ...

    # ---- processes and files in nodes ----
    def node_path(self, node: str, local: Path) -> str: ...

    def write_files(self, node: str, texts: dict[str, str]) -> None: ...

    def spawn(self, node: str, key: str, argv: list[str], stdout: str,
              cwd: str | None = None) -> Process: ...

    def read_files(self, wanted: list[tuple[str, str]]) -> dict[str, str | None]: ...

    def fetch(self, node: str, path: str, local: Path) -> None: ...

    def machine_of(self, node: str) -> str: ...

    def cores(self, machine: str) -> int: ...

    def clock_offset(self, node: str) -> float: ...
