"""The one build sequence, used by runs (runner.py) and by scripts (`fabric`: benchmarks,
tests, the calibration): the network a scenario asks for, made phase by phase and verified."""
from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from testbed.cluster.network import ClusterNetwork
from testbed.emulation.network import FabricNetwork
from testbed.emulation.network_api import Network
from testbed.emulation.verify import VerifyReport, verify
from testbed.errors import VerificationFailed
from testbed.fabric.plan import FabricPlan, make_plan
from testbed.lifecycle.progress import Progress
from testbed.lifecycle.registry import RunRegistry
from testbed.scenario import Scenario


def make_network(plan: FabricPlan, registry: RunRegistry, progress: Progress) -> Network:
    """The network a scenario asks for: on this machine, or over its `cluster:` servers."""
    if plan.scenario.cluster is not None:
        return ClusterNetwork(plan, registry, progress)
    return FabricNetwork(plan, registry, progress)


def build(network: Network, progress: Progress,
          prepared: Callable[[], None] = lambda: None) -> VerifyReport:
    """The network's own preparation (the cluster's servers), then nodes, links, routes and
    verification, each a phase; `prepared` is called between the first two (the runner
    records the machines then, so that a failed build still names them)."""
    plan = network.plan
    network.prepare(progress)
    prepared()
    with progress.phase("nodes") as info:
        network.add_nodes()
        info["done"] = (f"{len(plan.nodes)} namespaces ({len(plan.hosts)} hosts, "
                        f"{len(plan.routers)} routers)")
    with progress.phase("links") as info:
        info["done"] = network.add_links()
    with progress.phase("routes") as info:
        network.configure()
        info["done"] = "addresses, neighbours, routes, End SIDs, htb shapers" + (
            ", ECN/trimming at router ports" if plan.scenario.switch.enabled else "")
    with progress.phase("verify") as info:
        report = verify(network, progress)
        info["done"] = (f"{report.probed:,} EVs proven" if report.ok else
                        f"{len(report.failures)} EVs and {len(report.mismatches)} counters FAILED")
    return report


@contextlib.contextmanager
def fabric(scenario: Scenario, progress: Progress | None = None,
           run_id: str | None = None) -> Iterator[Network]:
    """A built and verified fabric for scripts (benchmarks, tests), always torn down after.
    Registered like a run, so `mrc-testbed clean` finds it should the script be killed."""
    progress = progress or Progress(quiet=True)
    plan = make_plan(scenario)
    registry = RunRegistry(run_id or f"script-{os.getpid()}-{time.monotonic_ns()}",
                           Path("."), scenario.name)
    network = make_network(plan, registry, progress)
    try:
        report = build(network, Progress(quiet=True))  # the caller's phases stay its own
        if not report.ok:
            raise VerificationFailed(report.table())
        yield network
    finally:
        network.close()
