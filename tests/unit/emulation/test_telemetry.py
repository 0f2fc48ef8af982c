"""The telemetry sampler over any network that reads its own ports (`sample_ports`): the same
rows whether this machine or a server's agent read them, queue statistics every k-th sample."""
from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from testbed import scenario
from testbed.emulation import telemetry
from testbed.emulation.telemetry import Sampler
from testbed.fabric.plan import make_plan

PLAN = make_plan(scenario.parse(
    "name: t\nfabric: {planes: 1, leaves_per_plane: 2, spines_per_plane: 1, hosts_per_leaf: 1}\n",
    "x"))


def _spend(seconds: float) -> None:
    t0 = time.thread_time()
    while time.thread_time() - t0 < seconds:
        pass


class FakeCPU:
    """The sampler's CPU clock, advanced by what the fake sweeps cost and nothing else: the
    period's arithmetic without the machine's load in it (the rows' own processing and a
    hypervisor's steal would add to a real clock)."""

    def __init__(self) -> None:
        self.spent = 0.0

    def thread_time(self) -> float:
        return self.spent


class Ports:
    """A network as the sampler sees it: its plan and its ports' counters, `sweep` s of CPU a
    sample (`loaded` s after the first two, as traffic starts), 1 ms more with queue
    statistics (a netlink dump's cost, on the sampler's own thread)."""

    def __init__(self, sweep: float = 0.0, loaded: float | None = None,
                 cpu: FakeCPU | None = None, queues: float = 0.001) -> None:
        self.plan = PLAN
        self.sweep = sweep
        self.queues = queues  # what queue statistics add to a sweep
        self.loaded = sweep if loaded is None else loaded  # a sweep's cost once traffic runs
        self.cpu = cpu  # where the cost is counted instead of spent
        self.asked: list[bool] = []

    def sample_ports(self, queues: bool) -> dict[str, dict[str, list]]:
        self.asked.append(queues)
        cost = (self.queues if queues else 0.0) + (self.sweep if len(self.asked) <= 2
                                                   else self.loaded)
        if self.cpu is None:
            _spend(cost)
        else:
            self.cpu.spent += cost
        fifo = [10, 11] if queues else [None, None]
        bpf = {"marked": 1, "trimmed": 2, "dropped": 3, "queue": 4, "overflow": 5}
        return {name: {p.ifname: [list(range(8)), *fifo, bpf if router(name) else None,
                                  read_at(name, len(self.asked))]
                       for p in self.plan.ports(name)} for name in self.plan.nodes}


def read_at(node: str, sample: int) -> float:
    """When the fake read a node: each node apart, as a slow sweep over the nodes reads them."""
    return 1000.0 * sample + sorted(PLAN.nodes).index(node)


def router(node: str) -> bool:
    return PLAN.nodes[node].role != "host"


def test_rows_from_the_networks_own_ports():
    network = Ports()
    sampler = Sampler(network, period=0.002)  # type: ignore[arg-type]
    sampler.start()
    time.sleep(0.1)
    sampler.stop()
    assert sampler.error is None and sampler.samples == len(network.asked) > 2
    leaf = next(r for r in sampler.rows if router(r["node"]) and r["queue_backlog"] is not None)
    assert leaf["rx_bytes"] == 0 and leaf["tx_drop"] == 7 and leaf["queue_drops"] == 11
    assert (leaf["ecn_marked"], leaf["trimmed"], leaf["bpf_dropped"], leaf["vq_bytes"],
            leaf["lossless_overflow"]) == (1, 2, 3, 4, 5)
    assert leaf["link"] and leaf["kind"] in ("host", "fabric")
    assert {r["node"] for r in sampler.rows} == set(PLAN.nodes)
    assert len({(r["node"], r["ifname"]) for r in sampler.rows}) == 2 * len(PLAN.links)
    # each row carries its node's own read time, not the sweep's start
    assert all(r["time"] % 1000.0 == sorted(PLAN.nodes).index(r["node"]) for r in sampler.rows)
    host = next(r for r in sampler.rows if not router(r["node"]))
    assert host["ecn_marked"] is None and host["vq_bytes"] is None
    # 1 ms of queue statistics against a twentieth of a 2 ms period: every 10th sample
    assert network.asked[0] and sampler.queue_every >= 10
    assert not all(network.asked[1:-1]) and network.asked[-1]  # the last one has them again


def test_a_default_period_stretches_to_the_sweeps_cost():
    """10 ms of CPU a sweep against a twentieth of a core: 0.2 s, not 10 Hz; the two
    measuring sweeps leave no row. A period the scenario gives is kept, whatever a sweep
    costs."""
    network = Ports(sweep=0.01)
    sampler = Sampler(network, period=None)  # type: ignore[arg-type]
    sampler.start()
    sampler.stop()
    assert 0.2 <= sampler.period < 0.3
    assert sampler.samples == len(network.asked) - 2 and sampler.samples >= 1
    given = Sampler(Ports(sweep=0.01), period=0.05)  # type: ignore[arg-type]
    given.start()
    given.stop()
    assert given.period == 0.05


def test_a_default_period_stretches_further_when_sweeps_cost_more_under_load(monkeypatch):
    """1 ms a sweep on the idle machine (the fit keeps 10 Hz), 10 ms once the traffic runs,
    then 4 ms: the period follows the running mean of the sweeps' cost to 10 ms / a twentieth
    of a core = 0.2 s, and does not shrink when sweeps get cheaper. Queue statistics cost 20 ms
    here, so that they are read every few sweeps and the others keep measuring."""
    cpu = FakeCPU()
    monkeypatch.setattr(telemetry, "time", SimpleNamespace(thread_time=cpu.thread_time,
                                                         monotonic=time.monotonic))
    network = Ports(sweep=0.001, loaded=0.01, cpu=cpu, queues=0.02)
    sampler = Sampler(network, period=None)  # type: ignore[arg-type]
    t0 = time.monotonic()
    sampler.start()
    time.sleep(0.5)
    assert sampler.period == pytest.approx(0.2), sampler.period  # 0.01 / 0.05
    network.loaded = 0.004
    measured = network.asked.count(False)
    time.sleep(0.7)
    sampler.stop()
    assert network.asked.count(False) > measured  # a cheaper sweep was measured
    assert sampler.period == pytest.approx(0.2), sampler.period
    # about a tenth of a core (a twentieth each for sweeps and queue statistics), not a fifth
    assert sampler.cpu_seconds <= 0.12 * (time.monotonic() - t0) + 0.03
