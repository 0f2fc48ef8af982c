"""Proof that the fabric forwards as planned, before any traffic: probe every EV.

Each probe is a UDP datagram sent from the source host's namespace to the EV's uSID address.
It counts as proven only if
- it arrives at the destination host, on the port of the EV's plane, with the destination
  address shifted down to the host's own SRv6 address (every uSID consumed: each shift is done
  by the End SID of exactly one router, so the spine and the leaf named in the address were
  crossed), and
- the End SID packet counters of every router moved by exactly the number of probes planned
  through it (bounded by probes received and probes sent when some had to be resent).
On one machine all probing runs from this one process: sockets are created inside the hosts'
namespaces. Over servers, each server's agent sends the probes whose source is on it and
reports what its hosts received; the datagrams and their judging are the same (probes.py).
"""
from __future__ import annotations

import selectors
import socket
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from ipaddress import IPv6Network

from testbed.emulation import probes
from testbed.emulation.network_api import Network
from testbed.emulation.probes import WINDOW, ProbeJob, ProbeOutcome, arrived
from testbed.fabric import paths
from testbed.fabric.paths import EV
from testbed.fabric.plan import FabricPlan
from testbed.kernel import netns
from testbed.kernel.rtnl import NodeNetlink
from testbed.lifecycle import interrupts
from testbed.lifecycle.progress import Progress
from testbed.lifecycle.workers import parallel_map, worker_count


def select_evs(plan: FabricPlan) -> tuple[list[EV], str]:
    cfg = plan.scenario.verify
    total = paths.ev_count(plan)
    if cfg.probes == "all" or (cfg.probes == "auto" and total <= cfg.max_all):
        return list(paths.all_evs(plan)), f"all {total:,} EVs"
    sample = paths.covering_sample(plan, plan.scenario.seed)
    links = len(paths.fabric_directed_links(plan))
    return sample, (f"a sample of {len(sample):,} of {total:,} EVs covering all {links:,} "
                    f"link directions and every End SID (verify.probes: all to probe every EV)")


@dataclass
class Failure:
    ev: EV
    problem: str

    def row(self) -> list[str]:
        return [self.ev.src, self.ev.dst, self.ev.label, str(self.ev.address), self.problem]


@dataclass
class CounterMismatch:
    router: str
    sid: IPv6Network
    expected_min: int
    expected_max: int
    measured: int


@dataclass
class VerifyReport:
    scope: str
    probed: int
    sent: int
    received: int
    duration_s: float
    by_label: dict[str, Counter] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    mismatches: list[CounterMismatch] = field(default_factory=list)
    routers_checked: int = 0

    @property
    def ok(self) -> bool:
        return not self.failures and not self.mismatches

    def table(self, max_failures: int = 20) -> str:
        lines = [f"verification: {self.scope}; {self.probed:,} probed, "
                 f"{self.sent:,} probes sent, {self.received:,} received, "
                 f"{self.duration_s:.2f} s",
                 f"  {'path':<10}{'EVs':>8}{'proven':>8}{'lost':>6}{'wrong':>6}"]
        for label in sorted(self.by_label, key=_label_key):
            c = self.by_label[label]
            lines.append(f"  {label:<10}{c['evs']:>8,}{c['proven']:>8,}{c['lost']:>6,}"
                         f"{c['wrong']:>6,}")
        lines.append(f"  End SID counters: {self.routers_checked} routers checked, "
                     f"{len(self.mismatches)} mismatched")
        if self.failures:
            lines.append(f"  failed EVs ({len(self.failures)}):")
            lines.append(f"    {'src':<6}{'dst':<6}{'path':<10}{'address':<32}problem")
            for f in self.failures[:max_failures]:
                src, dst, label, addr, problem = f.row()
                lines.append(f"    {src:<6}{dst:<6}{label:<10}{addr:<32}{problem}")
            if len(self.failures) > max_failures:
                lines.append(f"    ... and {len(self.failures) - max_failures} more "
                             f"(all in verify.json)")
        for m in self.mismatches[:max_failures]:
            lines.append(f"  {m.router} SID {m.sid}: counter moved {m.measured}, expected "
                         f"{m.expected_min}" + (f"..{m.expected_max}" if m.expected_max !=
                                                m.expected_min else ""))
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {
            "ok": self.ok, "scope": self.scope, "probed": self.probed, "sent": self.sent,
            "received": self.received, "duration_s": round(self.duration_s, 3),
            "routers_checked": self.routers_checked,
            "by_path": {k: dict(v) for k, v in sorted(self.by_label.items())},
            "failures": [dict(zip(["src", "dst", "path", "address", "problem"], f.row(),
                                  strict=True))
                         for f in self.failures],
            "counter_mismatches": [
                {"router": m.router, "sid": str(m.sid), "expected_min": m.expected_min,
                 "expected_max": m.expected_max, "measured": m.measured}
                for m in self.mismatches],
        }


def _label_key(label: str) -> tuple:
    digits = "".join(c if c.isdigit() else " " for c in label).split()
    return tuple(int(d) for d in digits), label


class Prober:
    """Probes toward a share of the destination hosts: a receiving socket in each of them
    (port PROBE_PORT, with the arrival address and port reported) and a sending socket in every
    host, all driven from this one process."""

    def __init__(self, job: ProbeJob, destinations: tuple[str, ...]) -> None:
        self.job = job
        self.senders: dict[str, socket.socket] = {}
        self.receivers: list[socket.socket] = []
        self.selector = selectors.DefaultSelector()
        try:
            for host in job.plan.hosts:
                self.senders[host] = netns.socket_in(job.pids[host], socket.AF_INET6,
                                                     socket.SOCK_DGRAM)
            for host in destinations:
                sock = probes.receiver(job.pids[host])
                self.receivers.append(sock)
                self.selector.register(sock, selectors.EVENT_READ, host)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self.selector.close()
        for sock in [*self.senders.values(), *self.receivers]:
            sock.close()
        self.senders.clear()
        self.receivers.clear()

    def __enter__(self) -> Prober:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _receive(self, timeout: float, nonce: int, out: ProbeOutcome) -> int:
        """Drain arrivals for up to `timeout`; returns how many probes this call read."""
        before = out.datagrams
        for key, _ in self.selector.select(timeout):
            assert isinstance(key.fileobj, socket.socket)  # only receivers are registered
            for index, address, ifindex in probes.receive(key.fileobj, nonce):
                arrived(self.job, out, index, key.data, address, ifindex)
        return out.datagrams - before

    def probe(self, indices: list[int]) -> ProbeOutcome:
        """Send the probes of these EVs, resending lost ones for `retries` more rounds."""
        evs = self.job.evs
        nonce = int(time.monotonic_ns() & 0xFFFFFFFF)
        out = ProbeOutcome()
        pending = _interleave_by_source(evs, indices)
        for _round in range(self.job.retries + 1):
            in_flight = 0
            for index in pending:
                ev = evs[index]
                while in_flight >= WINDOW:
                    interrupts.checkpoint()
                    got = self._receive(0.05, nonce, out)
                    in_flight = 0 if got == 0 else in_flight - got
                self.senders[ev.src].sendto(probes.payload(nonce, index),
                                            (str(ev.address), probes.PROBE_PORT))
                out.sent[index] += 1
                in_flight += 1
            deadline = time.monotonic() + self.job.timeout
            while len(out.seen) < len(indices) and time.monotonic() < deadline:
                interrupts.checkpoint()
                self._receive(0.05, nonce, out)
            pending = [i for i in pending if i not in out.seen]
            if not pending:
                break
        return out


_JOB: ProbeJob | None = None  # set by verify() just before forking the probing workers


def _probe_share(share: tuple[int, int]) -> ProbeOutcome:
    """Worker k of n probes the EVs toward every n-th destination host."""
    k, n = share
    assert _JOB is not None
    destinations = _JOB.plan.hosts[k::n]
    wanted = set(destinations)
    indices = [i for i, ev in enumerate(_JOB.evs) if ev.dst in wanted]
    with Prober(_JOB, destinations) as prober:
        return prober.probe(indices)


def probe_all(job: ProbeJob, progress: Progress) -> ProbeOutcome:
    """Probe every EV of the job, split by destination host over the cores."""
    global _JOB
    workers = 1 if len(job.evs) < 2000 else worker_count(len(job.plan.hosts), 2)
    total = ProbeOutcome()
    _JOB = job
    try:
        shares = [(k, workers) for k in range(workers)]
        for out in parallel_map(_probe_share, shares, progress, "probes", workers=workers):
            total.seen.update(out.seen)
            total.sent.update(out.sent)
            total.received.update(out.received)
            total.datagrams += out.datagrams
    finally:
        _JOB = None
    return total


def _interleave_by_source(evs: list[EV], indices: list[int]) -> list[int]:
    """Probe order that rotates over sources, so no single host port sees a burst."""
    queues: dict[str, list[int]] = defaultdict(list)
    for i in indices:
        queues[evs[i].src].append(i)
    order: list[int] = []
    lists = list(queues.values())
    for k in range(max(map(len, lists), default=0)):
        order.extend(q[k] for q in lists if k < len(q))
    return order


def _router_counters(job: tuple[str, int, dict[str, int]]) -> dict[tuple[str, IPv6Network], int]:
    router, pid, ifindexes = job
    handle = NodeNetlink(pid, ifindexes)
    try:
        return {(router, sid): c["packets"] or 0
                for sid, c in handle.end_sid_counters().items()}
    finally:
        handle.close()


def read_counters(jobs: list[tuple[str, int, dict[str, int]]],
                  progress: Progress) -> dict[tuple[str, IPv6Network], int]:
    """Packets through every router's End SIDs (each job: router, pid, its ifindexes), read
    over the cores."""
    out: dict[tuple[str, IPv6Network], int] = {}
    for counters in parallel_map(_router_counters, jobs, progress, "counters"):
        out.update(counters)
    return out


def verify(network: Network, progress: Progress) -> VerifyReport:
    plan = network.plan
    cfg = plan.scenario.verify
    evs, scope = select_evs(plan)
    t0 = time.monotonic()
    ifindex = {(h, p): network.ifindex[h][plan.ports(h)[p].ifname]
               for h in plan.hosts for p in range(plan.planes)}
    job = ProbeJob(plan, {h: network.pid(h) for h in plan.hosts}, ifindex, evs,
                   cfg.timeout, cfg.retries)
    before = network.end_sid_counters(progress)
    outcome = network.probe_evs(job, progress)
    after = network.end_sid_counters(progress)

    report = VerifyReport(scope, len(evs), sum(outcome.sent.values()), outcome.datagrams, 0.0,
                          routers_checked=len(plan.routers))
    low: Counter = Counter()
    high: Counter = Counter()
    for i, ev in enumerate(evs):
        c = report.by_label.setdefault(ev.label, Counter(evs=0, proven=0, lost=0, wrong=0))
        c["evs"] += 1
        if i not in outcome.seen:
            c["lost"] += 1
            report.failures.append(
                Failure(ev, f"lost ({outcome.sent[i]} probes sent, none arrived)"))
        elif (seen := outcome.seen[i]) is not None:
            c["wrong"] += 1
            report.failures.append(Failure(ev, seen))
        else:
            c["proven"] += 1
        for router in ev.sid_routers():
            key = (router, plan.sid(router, ev.plane))
            low[key] += outcome.received[i]
            high[key] += outcome.sent[i]
    for key in sorted(before, key=lambda k: (k[0], str(k[1]))):
        delta = after.get(key, 0) - before[key]
        if not low[key] <= delta <= high[key]:
            report.mismatches.append(CounterMismatch(key[0], key[1], low[key], high[key], delta))
    for key in set(high) - set(before):
        report.mismatches.append(CounterMismatch(key[0], key[1], low[key], high[key], 0))
    report.duration_s = time.monotonic() - t0
    return report
