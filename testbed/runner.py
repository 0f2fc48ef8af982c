"""One run, phase by phase, with a teardown that always happens.

Phases: preflight (root, kernel features, leftovers of crashed runs) -> plan (pure) -> nodes ->
links -> routes -> verify -> hold/CLI -> teardown. SIGINT, SIGTERM and SIGHUP become an
`Interrupted` exception (see interrupts.py), so the same `finally` tears down after a normal
end, an error or a signal; signals are ignored during teardown so a second Ctrl-C cannot
leave it half done. The results folder's meta.json records how the run ended and in which phase.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from . import cleanup, features, interrupts, state
from .errors import EnvironmentProblem, TestbedError, VerificationFailed
from .network import FabricNetwork
from .plan import make_plan
from .progress import Progress
from .results import RunResults
from .scenario import Scenario, describe
from .state import RunRegistry
from .verify import verify


@dataclass
class RunOptions:
    results_base: Path
    verify_only: bool = False
    hold: float = 0.0
    cli: bool = False


def preflight(progress: Progress) -> dict:
    features.require_root()
    features.require_mininet()
    for record, killed in cleanup.clean_stale():
        progress.say(f"  cleaned what crashed run {record.run_id} left: {len(record.nodes)} "
                     f"nodes recorded, {killed} of their processes still running were ended")
    live = [r for r in state.read_all() if r.runner_alive()]
    if live:
        r = live[0]
        raise EnvironmentProblem(
            f"another run is active: {r.run_id} (pid {r.runner_pid}); two fabrics on two cores "
            f"would make both runs' numbers meaningless",
            f"wait for it, or stop it with `kill {r.runner_pid}`")
    return features.require_fabric_features()


def run(scenario: Scenario, scenario_text: str, options: RunOptions, progress: Progress) -> Path:
    """Build, verify, hold; always tear down. Returns the results folder."""
    progress.say(describe(scenario))
    with interrupts.deferred():
        with progress.phase("preflight") as info:
            found = preflight(progress)
            plan = make_plan(scenario)
            info["done"] = "root, Mininet, SRv6 next-csid, seg6local counters, htb"
        results = registry = network = None
        status, error, phase = "failed", None, None
        try:
            results = RunResults(options.results_base, scenario.name, scenario_text,
                                 scenario.seed)
            results.meta["features"] = found
            results.save()
            progress.say(f"  results   {results.dir}")
            registry = RunRegistry(results.run_id, results.dir, scenario.name)
            network = FabricNetwork(plan, registry, progress)
            _build_and_use(network, results, options, progress)
            status = "complete"
        except KeyboardInterrupt as exc:  # Interrupted, from interrupts.checkpoint
            status, error, phase = "interrupted", str(exc) or "interrupted", progress.current
            raise
        except TestbedError as exc:
            error, phase = str(exc), progress.current
            raise
        except BaseException as exc:
            error, phase = f"{type(exc).__name__}: {exc}", progress.current
            raise
        finally:
            with interrupts.ignored():
                _teardown(network, registry, plan, progress)
                if results is not None:
                    results.meta["ended_in_phase"] = phase
                    results.finish(status, error, progress.durations)
    assert results is not None
    return results.dir


def _teardown(network: FabricNetwork | None, registry: RunRegistry | None, plan,
              progress: Progress) -> None:
    if network is not None:
        with progress.phase("teardown") as info:
            killed = network.close()
            info["done"] = f"{killed} processes ended, {len(plan.nodes)} namespaces removed"
    elif registry is not None:
        registry.close()


def _build_and_use(network: FabricNetwork, results: RunResults, options: RunOptions,
                   progress: Progress) -> None:
    plan = network.plan
    with progress.phase("nodes") as info:
        network.add_nodes()
        info["done"] = f"{len(plan.nodes)} namespaces ({len(plan.hosts)} hosts, " \
                       f"{len(plan.routers)} routers)"
    with progress.phase("links") as info:
        network.add_links()
        info["done"] = f"{len(plan.links)} veth links"
    with progress.phase("routes") as info:
        network.configure()
        info["done"] = "addresses, neighbours, routes, End SIDs, htb shapers"
    with progress.phase("verify") as info:
        report = verify(network, progress)
        results.write_json("verify.json", report.to_json())
        info["done"] = (f"{report.probed:,} EVs proven" if report.ok else
                        f"{len(report.failures)} EVs and {len(report.mismatches)} counters FAILED")
    if options.verify_only or not report.ok:
        progress.say(report.table())
    if not report.ok:
        raise VerificationFailed(
            f"{len(report.failures)} of {report.probed} paths did not forward as planned and "
            f"{len(report.mismatches)} End SID counters disagree (table above, all in "
            f"{results.dir}/verify.json)", "this is a testbed or kernel bug: please report it")
    if options.verify_only:
        return
    if options.cli:
        from mininet.cli import CLI
        with progress.phase("cli", "Mininet CLI closed"):
            CLI(network.net)  # Mininet handles Ctrl-C in its prompt; a SIGTERM ends the run after
    elif options.hold > 0:
        with progress.phase("hold", f"held {options.hold:g} s"):
            progress.say(f"  holding the fabric for {options.hold:g} s (Ctrl-C ends it early)")
            with interrupts.immediate():
                time.sleep(options.hold)
