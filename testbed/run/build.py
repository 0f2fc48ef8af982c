"""A built and verified fabric for scripts (benchmarks, tests, the calibration), always torn
down after; registered like a run, so `mrc-testbed clean` finds it should the script be killed."""
from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

from testbed.emulation.cluster.network import ClusterNetwork, make_network
from testbed.emulation.network import FabricNetwork
from testbed.emulation.verify import verify
from testbed.errors import VerificationFailed
from testbed.fabric.plan import make_plan
from testbed.lifecycle.progress import Progress
from testbed.lifecycle.registry import RunRegistry
from testbed.scenario import Scenario


@contextlib.contextmanager
def fabric(scenario: Scenario, progress: Progress | None = None,
           run_id: str | None = None) -> Iterator[FabricNetwork]:
    """A built and verified fabric for scripts (benchmarks, tests), always torn down after.
    Registered like a run, so `mrc-testbed clean` finds it should the script be killed."""
    progress = progress or Progress(quiet=True)
    plan = make_plan(scenario)
    registry = RunRegistry(run_id or f"script-{os.getpid()}-{time.monotonic_ns()}",
                           Path("."), scenario.name)
    network = make_network(plan, registry, progress)
    try:
        if isinstance(network, ClusterNetwork):
            network.add_servers()
        network.add_nodes()
        network.add_links()
        network.configure()
        report = verify(network, progress)
        if not report.ok:
            raise VerificationFailed(report.table())
        yield network
    finally:
        network.close()
