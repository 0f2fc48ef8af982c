"""This machine's packet budget: what one delivered data packet costs its CPU, measured and cached.

`rate: auto` (testbed/fabric/budget.py) needs two numbers: the agents' CPU per delivered data
packet and the kernel's per link crossed. They depend on the machine, its kernel and the agents'
code, so they are measured here (testbed/run/calibrate.py runs the small fabric) and cached per
machine and kernel in `CACHE_DIR/calibration-<machine-id>-<kernel release>.json`, with the date,
the numbers, how they were measured and a digest of the agents' code: a cache written by other
agent code is stale and measured again (the agents' per-packet cost is what changes most).

How the numbers are taken, over the agents' workload only (from their common start to the
last one's end):
- agents: their processes' own CPU (user and system time, in each result.json: `cpu` less
  `cpu_start`, once per process) divided by the data packets delivered (sent minus
  retransmitted), and of it the user time apart (their own code; the rest is the kernel's);
- kernel: the machine's softirq time (/proc/stat; the fabric forwards in softirq) divided by
  the data packets delivered and by the mean links a packet crossed. /proc/stat is machine-wide,
  so other work adds to it, and without CONFIG_IRQ_TIME_ACCOUNTING softirq done in an agent's
  system call is in the agent's time as well: both err on the side of a lower rate.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import hostagent
from hostagent import compiled
from testbed.emulation.cpu import PROC_STAT
from testbed.fabric.budget import PacketCost
from testbed.lifecycle.files import write_json

CACHE_DIR = Path(os.environ.get("MRC_TESTBED_CACHE", "/var/cache/mrc-testbed"))
MACHINE_ID = Path("/etc/machine-id")
_TICK = os.sysconf("SC_CLK_TCK")

# The fabric measured: small enough to build in a second, with paths both within a leaf and
# through a spine; its rate offers about a core's worth of packets, so the per-packet cost is
# taken under load (a near-idle agent's timers would inflate it) without starving the sampler.
SCENARIO = """name: calibrate
seed: 1
fabric: {planes: 2, leaves_per_plane: 2, spines_per_plane: 2, hosts_per_leaf: 2,
         host_link: {rate: 50Mbit, buffer: 100KB}, fabric_link: {rate: 50Mbit, buffer: 100KB},
         mtu: 4200}
qp: {mss: 4096}
transport: [mrc]
workload: {collective: all_reduce, size: 8MiB, iterations: 3, warmup: 1}
"""
METHOD = ("ring all-reduce of 8 MiB (1 warmup + 3 iterations) over MRC on 4 hosts, 2 planes x "
          "(2 leaves + 2 spines), 50 Mbit/s links, 4096 B payload; agents: their processes' CPU "
          "from the common start / data packets delivered; kernel: machine softirq over the "
          "same interval / packets delivered / mean links crossed")


@dataclass(frozen=True)
class Calibration:
    """One measurement, as cached."""

    agent_s: float
    kernel_s_per_link: float
    cores: int
    packets: int  # data packets delivered in the measurement
    seconds: float  # the workload's duration
    links_per_packet: float
    measured: str  # ISO date, UTC
    machine: str
    kernel: str
    agent_code: str  # agent_code(): the agents' sources and protocol build
    method: str = METHOD
    agent_user_s: float | None = None  # of agent_s, the agents' own code (the rest: the kernel)

    def cost(self) -> PacketCost:
        return PacketCost(self.agent_s, self.kernel_s_per_link, self.cores)

    def line(self) -> str:
        user = "" if self.agent_user_s is None else f" ({self.agent_user_s * 1e6:.1f} us user)"
        return (f"agents {self.agent_s * 1e6:.1f} us{user} + kernel "
                f"{self.kernel_s_per_link * 1e6:.1f}"
                f" us per link, per delivered packet ({self.packets:,} packets in "
                f"{self.seconds:.1f} s, {self.cores} cores, measured {self.measured})")


def machine_id() -> str:
    try:
        return MACHINE_ID.read_text().strip() or platform.node()
    except OSError:
        return platform.node()


AGENT_SOURCES = ("*.py", "*.c", "*.h")  # what the agents' cost per packet is made of


def agent_code(root: Path = Path(hostagent.__file__).parent,
               build: str | None = None) -> str:
    """A digest of the agents' code, their per-packet cost being what the numbers measure:
    every source under `root` (hostagent/ and its subpackages, the C extension's too) and the
    protocol build the agents started now would run (`compiled.choose`: compiled, with its
    library's hash, or the sources), which changes that cost about twofold."""
    h = hashlib.sha256((build if build is not None else compiled.choose()[1]).encode())
    for path in sorted(p for pattern in AGENT_SOURCES for p in root.rglob(pattern)):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def cache_path() -> Path:
    return CACHE_DIR / f"calibration-{machine_id()}-{platform.release()}.json"


def cached() -> tuple[Calibration | None, str]:
    """The cached calibration of this machine, kernel and agent code, or None and why not."""
    path = cache_path()
    try:
        data = json.loads(path.read_text())
        found = Calibration(**data)
    except FileNotFoundError:
        return None, f"no calibration of this machine and kernel ({path})"
    except (OSError, ValueError, TypeError) as exc:
        return None, f"the calibration in {path} is unreadable ({exc})"
    if found.agent_code != agent_code():
        return None, (f"the calibration in {path} (measured {found.measured}) is of other agent "
                      f"code")
    return found, f"calibration {path}"


def save(found: Calibration) -> Path:
    path = cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, asdict(found))
    return path


def machine_cpu() -> tuple[float, float]:
    """(softirq + irq seconds, all seconds) summed over every core since boot."""
    fields = [int(v) for v in PROC_STAT.read_text().splitlines()[0].split()[1:]]
    return (fields[5] + fields[6]) / _TICK, sum(fields[:8]) / _TICK


def agents_cpu_split(results: list[dict[str, Any]]) -> tuple[float, float] | None:
    """(user, system) CPU seconds the agents' processes spent from the workload's start to
    their end: per process and kind, its last report minus its earliest start (a pooled process
    reports once per host it served, each time its whole CPU so far). None when no result
    gives the two apart (agents of older commits report their sum only)."""
    reported = [r for r in results
                if r.get("cpu_start") is not None and r.get("cpu") and r.get("pid") is not None]
    if not reported:
        return None
    totals = []
    for kind in ("user_s", "system_s"):
        end: dict[int, float] = {}
        start: dict[int, float] = {}
        for r in reported:
            pid = r["pid"]
            end[pid] = max(end.get(pid, 0.0), r["cpu"][kind])
            start[pid] = min(start.get(pid, r["cpu_start"][kind]), r["cpu_start"][kind])
        totals.append(sum(end[p] - start[p] for p in end))
    return totals[0], totals[1]


def agents_cpu(results: list[dict[str, Any]]) -> float:
    """CPU seconds the agents' processes spent from the workload's start to their end, user
    and system together: per process, its last report minus its earliest start (as
    agents_cpu_split, from each result's `cpu_s` and `cpu_start_s`)."""
    end: dict[int, float] = {}
    start: dict[int, float] = {}
    for r in results:
        if r.get("cpu_start_s") is not None and r.get("pid") is not None:
            end[r["pid"]] = max(end.get(r["pid"], 0.0), r["cpu_s"])
            start[r["pid"]] = min(start.get(r["pid"], r["cpu_start_s"]), r["cpu_start_s"])
    return sum(end[p] - start[p] for p in end)


def from_measurement(agent_cpu_s: float, softirq_s: float, packets: int, seconds: float,
                     links: float, agent_user_s: float | None = None) -> Calibration:
    """The numbers of one measurement (raises ValueError when nothing was delivered);
    `agent_user_s`: the user part of `agent_cpu_s`."""
    if packets <= 0 or agent_cpu_s <= 0:
        raise ValueError(f"the calibration delivered {packets} packets with {agent_cpu_s:.3f} s "
                         f"of agent CPU: nothing to measure")
    return Calibration(
        agent_s=agent_cpu_s / packets, kernel_s_per_link=max(softirq_s, 0.0) / packets / links,
        cores=os.cpu_count() or 1, packets=packets, seconds=round(seconds, 3),
        links_per_packet=links,
        measured=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        machine=machine_id(), kernel=platform.release(), agent_code=agent_code(),
        agent_user_s=None if agent_user_s is None else agent_user_s / packets)
