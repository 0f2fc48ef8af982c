#!/usr/bin/env python3
"""What an idle agent process costs: CPU seconds per second and event-loop wake-ups per second
of one pooled process holding ref-64's QPs with no traffic, without building a fabric.

The process runs the agents' own code (hostagent/runtime/pooled.py `serve`, agent.py, the
driver, the loop-lag monitor) for `--hosts` of `--world` ranks (ref-64 on two cores: 32 of 64
hosts per process, every host with QPs toward its 63 peers: MRC one QP of 16 EVs each, RoCEv2
one QP and one socket per plane), on loopback sockets, with three stand-ins: the listening
sockets bind ::1 on a port of the kernel's choice (no namespaces), RoCEv2's source ports are
the kernel's, and the workload is a sleep (the QPs set up, nothing sent). Three phases of
`--seconds` each, measured strictly inside:
- `before start`: every host ready, the runner's start time not yet written;
- `started, idle`: the workload running (the loop-lag monitor and, with
  `--ev-sample-period`, the EV sampler sampling), nothing to send;
- `done, lingering`: every served host done, waiting for the peers this process does not serve
  (another process's, in a run) to be done too; the bench then writes their `done`.
Per phase: CPU (user + system) seconds per second of this process, user and system apart, the
event loop's wake-ups per second (it slept in its selector and was woken: a timer or a socket),
its turns (every selector call, the polls between callbacks too) and the kernel's voluntary
context switches per second.

On a loaded machine the CPU numbers are noisy (the lead's benchmarks share the cores): the
wake-up counts are not. On a quiet machine:

    .venv/bin/python -m bench.idle                      # ref-64's pooled process, MRC
    .venv/bin/python -m bench.idle --transport rocev2   # 4 QPs (and sockets) per peer
    .venv/bin/python -m bench.idle --hosts 64 --seconds 10 --json
"""
from __future__ import annotations

import argparse
import asyncio
import functools
import json
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

from hostagent import compiled
from hostagent.runtime import agent, driver, pooled
from hostagent.runtime.config import AgentConfig, PeerConfig

PLANES, SPINES = 4, 4  # ref-64: 16 EVs toward a peer on another leaf


def configs(tmp: Path, hosts: int, world: int, transport: str, seconds: float,
            ev_sample_period: float | None) -> list[AgentConfig]:
    evs = [(i, i // SPINES, "::1") for i in range(PLANES * SPINES)]
    out = []
    for rank in range(hosts):
        (tmp / f"h{rank}").mkdir()
        peers = [PeerConfig(p, f"h{p}", evs, ["::1"] * PLANES, []) for p in range(world)
                 if p != rank]
        out.append(AgentConfig(
            rank=rank, world=world, host=f"h{rank}", transport=transport,
            plain=["::1"] * PLANES, peers=peers,
            qps_per_peer=PLANES if transport == "rocev2" else 1, qp={"mss": 4096}, mrc={},
            workload={"collective": "all_reduce", "size": 1024, "iterations": 1, "warmup": 0,
                      "compute_gap": 0.0},
            seed=1, start_file=str(tmp / "start"), out_dir=str(tmp / f"h{rank}"),
            timeout=10 * seconds + 60, ev_sample_period=ev_sample_period))
    return out


class Meter:
    """This process's CPU, its event loop's wake-ups (selector calls that may block: the loop
    slept and something woke it; a call with timeout 0 only polls, between two callbacks), its
    loop turns (every selector call) and its voluntary context switches."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.wakeups = self.turns = 0
        selector = loop._selector  # type: ignore[attr-defined]
        select = selector.select

        def counted(timeout: float | None = None) -> Any:
            events = select(timeout)
            self.turns += 1
            self.wakeups += timeout is None or timeout > 0
            return events
        selector.select = counted

    def read(self) -> dict[str, float]:
        """getrusage, not os.times: its total is the scheduler's exact run time, where times()
        counts clock ticks (10 ms: most of an idle phase's CPU)."""
        r = resource.getrusage(resource.RUSAGE_SELF)
        return {"time": time.monotonic(), "user": r.ru_utime, "system": r.ru_stime,
                "wakeups": self.wakeups, "turns": self.turns, "switches": r.ru_nvcsw}


def rates(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    span = b["time"] - a["time"]
    return {"seconds": round(span, 3),
            "cpu_per_s": (b["user"] + b["system"] - a["user"] - a["system"]) / span,
            "user_per_s": (b["user"] - a["user"]) / span,
            "system_per_s": (b["system"] - a["system"]) / span,
            "wakeups_per_s": (b["wakeups"] - a["wakeups"]) / span,
            "turns_per_s": (b["turns"] - a["turns"]) / span,
            "switches_per_s": (b["switches"] - a["switches"]) / span}


async def measure(cfgs: list[AgentConfig], world: int, seconds: float,
                  tmp: Path) -> dict[str, dict[str, float]]:
    meter = Meter(asyncio.get_running_loop())
    serving = asyncio.ensure_future(pooled.serve([(c, None) for c in cfgs]))
    while not all((Path(c.out_dir) / "ready").exists() for c in cfgs):
        await asyncio.sleep(0.1)  # setting up: not measured
    out = {}
    edge = 0.1  # s left out at each end of a phase: its transitions are not idle
    await asyncio.sleep(edge)
    a = meter.read()
    await asyncio.sleep(seconds)
    out["before start"] = rates(a, meter.read())
    start_at = time.time() + 0.05
    (tmp / "start.tmp").write_text(repr(start_at))
    (tmp / "start.tmp").replace(tmp / "start")
    await asyncio.sleep(start_at + edge - time.time())
    a = meter.read()
    await asyncio.sleep(seconds - 2 * edge)  # the workload sleeps `seconds` from start_at
    out["started, idle"] = rates(a, meter.read())
    await asyncio.sleep(start_at + seconds + 2 * edge - time.time())
    a = meter.read()
    await asyncio.sleep(seconds)
    out["done, lingering"] = rates(a, meter.read())
    for rank in range(len(cfgs), world):  # the peers served elsewhere are done too
        (tmp / f"h{rank}").mkdir(exist_ok=True)
        (tmp / f"h{rank}" / "done").touch()
    results = await serving
    bad = [r for r in results if r["status"] != "ok"]
    if bad:
        raise SystemExit(f"{len(bad)} hosts did not end well: {bad[0].get('error')}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=32, help="hosts this process serves")
    ap.add_argument("--world", type=int, default=64, help="ranks in all (ref-64: 64)")
    ap.add_argument("--transport", choices=("mrc", "rocev2"), default="mrc")
    ap.add_argument("--seconds", type=float, default=5.0, help="per phase")
    ap.add_argument("--ev-sample-period", type=float, default=None,
                    help="s; MRC's EV load sampler (ref-64 has none: too many EVs)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not args.world >= args.hosts >= 1:
        raise SystemExit("--hosts from 1 to --world")
    seconds = args.seconds

    async def idle_workload(*_: object, **__: object) -> None:
        await asyncio.sleep(seconds)
    agent.run_iterations = idle_workload  # type: ignore[assignment]
    agent.roce_ports = lambda seed, rank, count: [0] * count  # type: ignore[assignment]
    loopback = functools.partial(driver.listen_socket, ("::1", 0))
    driver.listen_socket = loopback  # type: ignore[assignment]
    with tempfile.TemporaryDirectory() as tmp:
        cfgs = configs(Path(tmp), args.hosts, args.world, args.transport, seconds,
                       args.ev_sample_period)
        qps = sum(len(c.peers) * c.qps_per_peer for c in cfgs)
        phases = asyncio.run(measure(cfgs, args.world, seconds, Path(tmp)))
    if args.json:
        print(json.dumps({"hosts": args.hosts, "world": args.world, "qps": qps,
                          "transport": args.transport, "protocol": compiled.BUILD,
                          "phases": phases}))
        return
    print(f"one process: {args.hosts} of {args.world} hosts, {qps} idle {args.transport} QPs; "
          f"protocol {compiled.BUILD}")
    print(f"{'phase':<17} {'CPU s/s':>8} {'user':>7} {'system':>7} {'wake-ups/s':>11} "
          f"{'loop turns/s':>13} {'switches/s':>11}")
    for name, r in phases.items():
        print(f"{name:<17} {r['cpu_per_s']:>8.4f} {r['user_per_s']:>7.4f} "
              f"{r['system_per_s']:>7.4f} {r['wakeups_per_s']:>11.1f} "
              f"{r['turns_per_s']:>13.1f} {r['switches_per_s']:>11.1f}")


if __name__ == "__main__":
    main()
