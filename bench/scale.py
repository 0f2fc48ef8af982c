#!/usr/bin/env python3
"""Ring all-reduce at growing host counts: share of the ideal busbw, and what it cost in CPU.

The fabric of the fidelity issue: 4 planes x 4 spines, 8 hosts per leaf (2 leaves of 4 hosts
at 8 hosts), every link at 10 Mbit/s with 100 KB buffers, a 1 MiB all-reduce (1 warmup + 3
timed iterations), quickstart's packets (4096 B payload, MTU 4200; `--mss 1024 --mtu 1500` for
the scenario default, four times the packets). For each host count and agent mode, one
fresh fabric; printed per run:
- busbw as a share of the ideal (planes x host link rate; MRC sprays every plane);
- the gap between iterations (each rank verifies its result there), mean over ranks;
- the agents' event-loop lag: how late a 10 ms timer fired, 99th percentile, worst process;
- the machine's CPU over the traffic phase (busy share of all cores, from /proc/stat), the
  agents' own CPU (their processes, from the workload's start to their end; `(sys)`: the share
  of their whole lives' CPU spent in the kernel, mostly sendmmsg forwarding each packet through
  the emulated hops in the sender's system call) and the kernel's
  softirq time (packet forwarding through the emulated hops; machine-wide, so other work on the
  machine adds to it), per data packet delivered.

    sudo .venv/bin/python bench/scale.py [--hosts 8 16 32 64] [--modes pooled per_host]
                                         [--transport mrc] [--rate 10Mbit] [--size 1MiB]
                                         [--mss 4096] [--mtu 4200]
"""
from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import cpu  # noqa: E402
from testbed import scenario as scenario_mod  # noqa: E402
from testbed.run.collect import collect  # noqa: E402
from testbed.run.runner import fabric  # noqa: E402
from testbed.run.traffic import run_agents  # noqa: E402

SCENARIO = """name: scale-{hosts}
fabric: {{planes: 4, leaves_per_plane: {leaves}, spines_per_plane: 4, hosts_per_leaf: {per_leaf},
          host_link: {{rate: {rate}, buffer: 100KB}}, fabric_link: {{rate: {rate}, buffer: 100KB}},
          mtu: {mtu}}}
qp: {{mss: {mss}}}
transport: [{transport}]
workload: {{collective: all_reduce, size: {size}, iterations: 3, warmup: 1}}
agents: {{mode: {mode}, processes: {processes}}}
"""


def scenario(hosts: int, mode: str, transport: str, rate: str, size: str, mss: int, mtu: int,
             processes: int | None = None):
    per_leaf = min(8, hosts // 2)
    return scenario_mod.parse(SCENARIO.format(hosts=hosts, leaves=hosts // per_leaf,
                                              per_leaf=per_leaf, rate=rate, mode=mode,
                                              transport=transport, size=size, mss=mss,
                                              mtu=mtu, processes=processes or "null"), "bench")


def run_one(sc, transport: str) -> dict:
    with fabric(sc) as network, tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        before, t0, children = cpu.machine(), time.time(), cpu.children()
        outcomes = run_agents(network, sc, transport, out / "agents")
        used, seconds = cpu.delta(before, cpu.machine()), time.time() - t0
        kernel = cpu.kernel_share(children, cpu.children())
        bad = [o.result for o in outcomes if o.result.get("status") != "ok"]
        if bad:
            return {"error": f"{len(bad)} agents failed: {bad[0].get('error')}"}
        table, _ = collect(out / "agents", out, outcomes, sc, transport)
        it = pd.read_parquet(out / "iterations.parquet").sort_values(["rank", "iteration"])
        qps = pd.read_parquet(out / "qps.parquet")
    measured = float(re.search(r"sum\s+\d+\s+\S+\s+(\S+)", table).group(1))
    ideal, _ = sc.ideal_busbw(transport)
    gaps = (it.groupby("rank")["start"].shift(-1) - it["end"]).dropna()
    delivered = float(qps["data_sent"].sum() - qps["retransmits"].sum())
    agents = cpu.agents_cpu([o.result for o in outcomes])
    busy = used["user"] + used["system"] + used["softirq"]
    lag = max((o.result.get("loop_lag", {}).get("p99_s", 0) * 1e3 for o in outcomes), default=0)
    return {"share": measured / ideal, "lag_p99_ms": lag, "gap_ms": gaps.mean() * 1e3,
            "seconds": seconds,
            "busy": busy / (busy + used["idle"]), "packets": delivered,
            "agent_us": agents / delivered * 1e6, "kernel": kernel,
            "softirq_us": used["softirq"] / delivered * 1e6,
            "retransmits": int(qps["retransmits"].sum())}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, nargs="+", default=[8, 16, 32, 64])
    ap.add_argument("--modes", nargs="+", default=["pooled", "per_host"])
    ap.add_argument("--transport", default="mrc")
    ap.add_argument("--rate", default="10Mbit")
    ap.add_argument("--size", default="1MiB")
    ap.add_argument("--processes", type=int, default=None, help="pooled: processes (default: "
                    "one per core)")
    ap.add_argument("--mss", type=int, default=4096)
    ap.add_argument("--mtu", type=int, default=4200)
    args = ap.parse_args()
    print(f"ring all-reduce {args.size} over {args.transport}, 4 planes x 4 spines, "
          f"links {args.rate}, {args.mss} B packets")
    print(f"{'hosts':>5} {'agents':>9} {'of ideal':>9} {'gap(ms)':>8} {'phase(s)':>9} "
          f"{'CPU busy':>9} {'packets':>9} {'agent us/pkt':>13} {'(sys)':>6} "
          f"{'softirq us/pkt':>15} "
          f"{'retx':>5} {'loop lag p99':>13}")
    for hosts in args.hosts:
        for mode in args.modes:
            r = run_one(scenario(hosts, mode, args.transport, args.rate, args.size, args.mss,
                                 args.mtu, args.processes), args.transport)
            if "error" in r:
                print(f"{hosts:>5} {mode:>9}  {r['error']}", flush=True)
                continue
            print(f"{hosts:>5} {mode:>9} {r['share']:>9.0%} {r['gap_ms']:>8.0f} "
                  f"{r['seconds']:>9.1f} {r['busy']:>9.0%} {r['packets']:>9,.0f} "
                  f"{r['agent_us']:>13.1f} {r['kernel']:>6.0%} {r['softirq_us']:>15.1f} "
                  f"{r['retransmits']:>5} "
                  f"{r['lag_p99_ms']:>10.1f} ms",
                  flush=True)


if __name__ == "__main__":
    main()
