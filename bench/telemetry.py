#!/usr/bin/env python3
"""What one telemetry sweep costs, part by part, on a built fabric, side by side in one run.

The runner's sampler (testbed/emulation/telemetry.py) reads every port of every node on a
period: interface counters from /proc/<pid>/net/dev, the ECN/trimming program's counters from
its BPF map (router ports), and the byte FIFOs' backlog and drops from a netlink qdisc dump.
This builds the scenario's fabric (no traffic: the kernel state a sweep reads is the same
size under load) and times, in this thread's CPU, over `--rounds` rounds:
- `net/dev`: the interface counters of every node;
- `qdisc dump, ours`: the queue statistics as telemetry reads them (testbed/kernel/
  qdisc_stats.py: the dump read with struct);
- `qdisc dump, pyroute2`: the same dump decoded by pyroute2 (`IPRoute.get_qdiscs`), the way
  it was read before, checked to give the same numbers;
- `sweep` and `sweep with queues`: `sample_ports` as the sampler calls it.
It prints the median of each, per sweep and per node, and pyroute2's cost over ours.

    sudo .venv/bin/python -m bench.telemetry                          # ref-64 at 1 Mbit/s
    sudo .venv/bin/python -m bench.telemetry scenarios/quickstart.yaml --rounds 9
"""
from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from bench.common import ROOT
from testbed import scenario as scenario_mod
from testbed.emulation.port_counters import read_net_dev
from testbed.run.runner import fabric
from testbed.scenario.units import parse_rate


def pyroute2_fifos(handle) -> dict[int, tuple[int, int]]:
    """The byte FIFOs' (backlog, drops) as pyroute2 decodes the dump."""
    out = {}
    for msg in handle.ipr.get_qdiscs():
        if msg.get_attr("TCA_KIND") == "bfifo":
            queue = msg.get_attr("TCA_STATS2").get_attr("TCA_STATS_QUEUE")
            out[msg["index"]] = (queue["backlog"], queue["drops"])
    return out


def cpu_of(fn: Callable[[], object]) -> float:
    t0 = time.thread_time()
    fn()
    return time.thread_time() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenario", nargs="?", default=str(ROOT / "scenarios" / "ref-64.yaml"))
    parser.add_argument("--rate", default="1Mbit", help="for links at `rate: auto` (no pilot)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    scenario = scenario_mod.load(Path(args.scenario))[0]
    scenario = scenario.with_rate(parse_rate(args.rate), scenario.name)  # auto links only
    with fabric(scenario) as net:
        names = list(net.plan.nodes)
        handles = {n: net._thread_netlink(n) for n in names}  # the sampler's own kind
        ports = {n: {p.ifname for p in net.plan.ports(n)} for n in names}
        net.sample_ports(True)  # opens every socket: not timed
        for name in names:
            if handles[name].queue_stats() != pyroute2_fifos(handles[name]):
                raise SystemExit(f"{name}: the two readings of its queue statistics differ")
        parts: dict[str, Callable[[], object]] = {
            "net/dev": lambda: [read_net_dev(net.pid(n), ports[n]) for n in names],
            "qdisc dump, ours": lambda: [handles[n].queue_stats() for n in names],
            "qdisc dump, pyroute2": lambda: [pyroute2_fifos(handles[n]) for n in names],
            "sweep": lambda: net.sample_ports(False),
            "sweep with queues": lambda: net.sample_ports(True),
        }
        times: dict[str, list[float]] = {k: [] for k in parts}
        for _ in range(args.rounds):
            for key, fn in parts.items():
                times[key].append(cpu_of(fn))
    median = {k: statistics.median(v) for k, v in times.items()}
    print(f"# {scenario.name}: {len(names)} nodes, {sum(map(len, ports.values()))} ports; "
          f"CPU of this thread, median of {args.rounds} rounds")
    print(f"# {'part':<22} {'ms a sweep':>11} {'us a node':>10}")
    for key, value in median.items():
        print(f"{key:<24} {value * 1e3:>11.2f} {value * 1e6 / len(names):>10.1f}")
    print(f"# qdisc dump: pyroute2 / ours = "
          f"{median['qdisc dump, pyroute2'] / median['qdisc dump, ours']:.1f}x")


if __name__ == "__main__":
    main()
