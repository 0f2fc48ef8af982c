"""The algorithm a run's collective runs: `workload.algorithm` resolved against the fabric
(pure).

`auto` chooses by the cost model of hostagent/workloads/algorithms.py. What the model sees of
the fabric: the one-way latency of a path across a spine (every link's hop latency, both NICs'
latency, one packet's store-and-forward on each link after the first), and the rate a rank
injects at line rate on every plane. Both in the emulated frame, whose ratio (latency x rate,
bytes) is the real fabric's under time dilation, so the choice is the one the real fabric
would make. Both transports get the same choice: it depends on the NIC, not on the transport.
"""
from __future__ import annotations

from dataclasses import dataclass

from hostagent.workloads import algorithms
from hostagent.workloads.algorithms import Algorithm, Choice
from testbed.fabric.latency import ACROSS_A_SPINE, arrival_delay
from testbed.scenario.schema import Scenario


@dataclass(frozen=True)
class Resolved:
    """What the agents run and what the results say of it."""

    setting: Choice | None  # as the scenario gave it
    algorithm: Algorithm | None  # the looped collective's, chosen (None: a step graph's setting)
    modelled: dict[str, float] | None  # auto: each algorithm's modelled seconds (emulated)
    fabric: algorithms.Fabric

    @property
    def recorded(self) -> str | None:
        """What the results name: the algorithm that ran, a step graph's setting, or None when
        the scenario asked for none (the collective's default ran)."""
        return None if self.setting is None else self.algorithm or self.setting


def cost_fabric(scenario: Scenario) -> algorithms.Fabric:
    f = scenario.fabric
    return algorithms.Fabric(arrival_delay(scenario, ACROSS_A_SPINE),
                             f.planes * f.host_link.rate / 8)


def resolve(scenario: Scenario) -> Resolved:
    w = scenario.workload
    fabric = cost_fabric(scenario)
    if w.steps:
        return Resolved(w.algorithm, None, None, fabric)
    world = len(scenario.rank_hosts())
    choice = w.algorithm or algorithms.default(w.collective)
    modelled = None
    if choice == "auto":
        times = algorithms.times(w.collective, w.size, world, fabric)
        modelled = {str(a): seconds for a, seconds in times.items()}
    return Resolved(w.algorithm, algorithms.choose(w.collective, choice, w.size, world, fabric),
                    modelled, fabric)
