#!/usr/bin/env python3
"""How the RoCEv2 baseline's results depend on DCQCN's scaled timers: a sweep on the simnet.

DCQCN's CNP spacing and its alpha / rate-increase timers are ratios to the path's base RTT
(hostagent/protocol/dcqcn.py, `CONSTANTS`: 5 and 5.5 RTTs, from the paper's 50 and 55 us over
a 10 us fabric RTT). This sweeps both ratios over 0.5-20 base RTTs in three seeded cases on the
sans-IO simulated network (tests/unit/hostagent/simnet.py), each shaped like quickstart's
fabric (25 Mbit/s ports, 4 KB packets, 100 KB buffers marking ECN above a fifth and dropping
when full, the other hops' serialization as path latency: a 5.5 ms base RTT):

- bottleneck: one QP through a port at half its line rate;
- incast: 4 QPs, each at line rate, into one port;
- shared: 2 QPs sharing one port.

For each setting: the time until the last QP's 1 MiB write completes, its share of the ideal
(every byte at the port's rate, and one base RTT), timeouts, CNPs and rate cuts over all
QPs ("fail": a QP used up its retries). `*` marks the default ratios, `<` the best share per
case. No root; about 15 s of CPU.

    .venv/bin/python bench/dcqcn.py           # share-of-ideal matrices, default and best rows
    .venv/bin/python bench/dcqcn.py --full    # and every setting's row
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hostagent.protocol import nic, wire  # noqa: E402
from hostagent.protocol.dcqcn import CONSTANTS, DcqcnCC, DcqcnConfig  # noqa: E402
from hostagent.protocol.qp import QPConfig, WriteDone  # noqa: E402
from hostagent.protocol.rocev2 import RoceQP  # noqa: E402
from tests.unit.hostagent.simnet import Link, PathModel, SimNet  # noqa: E402

LINE = 25e6  # bit/s: every host port
MSS = 4096
BUFFER = 100_000  # bytes at the bottleneck port: ECN above a fifth, dropped when full
SIZE = 1 << 20  # bytes each QP writes
MAX_CWND = 256 * 1024
RATIOS = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0)
DEFAULT_CNP = CONSTANTS["cnp_rtts"].value
DEFAULT_TIMER = CONSTANTS["timer_rtts"].value
TIMERS = tuple(sorted({*RATIOS, DEFAULT_TIMER} - {5.0}))
HOP = (MSS + wire.HEADER_SIZE + nic.FRAME_OVERHEAD) * 8 / LINE  # s: a packet at one line hop
ACK_HOP = (wire.HEADER_SIZE + nic.FRAME_OVERHEAD) * 8 / LINE
DATA_LATENCY = 3 * HOP  # the data's other hops: host port, leaf up, spine down
ACK_LATENCY = 4 * ACK_HOP


@dataclass(frozen=True)
class Case:
    name: str
    senders: int
    port_share: float  # the shared port's rate, as a share of the line rate

    @property
    def port_rate(self) -> float:
        return self.port_share * LINE / 8  # bytes/s

    @property
    def base_rtt(self) -> float:
        """As testbed/run/traffic.py's: a packet at each hop, its ACK back."""
        return DATA_LATENCY + (MSS + wire.HEADER_SIZE) / self.port_rate + ACK_LATENCY

    @property
    def ideal(self) -> float:
        """Every sender's bytes through the port at its rate, with our header per packet."""
        packets = -(-SIZE // MSS)
        return self.senders * (SIZE + packets * wire.HEADER_SIZE) / self.port_rate + \
            self.base_rtt


CASES = (Case("bottleneck", 1, 0.5), Case("incast", 4, 1.0), Case("shared", 2, 1.0))


@dataclass
class Result:
    time: float
    share: float
    timeouts: int
    cnps: int
    cuts: int
    failed: bool


def run(case: Case, cnp_rtts: float, timer_rtts: float, seed: int = 1) -> Result:
    port = Link(rate=case.port_rate, ecn_bytes=BUFFER / 5, trim_bytes=BUFFER)
    timeout = 2 * BUFFER / case.port_rate + 0.005  # the scenario's default (schema.py)
    cfg = QPConfig(mss=MSS, max_cwnd=MAX_CWND, timeout=timeout, line_rate=LINE,
                   base_rtt=case.base_rtt)
    senders, nets = [], []
    for k in range(case.senders):
        a, b = (RoceQP(qpn, peer, memoryview(bytearray(SIZE)), cfg, seed * 100 + qpn,
                       cc=DcqcnCC(DcqcnConfig.for_path(MSS, MAX_CWND, LINE, case.base_rtt,
                                                       cnp_rtts, timer_rtts)))
                for qpn, peer in ((2 * k + 1, 2 * k + 2), (2 * k + 2, 2 * k + 1)))
        net = SimNet(a, b, seed=seed * 100 + k)
        net.paths[("a", 0)] = PathModel(latency=DATA_LATENCY, link=port)
        net.paths[("b", 0)] = PathModel(latency=ACK_LATENCY)
        a.post_write(0, memoryview(bytes(SIZE)), 0, None, 0.0, peer=1)
        senders.append(a)
        nets.append(net)
    now = 0.0
    until = 60 * case.ideal
    while not all(qp.events or qp.failed for qp in senders) and now <= until:
        for net in nets:
            net.step(now)
        times = [t for t in (net.next_time() for net in nets) if t is not None]
        if not times:
            break
        now = max(now, min(times))
    ends = [e.stats.end for qp in senders for e in qp.events if isinstance(e, WriteDone)]
    failed = len(ends) < len(senders)
    end = now if failed else max(ends)
    return Result(end, 0.0 if failed else case.ideal / end,
                  sum(qp.counters.timeouts for qp in senders),
                  sum(qp.cc.cnps for qp in senders if isinstance(qp.cc, DcqcnCC)),
                  sum(qp.cc.decreases for qp in senders), failed)


def marks(key: tuple[float, float], best: tuple[float, float]) -> str:
    return ("*" if key == (DEFAULT_CNP, DEFAULT_TIMER) else " ") + ("<" if key == best else " ")


def cell(r: Result) -> str:
    return "  fail" if r.failed else f"{r.share:>6.0%}"


def row(key: tuple[float, float], r: Result, best: tuple[float, float]) -> str:
    return (f" {marks(key, best)}{key[0]:>5g} {key[1]:>6g} {r.time:8.3f} {cell(r)} "
            f"{r.timeouts:8d} {r.cnps:6d} {r.cuts:6d}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="print every setting's row")
    args = parser.parse_args()
    header = "    cnp  timer   time s  share timeouts   cnps   cuts"
    print(f"base RTT {CASES[0].base_rtt * 1e3:.2f} ms (bottleneck) / "
          f"{CASES[1].base_rtt * 1e3:.2f} ms; ratios in base RTTs; share = ideal / time")
    for case in CASES:
        results = {(c, t): run(case, c, t) for c in RATIOS for t in TIMERS}
        best = max(results, key=lambda k: results[k].share)
        print(f"\n{case.name}: {case.senders} QP(s) into a port at {case.port_share:g} x "
              f"{LINE / 1e6:g} Mbit/s, ideal {case.ideal:.3f} s")
        print("  share of ideal: rows CNP spacing, columns timer")
        print("  cnp\\timer" + "".join(f"{t:>6g}  " for t in TIMERS))
        for c in RATIOS:
            print(f"  {c:>9g}" + "".join(cell(results[(c, t)]) + marks((c, t), best)
                                         for t in TIMERS))
        print(header)
        keys = list(results) if args.full else sorted({(DEFAULT_CNP, DEFAULT_TIMER), best})
        for key in keys:
            print(row(key, results[key], best))


if __name__ == "__main__":
    main()
