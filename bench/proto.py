#!/usr/bin/env python3
"""The transports' own CPU per packet, without sockets, kernel or fabric: two QPs joined in
memory, both directions at once, on a virtual clock.

What it measures is the sans-IO protocol code alone (qp.py, mrc.py or rocev2.py, evs.py, nscc.py,
wire.py): the part of an agent's CPU per packet that no batching of system calls removes. The
network is perfect (no loss, no reordering beyond what spraying over EVs with equal latency
gives) and every byte is checked at the end, so the number is the floor of the protocol's cost,
on one core, with nothing else of the testbed running. No root needed.

    .venv/bin/python -m bench.proto                 # both transports
    .venv/bin/python -m bench.proto --profile mrc   # and where the time goes (cProfile)
    .venv/bin/python -m bench.proto --against-pure  # the compiled protocol (`make fast`)
                                                    # beside its sources, rounds alternating
    .venv/bin/python -m bench.proto --sockets       # through the IO driver, on loopback

With --against-pure every measurement is a process of its own, on the compiled modules or on
the sources (MRC_TESTBED_PURE=1, hostagent/compiled.py), the two alternating round by round so
that a change in the machine's load falls on both; it prints min / median / max over the
rounds and the ratio of the medians.

Two regimes. By default each side sends what its window allows at every step (many packets
per call: what a fast link gives). `--paced` is what agents at `rate: auto`'s rates see: the
NIC lets one packet leave per step, and each datagram that arrives is a wake-up of its own
(received, then the QP polled and its deadline asked). The protocol's fixed cost per call,
which full batches hide, is then most of its cost.

`--sockets` runs the same writes through the IO driver (hostagent/runtime/driver.py) instead:
two Drivers in one event loop, each with its listening socket, over UDP on loopback (`::1`),
so the driver, asyncio and the batched system calls (hostagent/_fastio.c) are in the count;
their kernel time is not (the process's user CPU: both ends). Run as root, the sockets
get the agents' buffers; the QPs' timeout is a second, so that a slow run (callgrind's) does
not resend, and RoCEv2's base RTT 10 ms (DCQCN's timers count elapsed periods). How the
datagrams batch depends on the loop's timing, so an instruction count through the driver
varies between runs of the same code (MRC's by up to 8%): compare runs in one sitting.

`--sockets --latency S` is the delay line's cost (hostagent/runtime/delay_line.py): every round
runs the writes twice, each Driver holding what it receives for S seconds and not at all, in
alternating order, paced by NIC ports (`--rate`, bit/s per plane; 4 planes, each holding 64 KiB
at once; RoCEv2's one QP uses one) so that both go at one packet rate. It prints the agents' CPU
per data packet, user and user + system (the release wakes are system calls too), min / median /
max over `--rounds`, the rate each ran at, how often the loop slept and woke (voluntary context
switches: releases fall between arrivals, at most one wake per millisecond, epoll's resolution),
and the ratio of the medians:

    .venv/bin/python -m bench.proto --sockets --latency 0.01 --rate 25000000 --rounds 6

`--instructions` counts instructions per data packet under valgrind's callgrind instead of
timing: the same count for the same code and inputs whatever else the machine does, so two
commits compare across sittings. It runs the bench at two sizes and divides the difference by
the packets it adds (the setup cancels out); the bench's own loop is in the count. With
`--against CHECKOUT` the same count is made with another checkout's protocol (and its
compiled build), then with this one:

    .venv/bin/python -m bench.proto --paced --instructions --against /tmp/old-checkout
"""
from __future__ import annotations

import argparse
import asyncio
import cProfile
import dataclasses
import json
import os
import pstats
import random
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from hostagent import compiled
from hostagent.protocol.dcqcn import REFERENCE_RTT
from hostagent.protocol.evs import EVPolicy, EVSet
from hostagent.protocol.mrc import MrcQP
from hostagent.protocol.qp import PACKET_OVERHEAD, QPConfig, QueuePair, WriteDone
from hostagent.protocol.rocev2 import RoceQP

# The protocol is whichever hostagent the interpreter imports: this checkout's, or in a process
# of its own (`apart`) another checkout's. This file imports nothing of `bench`, so that such a
# process can run it as a file with that checkout alone on its path.
HERE = Path(__file__).resolve().parents[1]  # this checkout
TABLE = [(i, i // 4) for i in range(16)]  # 4 planes x 4 spines, as bench/scale.py's fabric
CFG = QPConfig(mss=1024, init_cwnd=256 * 1024, max_cwnd=1024 * 1024, base_rtt=REFERENCE_RTT)
LATENCY = 200e-6  # s one way, every path alike
STEP = 50e-6  # s of virtual time per round


def pair(transport: str, size: int, seed: int = 1, cfg: QPConfig | None = None,
         ) -> tuple[QueuePair, QueuePair, bytearray, bytearray]:
    bufs = bytearray(size), bytearray(size)
    cfg = CFG if cfg is None else cfg
    if transport == "mrc":
        pol = EVPolicy()
        a: QueuePair = MrcQP(1, 2, memoryview(bufs[0]), cfg,
                             EVSet.build(TABLE, pol, random.Random(seed)), seed)
        b: QueuePair = MrcQP(2, 1, memoryview(bufs[1]), cfg,
                             EVSet.build(TABLE, pol, random.Random(seed + 1)), seed + 1)
    else:
        a, b = (RoceQP(1, 2, memoryview(bufs[0]), cfg, seed),
                RoceQP(2, 1, memoryview(bufs[1]), cfg, seed + 1))
    return a, b, bufs[0], bufs[1]


def run(transport: str, total: int, message: int, paced: bool = False) -> dict[str, float]:
    """Each side writes `total` bytes to the other in `message`-byte writes; returns data
    packets delivered, CPU seconds, us per packet and the virtual time it took. `paced`: one
    packet leaves a QP per step and every datagram received is followed by a poll and a
    deadline, as in a wake-up."""
    a, b, buf_a, buf_b = pair(transport, total)
    budget = CFG.mss + PACKET_OVERHEAD if paced else None
    src_a, src_b = os.urandom(total), os.urandom(total)
    for k, off in enumerate(range(0, total, message)):
        a.post_write(k, memoryview(src_a)[off:off + message], off, None, 0.0, peer=2)
        b.post_write(k, memoryview(src_b)[off:off + message], off, None, 0.0, peer=1)
    want = len(range(0, total, message))
    done = {id(a): 0, id(b): 0}
    wires: dict[int, list[tuple[float, bytes]]] = {id(a): [], id(b): []}  # to that QP
    now = 0.0
    cpu0 = time.process_time()
    while done[id(a)] < want or done[id(b)] < want:
        now += STEP
        for qp, other in ((a, b), (b, a)):
            inbox = wires[id(qp)]
            due = 0
            while due < len(inbox) and inbox[due][0] <= now:
                due += 1
            for _, data in inbox[:due]:
                qp.receive(data, now)
                if paced:  # a wake-up of its own: what it has to send (ACKs), and its timer
                    for _, out in qp.poll_transmit(now, 0):
                        wires[id(other)].append((now + LATENCY, out))
                    qp.next_deadline()
            del inbox[:due]
            deadline = qp.next_deadline()
            if deadline is not None and deadline <= now:
                qp.on_timer(now)
            for _, data in qp.poll_transmit(now, budget):
                wires[id(other)].append((now + LATENCY, data))
            while qp.events:
                if isinstance(qp.events.popleft(), WriteDone):
                    done[id(qp)] += 1
        if now > 600:
            raise RuntimeError("no progress")
    cpu = time.process_time() - cpu0
    if buf_b != src_a or buf_a != src_b:
        raise RuntimeError("a byte landed wrong")
    packets = sum(q.counters.data_sent - q.counters.retransmits for q in (a, b))
    return {"packets": packets, "cpu_s": cpu, "us_per_packet": cpu / packets * 1e6,
            "retransmits": sum(q.counters.retransmits for q in (a, b)), "virtual_s": now}


PLANES = len({plane for _, plane in TABLE})
NIC_LIMIT = 64 * 1024  # bytes a paced port may hold (--rate)
# DCQCN's timers (a period of 5.5 base RTTs) run per elapsed period: at loopback's RTT they
# would count time, not packets, and callgrind's slowness many times over. A fabric's RTT.
SOCKETS_BASE_RTT = 0.01


def over_sockets(transport: str, total: int, message: int, latency: float = 0.0,
                 rate: int | None = None) -> dict[str, float]:
    """`run`'s writes through two Drivers over loopback UDP in one event loop; the same
    result fields, of user CPU (the kernel's part is the sockets', not the code's), and
    virtual_s the wall time it took; `sys_s`, the system CPU beside it. `latency`: s each
    Driver holds what the other sends; `rate`: NIC ports of that many bit/s (None: unpaced)."""
    return asyncio.run(_over_sockets(transport, total, message, latency, rate))


async def _over_sockets(transport: str, total: int, message: int, latency: float,
                        rate: int | None) -> dict[str, float]:
    from hostagent.protocol.nic import Nic
    from hostagent.runtime import driver
    a, b, buf_a, buf_b = pair(transport, total, cfg=dataclasses.replace(
        CFG, timeout=1.0, base_rtt=SOCKETS_BASE_RTT if transport == "rocev2" else None))
    listens = [driver.listen_socket(("::1", 0)) for _ in range(2)]
    sends = [driver.ecn_socket(socket.socket(socket.AF_INET6, socket.SOCK_DGRAM))
             for _ in range(2)]
    evs = range(len(TABLE)) if transport == "mrc" else range(1)
    drivers = []
    for rank, qp in enumerate((a, b)):
        to = ("::1", listens[1 - rank].getsockname()[1])
        route = driver.Route(sends[rank], dict.fromkeys(evs, to),
                             {ev: TABLE[ev][1] for ev in evs})
        nic = None if rate is None else Nic(PLANES, rate, NIC_LIMIT)
        drivers.append(driver.Driver(rank, 2, listens[rank], {1 - rank: [(qp, route)]},
                                     nic=nic, latency={1 - rank: latency}))
    src_a, src_b = os.urandom(total), os.urandom(total)
    loop = asyncio.get_running_loop()
    usage0, t0 = resource.getrusage(resource.RUSAGE_SELF), loop.time()
    try:
        await asyncio.gather(*(drivers[rank].write(1 - rank, memoryview(src)[off:off + message],
                                                   off)
                               for rank, src in ((0, src_a), (1, src_b))
                               for off in range(0, total, message)))
    finally:
        usage1, took = resource.getrusage(resource.RUSAGE_SELF), loop.time() - t0
        # getrusage: microseconds (os.times counts 10 ms ticks: a tenth of a short run)
        cpu, system = usage1.ru_utime - usage0.ru_utime, usage1.ru_stime - usage0.ru_stime
        sleeps = usage1.ru_nvcsw - usage0.ru_nvcsw  # the loop waited, then woke
        for d in drivers:
            d.close()
        for sock in (*listens, *sends):
            sock.close()
    if buf_b != src_a or buf_a != src_b:
        raise RuntimeError("a byte landed wrong")
    packets = sum(q.counters.data_sent - q.counters.retransmits for q in (a, b))
    return {"packets": packets, "cpu_s": cpu, "us_per_packet": cpu / packets * 1e6,
            "retransmits": sum(q.counters.retransmits for q in (a, b)), "virtual_s": took,
            "sys_s": system, "sleeps": sleeps}


def measure(transport: str, args: argparse.Namespace) -> dict[str, float]:
    """One run of the bench `args` asks for: in memory (`run`) or over sockets."""
    if args.sockets:
        return over_sockets(transport, args.size, args.message)
    return run(transport, args.size, args.message, args.paced)


def best_of(transport: str, args: argparse.Namespace) -> tuple[dict[str, float], list[float]]:
    """The best of `--repeat` runs, and every run's us per packet."""
    runs = [measure(transport, args) for _ in range(args.repeat)]
    return min(runs, key=lambda r: r["us_per_packet"]), [r["us_per_packet"] for r in runs]


def apart(code: Path, args: list[str], **env: str) -> tuple[list[str], dict[str, str]]:
    """The command and environment that run this file in a process of its own on `code`'s
    protocol: `-P` keeps this file's folder off the path and PYTHONPATH puts `code` before
    the installed packages."""
    return ([sys.executable, "-P", __file__, *args],
            {**os.environ, "PYTHONPATH": str(code), **env})


def measured_apart(transport: str, pure: bool, args: argparse.Namespace) -> float:
    """us per packet, best of `--repeat`, in a process of its own on the sources or the build."""
    cmd, env = apart(HERE, [transport, *_shape(args), "--repeat", str(args.repeat), "--json"],
                     **{compiled.PURE: "1" if pure else "0"})
    out = json.loads(subprocess.run(cmd, env=env, capture_output=True, text=True,
                                    check=True).stdout)
    if out["compiled"] == pure:
        raise SystemExit("no compiled protocol in use: `make fast` builds it")
    return float(out["us_per_packet"])


def _shape(args: argparse.Namespace, size: int | None = None) -> list[str]:
    """The options that say what one measurement is, for a process of its own."""
    return ["--size", str(args.size if size is None else size), "--message", str(args.message),
            "--mss", str(args.mss), *(["--paced"] if args.paced else []),
            *(["--sockets"] if args.sockets else [])]


_COLLECTED = re.compile(r"^==\d+== Collected : (\d+)$", re.MULTILINE)


def instructions(transport: str, args: argparse.Namespace, code: Path) -> tuple[float, bool]:
    """Instructions per data packet with `code`'s protocol, and whether it ran compiled: one
    run at `--size` and one at three times that under callgrind, the difference in
    instructions over the difference in packets (imports, buffers and setup cancel out)."""
    counts = []
    for size in (args.size, 3 * args.size):
        cmd, env = apart(code, [transport, *_shape(args, size), "--repeat", "1", "--json"])
        done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                               *cmd], env=env, capture_output=True, text=True)
        found = _COLLECTED.search(done.stderr)
        if done.returncode != 0 or found is None:
            raise SystemExit(f"callgrind of {transport} failed: {done.stderr.strip()[-400:]}")
        out = json.loads(done.stdout)
        if Path(out["code"]) != code.resolve():  # a path without the project: HERE's instead
            raise SystemExit(f"{code} has no hostagent/ of its own: the count would be of "
                             f"{out['code']}; give a checkout of the project")
        counts.append((int(found.group(1)), int(out["packets"]), bool(out["compiled"])))
    (ir1, p1, built), (ir2, p2, _) = counts
    return (ir2 - ir1) / (p2 - p1), built


def count_instructions(args: argparse.Namespace) -> None:
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
    codes = ([args.against.resolve()] if args.against else []) + [HERE]
    if not (codes[0] / "hostagent" / "protocol").is_dir():
        raise SystemExit(f"--against {args.against}: not a checkout of the project (no "
                         "hostagent/protocol in it)")
    regime = ("over loopback sockets, through the IO driver" if args.sockets
              else "paced, one packet per call" if args.paced else "full windows")
    print(f"instructions per data packet (callgrind; {regime}; {args.mss} B payloads; "
          f"{args.size >> 20} and {3 * args.size >> 20} MiB each way)")
    for t in args.transports:
        row = []
        for code in codes:
            n, built = instructions(t, args, code)
            row.append(n)
            print(f"{t:<7} {n:>10,.0f}  {'compiled' if built else 'sources '}  {code}")
        if len(row) == 2:
            print(f"{t:<7} this checkout takes {row[1] / row[0]:.2f}x the other's instructions")


def against_pure(args: argparse.Namespace) -> None:
    load = os.getloadavg()[0]
    times: dict[tuple[str, bool], list[float]] = {}
    for k in range(args.rounds):
        for t in args.transports:
            for pure in ((True, False) if k % 2 == 0 else (False, True)):
                times.setdefault((t, pure), []).append(measured_apart(t, pure, args))
    print(f"us per packet, best of {args.repeat} per process, {args.rounds} rounds alternating;"
          f" load average {load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end")
    for t in args.transports:
        row = []
        for pure in (True, False):
            each = times[(t, pure)]
            row.append(statistics.median(each))
            print(f"{t:<7} {'sources' if pure else 'compiled':<8} min {min(each):6.2f}  median "
                  f"{row[-1]:6.2f}  max {max(each):6.2f}  ({', '.join(f'{x:.2f}' for x in each)})")
        print(f"{t:<7} the sources take {row[0] / row[1]:.2f}x the compiled protocol's time "
              "(medians)")


def against_latency(args: argparse.Namespace) -> None:
    """Each transport's writes with the delay line holding `--latency` s and without it,
    alternating round by round, at one NIC rate: CPU per data packet side by side."""
    load = os.getloadavg()[0]
    runs: dict[tuple[str, float], list[dict[str, float]]] = {}
    for k in range(args.rounds):
        for t in args.transports:
            for held in ((0.0, args.latency) if k % 2 == 0 else (args.latency, 0.0)):
                runs.setdefault((t, held), []).append(
                    over_sockets(t, args.size, args.message, held, args.rate))
    paced = f"NIC ports of {args.rate:,} bit/s x {PLANES}" if args.rate else "unpaced"
    print(f"CPU per data packet through the driver over loopback ({paced}; {args.rounds} rounds "
          f"alternating); load average {load:.2f} at the start, {os.getloadavg()[0]:.2f} at "
          "the end")
    for t in args.transports:
        medians = []
        for held in (0.0, args.latency):
            each = runs[(t, held)]
            user = [r["us_per_packet"] for r in each]
            both = [(r["cpu_s"] + r["sys_s"]) / r["packets"] * 1e6 for r in each]
            rate = statistics.median(r["packets"] / r["virtual_s"] for r in each)
            sleeps = statistics.median(r["sleeps"] / r["virtual_s"] for r in each)
            medians.append((statistics.median(user), statistics.median(both)))
            print(f"{t:<7} held {held * 1e3:6.3f} ms  user min {min(user):6.2f} median "
                  f"{medians[-1][0]:6.2f} max {max(user):6.2f}  user+sys min {min(both):6.2f} "
                  f"median {medians[-1][1]:6.2f} max {max(both):6.2f} us  {rate:,.0f} packets/s"
                  f"  {sleeps:,.0f} sleeps/s  {sum(r['retransmits'] for r in each)} resent")
        (u0, b0), (u1, b1) = medians
        print(f"{t:<7} with the delay line: {u1 / u0:.3f}x the user CPU, {b1 / b0:.3f}x "
              "user+sys (medians)")


def main() -> None:
    global CFG  # --mss: the QPs' payload size
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("transports", nargs="*", default=["mrc", "rocev2"])
    parser.add_argument("--size", type=int, default=16 << 20, help="bytes each way")
    parser.add_argument("--message", type=int, default=1 << 20, help="bytes per write")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="cProfile one more run")
    parser.add_argument("--against-pure", action="store_true",
                        help="the compiled protocol beside its sources, a process per run")
    parser.add_argument("--rounds", type=int, default=3, help="with --against-pure or --latency")
    parser.add_argument("--json", action="store_true", help="one transport's best run, as JSON")
    parser.add_argument("--mss", type=int, default=CFG.mss, help="payload bytes per packet")
    parser.add_argument("--paced", action="store_true",
                        help="one packet per call, as agents at rate: auto's rates see")
    parser.add_argument("--sockets", action="store_true",
                        help="through the IO driver over loopback UDP, not QPs joined in memory")
    parser.add_argument("--instructions", action="store_true",
                        help="count instructions per data packet (callgrind), not time")
    parser.add_argument("--against", type=Path, metavar="CHECKOUT",
                        help="with --instructions: another checkout's protocol first")
    parser.add_argument("--latency", type=float, metavar="S",
                        help="with --sockets: the delay line holding S s beside none")
    parser.add_argument("--rate", type=int, metavar="BPS",
                        help="with --latency: pace each Driver to NIC ports of BPS bit/s")
    args = parser.parse_args()
    CFG = dataclasses.replace(CFG, mss=args.mss)
    if args.against and not args.instructions:
        parser.error("--against compares instruction counts: add --instructions")
    if args.against_pure and args.instructions:
        parser.error("--instructions counts one build: run it again with MRC_TESTBED_PURE=1 "
                     "for the sources")
    if args.sockets and (args.paced or args.profile):
        parser.error("--sockets paces as the driver does: without --paced and --profile")
    if (args.latency is not None or args.rate is not None) and not args.sockets:
        parser.error("--latency and --rate are the driver's: add --sockets")
    if args.rate is not None and args.latency is None:
        parser.error("--rate paces the --latency comparison: add --latency S")
    if args.latency is not None and not args.latency > 0:
        parser.error(f"--latency {args.latency}: give the seconds held, above 0")
    if args.latency is not None and (args.instructions or args.against_pure or args.json):
        parser.error("--latency compares its own two runs: without --instructions, "
                     "--against-pure and --json")
    if args.instructions:
        count_instructions(args)
        return
    if args.latency is not None:
        against_latency(args)
        return
    if args.against_pure:
        against_pure(args)
        return
    if args.json:
        print(json.dumps({**best_of(args.transports[0], args)[0], "compiled": compiled.ACTIVE,
                          "code": str(Path(compiled.__file__).resolve().parents[1])}))
        return
    print(f"protocol: {'compiled (make fast)' if compiled.ACTIVE else 'the sources'}")
    for t in args.transports:
        best, runs = best_of(t, args)
        each = ", ".join(f"{x:.2f}" for x in runs)
        print(f"{t:<7} {best['packets']:>8} packets  {best['us_per_packet']:6.2f} us/packet "
              f"(best of {args.repeat}: {each})  "
              f"{best['retransmits']} retransmissions")
        if args.profile:
            prof = cProfile.Profile()
            prof.runcall(run, t, args.size, args.message, args.paced)
            pstats.Stats(prof).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
