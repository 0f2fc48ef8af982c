"""Telemetry of every port while the workload runs: counters sampled on a period.

The period is the scenario's `telemetry.period`, or by default 10 Hz stretched until a sweep
over every port takes at most SWEEP_BUDGET of a core (measured before the traffic, then on
every sweep while it runs, where a sweep costs more):
the sampler shares the cores with the agents, and on ref-64 (112 nodes, 30-67 ms a sweep) the
fixed 0.25 s it had took 27% of a core: 14 of the 95 points of the run's CPU with which MRC at
1 Mbit/s was judged not faithful (the bound is 90%; the stretched period left the runner 6-8).

The network reads its nodes' ports (`FabricNetwork.sample_ports`; in the cluster mode each
server's agent reads its own, all servers at once): interface counters from
/proc/<pid>/net/dev, about 70 microseconds a node; queue drops and backlog (the byte FIFO
behind each port's shaper, where congestion losses happen) from a netlink qdisc dump per node,
about 0.1 ms a node (testbed/kernel/qdisc_stats.py): they are read every k-th sample, k chosen
from their measured cost so that they take at most QUEUE_BUDGET of a core (their rows carry
them; the others leave them empty). On ref-64 that is every sample or every second one.
Router ports running the ECN/trimming program also carry its counters (`ecn_marked`,
`trimmed`, `bpf_dropped`, `lossless_overflow`) and virtual queue (`vq_bytes`), read from its
BPF map every sample (a few microseconds a port); host ports leave them empty.
Timestamps are wall clock (the clock the agents use), taken as each node's counters are read
(a server's, shifted into this machine's clock by its measured offset). The sampler runs in a
thread and measures its own CPU time, so its cost is a number in meta.json, not a guess.
"""
from __future__ import annotations

import math
import threading
import time

from testbed.emulation.network_api import Network

SWEEP_BUDGET = 0.05  # share of one core the port sweeps may take (a default period stretches)
QUEUE_BUDGET = 0.05  # share of one core the queue statistics may take
SWEEP_SMOOTHING = 0.2  # weight of the newest sweep in the running mean of a sweep's cost
_QUEUE_FIELDS = ("ecn_marked", "trimmed", "bpf_dropped", "lossless_overflow", "vq_bytes")
_FIELDS = ("rx_bytes", "rx_packets", "rx_errors", "rx_drop", "tx_bytes", "tx_packets",
           "tx_errors", "tx_drop")


DEFAULT_PERIOD = 0.1  # s: 10 Hz, where a sweep costs little (quickstart: about 3 ms)


class Sampler:
    def __init__(self, network: Network, period: float | None) -> None:
        """`period`: the scenario's, kept as given; None: DEFAULT_PERIOD, stretched by cost."""
        self.network = network
        self.period = DEFAULT_PERIOD if period is None else period
        self._stretch = period is None
        plan = network.plan
        links = plan.link_by_ports
        self._ports = {name: {p.ifname: links[(name, p.ifname)] for p in plan.ports(name)}
                       for name in plan.nodes}
        self.rows: list[dict] = []
        self.cpu_seconds = 0.0
        self.samples = 0
        self.queue_every = 1  # read queue stats every k-th sample (adapted to their cost)
        self._sweep_cost: float | None = None  # running mean of a sweep's CPU, s
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="telemetry", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _fit_period(self) -> None:
        """Stretch a default period to what a sweep costs here. The first read opens this
        thread's netlink sockets in every node and costs more than the sweeps will; the second
        is timed. Neither makes rows: the traffic has not started."""
        self.network.sample_ports(False)
        t0 = time.thread_time()
        self.network.sample_ports(False)
        self.period = max(self.period, (time.thread_time() - t0) / SWEEP_BUDGET)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        t_cpu = time.thread_time()
        try:
            if self._stretch:
                self._fit_period()
            next_at = time.monotonic()
            while not self._stop.is_set():
                self._sample()
                next_at += self.period
                self._stop.wait(max(0.0, next_at - time.monotonic()))
            self._sample()  # the state at the end
        except Exception as exc:  # noqa: BLE001 (reported by the runner; traffic goes on)
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.cpu_seconds = time.thread_time() - t_cpu

    def _sample(self) -> None:
        """One sweep into rows. Its CPU (the read and the rows) keeps the budgets: a sweep
        with queue statistics sets how often they are read; with a default period, the others
        stretch it further while the traffic runs, where a sweep costs more than on the idle
        machine `_fit_period` measured (ref-64: the sampler took 14-16% of a core against
        its 5% budget for sweeps)."""
        with_queues = self.samples % self.queue_every == 0 or self._stop.is_set()
        t0 = time.thread_time()
        for name, ports in self.network.sample_ports(with_queues).items():
            for ifname, (c, backlog, drops, bpf, read_at) in ports.items():
                self._row(read_at, name, ifname, c, (backlog, drops), _bpf_fields(bpf))
        cost = time.thread_time() - t0
        if with_queues:
            self.queue_every = max(1, math.ceil(cost / (QUEUE_BUDGET * self.period)))
        elif self._stretch:
            mean = cost if self._sweep_cost is None else self._sweep_cost
            self._sweep_cost = mean + SWEEP_SMOOTHING * (cost - mean)
            self.period = max(self.period, self._sweep_cost / SWEEP_BUDGET)
        self.samples += 1

    def _row(self, now: float, name: str, ifname: str, c, q, bpf: dict) -> None:
        link = self._ports[name][ifname]
        self.rows.append({"time": now, "node": name, "ifname": ifname,
                          "link": link.name, "kind": link.kind, "plane": link.plane,
                          **dict(zip(_FIELDS, c, strict=True)),
                          "queue_backlog": q[0], "queue_drops": q[1], **bpf})


def _bpf_fields(state: dict[str, int] | None) -> dict[str, int | None]:
    """The eBPF queue's counters as telemetry columns (empty where the program is not)."""
    if state is None:
        return dict.fromkeys(_QUEUE_FIELDS)
    return {"ecn_marked": state["marked"], "trimmed": state["trimmed"],
            "bpf_dropped": state["dropped"], "lossless_overflow": state["overflow"],
            "vq_bytes": state["queue"]}
