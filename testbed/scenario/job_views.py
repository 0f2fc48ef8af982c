"""A scenario's jobs as the run layer reads them: each a one-job scenario of its own (pure).

A scenario with `jobs:` runs them together on one fabric; each job's view is that scenario with
the job's workload (its hosts as ranks) and transport, and no other job, so every reader of a
one-job scenario (the agents' configs, the progress rule, the ideal, the tables, the solo
control) reads a job unchanged. Where the hosts come from: testbed/scenario/jobs.py.
"""
from __future__ import annotations

from dataclasses import dataclass

from testbed.scenario.schema import Scenario, Transport
from testbed.scenario.units import format_size, format_time


@dataclass(frozen=True)
class JobView:
    """One job as the run layer reads it: a scenario of its own (the fabric's, its workload
    with its hosts as ranks, its transport), so every reader of a one-job scenario (the
    agents' configs, the progress rule, the ideal, the tables) reads it unchanged."""

    name: str
    scenario: Scenario
    hosts: tuple[str, ...]
    start: float  # s after the common start, in the scenario's frame
    placement: str  # how its hosts were chosen, for the summary and meta.json
    transport: Transport | None  # the job's own, in every run; None: the run's

    def transport_in(self, run: Transport) -> Transport:
        """The transport this job's QPs run in a run of `run`."""
        return self.transport or run


def views(scenario: Scenario) -> list[JobView]:
    """The scenario's jobs as one-job scenarios, in the order listed (empty without jobs)."""
    out = []
    for job, hosts in zip(scenario.jobs, scenario.job_hosts(), strict=True):
        workload = job.workload.model_copy(update={"ranks": list(hosts)})
        view = scenario.model_copy(update={
            "workload": workload, "jobs": [],
            "transport": [job.transport] if job.transport else scenario.transport})
        how = (f"{job.placement.rule} ({job.placement.count} hosts)" if job.placement
               else "hosts as listed")
        out.append(JobView(job.name, view, tuple(hosts), job.start, how, job.transport))
    return out


def lines(scenario: Scenario) -> list[str]:
    """A line per job: its hosts and how they were chosen, its workload, its start."""
    out = []
    for view in views(scenario):
        w = view.scenario.workload
        what = ("training step" if w.training is not None else "Chakra trace" if w.chakra
                else f"RDMA flows ({w.flows.pattern}, {w.flows.messages} writes of "
                     f"{format_size(w.flows.message)} a flow)" if w.flows
                else f"{w.collective} of {format_size(w.size)}")
        start = f", starts at {format_time(view.start)}" if view.start else ""
        over = f", always over {view.transport}" if view.transport else ""
        out.append(f"job {view.name}: {view.placement}: {' '.join(view.hosts)}; {what} x "
                   f"{w.iterations}{start}{over}")
    return out
