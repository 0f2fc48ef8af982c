#!/usr/bin/env python3
"""The transports' own CPU per packet, without sockets, kernel or fabric: two QPs joined in
memory, both directions at once, on a virtual clock.

What it measures is the sans-IO protocol code alone (qp.py, mrc.py or rocev2.py, evs.py, nscc.py,
wire.py): the part of an agent's CPU per packet that no batching of system calls removes. The
network is perfect (no loss, no reordering beyond what spraying over EVs with equal latency
gives) and every byte is checked at the end, so the number is the floor of the protocol's cost,
on one core, with nothing else of the testbed running. No root needed.

    .venv/bin/python bench/proto.py                 # both transports
    .venv/bin/python bench/proto.py --profile mrc   # and where the time goes (cProfile)
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hostagent.protocol.evs import EVPolicy, EVSet  # noqa: E402
from hostagent.protocol.mrc import MrcQP  # noqa: E402
from hostagent.protocol.qp import QPConfig, QueuePair, WriteDone  # noqa: E402
from hostagent.protocol.rocev2 import RoceQP  # noqa: E402

TABLE = [(i, i // 4) for i in range(16)]  # 4 planes x 4 spines, as bench/scale.py's fabric
CFG = QPConfig(mss=1024, init_cwnd=256 * 1024, max_cwnd=1024 * 1024)
LATENCY = 200e-6  # s one way, every path alike
STEP = 50e-6  # s of virtual time per round


def pair(transport: str, size: int, seed: int = 1) -> tuple[QueuePair, QueuePair,
                                                             bytearray, bytearray]:
    bufs = bytearray(size), bytearray(size)
    if transport == "mrc":
        pol = EVPolicy()
        a: QueuePair = MrcQP(1, 2, memoryview(bufs[0]), CFG,
                             EVSet.build(TABLE, pol, random.Random(seed)), seed)
        b: QueuePair = MrcQP(2, 1, memoryview(bufs[1]), CFG,
                             EVSet.build(TABLE, pol, random.Random(seed + 1)), seed + 1)
    else:
        a, b = (RoceQP(1, 2, memoryview(bufs[0]), CFG, seed),
                RoceQP(2, 1, memoryview(bufs[1]), CFG, seed + 1))
    return a, b, bufs[0], bufs[1]


def run(transport: str, total: int, message: int) -> dict[str, float]:
    """Each side writes `total` bytes to the other in `message`-byte writes; returns data
    packets delivered, CPU seconds and us per packet."""
    a, b, buf_a, buf_b = pair(transport, total)
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
            del inbox[:due]
            deadline = qp.next_deadline()
            if deadline is not None and deadline <= now:
                qp.on_timer(now)
            for _, data in qp.poll_transmit(now):
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
            "retransmits": sum(q.counters.retransmits for q in (a, b))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("transports", nargs="*", default=["mrc", "rocev2"])
    parser.add_argument("--size", type=int, default=16 << 20, help="bytes each way")
    parser.add_argument("--message", type=int, default=1 << 20, help="bytes per write")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="cProfile one more run")
    args = parser.parse_args()
    for t in args.transports:
        runs = [run(t, args.size, args.message) for _ in range(args.repeat)]
        best = min(runs, key=lambda r: r["us_per_packet"])
        each = ", ".join(f"{r['us_per_packet']:.2f}" for r in runs)
        print(f"{t:<7} {best['packets']:>8} packets  {best['us_per_packet']:6.2f} us/packet "
              f"(best of {args.repeat}: {each})  "
              f"{best['retransmits']} retransmissions")
        if args.profile:
            prof = cProfile.Profile()
            prof.runcall(run, t, args.size, args.message)
            pstats.Stats(prof).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
