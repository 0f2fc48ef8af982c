"""Telemetry of every port while the workload runs: counters sampled on a fixed period.

In the cluster mode each server's agent reads its own nodes the same way (`sample_servers`).
Interface counters come from /proc/<pid>/net/dev, which shows the namespace of the node's
shell: no netlink, no namespace switch, about 50 microseconds a node. Queue drops and backlog
(the byte FIFO behind each port's shaper, where congestion losses happen) come from a netlink
qdisc dump per node, which costs about 1 ms a node in pyroute2: they are read every k-th
sample, k chosen from their measured cost so that they take at most a tenth of a core (their
rows carry them; the others leave them empty). Router ports running the ECN/trimming program
also carry its counters (`ecn_marked`, `trimmed`, `bpf_dropped`) and virtual queue
(`vq_bytes`), read from its BPF map every sample (a few microseconds a port); host ports leave
them empty. Timestamps are wall clock (the clock the agents use), taken as each node is read
(in the cluster mode: when the servers are asked). The sampler runs in a thread and measures
its own CPU time, so its cost is a number in meta.json, not a guess.
"""
from __future__ import annotations

import math
import threading
import time
from pathlib import Path

from testbed.emulation.network import FabricNetwork
from testbed.kernel.rtnl import NodeNetlink

QUEUE_BUDGET = 0.1  # share of one core the queue statistics may take
_QUEUE_FIELDS = ("ecn_marked", "trimmed", "bpf_dropped", "vq_bytes")
_FIELDS = ("rx_bytes", "rx_packets", "rx_errors", "rx_drop", "tx_bytes", "tx_packets",
           "tx_errors", "tx_drop")


def default_period(nodes: int) -> float:
    """10 Hz on small fabrics; slower where a sample costs more than the fabric can spare."""
    return 0.1 if nodes <= 40 else 0.25 if nodes <= 120 else 0.5


def read_net_dev(pid: int, wanted: set[str]) -> dict[str, tuple[int, ...]]:
    """Counters of the node's interfaces named in `wanted`."""
    out = {}
    for line in Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]:
        name, _, rest = line.partition(":")
        name = name.strip()
        if name in wanted:
            v = rest.split()
            out[name] = (int(v[0]), int(v[1]), int(v[2]), int(v[3]),
                         int(v[8]), int(v[9]), int(v[10]), int(v[11]))
    return out


class Sampler:
    def __init__(self, network: FabricNetwork, period: float) -> None:
        self.network = network
        self.period = period
        plan = network.plan
        links = plan.link_by_ports
        self._ports = {name: {p.ifname: links[(name, p.ifname)] for p in plan.ports(name)}
                       for name in plan.nodes}
        self._ifindex = {(p.node, p.ifname): p.ifindex
                         for name in plan.nodes for p in plan.ports(name)}
        self.rows: list[dict] = []
        self.cpu_seconds = 0.0
        self.samples = 0
        self.queue_every = 1  # read queue stats every k-th sample (adapted to their cost)
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="telemetry", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        handles: dict[str, NodeNetlink] = {}
        t_cpu = time.thread_time()
        try:
            remote = getattr(self.network, "sample_servers", None)  # cluster mode: agents
            for name in self._ports if remote is None else ():  # sockets are per thread
                handles[name] = NodeNetlink(self.network.pid(name),
                                            self.network.ifindex.get(name))
            next_at = time.monotonic()
            while not self._stop.is_set():
                self._sample(handles)
                next_at += self.period
                self._stop.wait(max(0.0, next_at - time.monotonic()))
            self._sample(handles)  # the state at the end
        except Exception as exc:  # noqa: BLE001 (reported by the runner; traffic goes on)
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            for handle in handles.values():
                handle.close()
            self.cpu_seconds = time.thread_time() - t_cpu

    def _sample(self, handles: dict[str, NodeNetlink]) -> None:
        now = time.time()
        with_queues = self.samples % self.queue_every == 0 or self._stop.is_set()
        t0 = time.thread_time()
        remote = getattr(self.network, "sample_servers", None)
        if remote is not None:  # each server's agent reads its nodes, all servers at once
            for name, ports in remote(with_queues).items():
                for ifname, (c, backlog, drops, bpf) in ports.items():
                    self._row(now, name, ifname, c, (backlog, drops), _bpf_fields(bpf))
        for name, ports in self._ports.items() if remote is None else ():
            counters = read_net_dev(self.network.pid(name), set(ports))
            # stamped when read: on a loaded machine a sweep over the nodes takes tens of ms,
            # and a fault window's edges are judged against these times
            now = time.time()
            queues = handles[name].queue_stats() if with_queues else {}
            for ifname in ports:
                c = counters.get(ifname)
                if c is None:
                    continue
                q = queues.get(handles[name].ifindex(ifname), (None, None))
                self._row(now, name, ifname, c, q, self._queue_counters(name, ifname))
        if with_queues:
            cost = time.thread_time() - t0
            self.queue_every = max(1, math.ceil(cost / (QUEUE_BUDGET * self.period)))
        self.samples += 1

    def _row(self, now: float, name: str, ifname: str, c, q, bpf: dict) -> None:
        link = self._ports[name][ifname]
        self.rows.append({"time": now, "node": name, "ifname": ifname,
                          "link": link.name, "kind": link.kind, "plane": link.plane,
                          **dict(zip(_FIELDS, c, strict=True)),
                          "queue_backlog": q[0], "queue_drops": q[1], **bpf})

    def _queue_counters(self, node: str, ifname: str) -> dict[str, int | None]:
        state = None
        if self.network.queues is not None:
            state = self.network.queues.counters(self._ifindex[(node, ifname)])
        return _bpf_fields(state)


def _bpf_fields(state: dict[str, int] | None) -> dict[str, int | None]:
    """The eBPF queue's counters as telemetry columns (empty where the program is not)."""
    if state is None:
        return dict.fromkeys(_QUEUE_FIELDS)
    return {"ecn_marked": state["marked"], "trimmed": state["trimmed"],
            "bpf_dropped": state["dropped"], "vq_bytes": state["queue"]}
