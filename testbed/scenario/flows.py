"""`workload.flows`: RDMA-style write flows instead of a collective (hostagent/workloads/
flows.py): an incast to the first rank, or pairs of elephants, over the run's transport.

As a job beside another (`jobs:`), its flows are RDMA background traffic through the agents'
QPs, with the fabric's latency and the transports' congestion control, where iperf3's kernel
TCP flows (`background:`) have neither.
"""
from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from hostagent.workloads.flows import Pattern, pairs_of
from hostagent.workloads.graph import MAX_BYTES, GraphError
from testbed.scenario.units import SizeIn

MAX_MESSAGES = 10_000  # per flow and iteration: each is a node the executor tracks


class Flows(BaseModel):
    """Which ranks write to which, in what messages."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    pattern: Pattern = Field(description="incast: every rank writes to rank 0 (the first "
                                         "host); pairs: rank r to rank r + n/2")
    message: Annotated[int, SizeIn(4, MAX_BYTES)] = Field(
        1 << 20, description="bytes of one write (a whole number of float32 elements)")
    messages: int = Field(16, ge=1, le=MAX_MESSAGES,
                          description="writes per flow in one iteration, back to back")


def check(flows: Flows, ranks: int) -> None:
    """The pattern fits the ranks (a ValueError naming the field)."""
    if flows.message % 4:
        raise ValueError(f"workload.flows.message: {flows.message} B is not a whole number of "
                         f"float32 elements (4 B each)")
    try:
        pairs_of(flows.pattern, ranks)
    except GraphError as exc:
        raise ValueError(f"workload.flows: {exc}") from None
