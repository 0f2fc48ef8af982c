"""`workload.chakra`: replay an MLCommons Chakra execution trace instead of one looped collective.

The trace's rank r runs on the workload's r-th rank host (`workload.ranks` in order, or every
host in order). Relative paths are taken from the project's root, the folder holding
`scenarios/`, so a scenario reads the same trace wherever it is run from. The trace is read and
checked when the scenario is (hostagent/workloads/chakra.py has the mapping and the limits).
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from hostagent.workloads.chakra import read_job
from hostagent.workloads.graph import GraphError, Job
from runcontract.facts import ctrl_deps_line

ROOT = Path(__file__).resolve().parents[2]


class Chakra(BaseModel):
    """Where the trace is, its communicator groups, and how to read it."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    path: str = Field(min_length=1, max_length=500,
                      description="a directory of <prefix>.<rank>.et files, such a prefix, or "
                                  "one .et file (with replicate)")
    groups: str | None = Field(None, max_length=500,
                               description="ASTRA-sim's groups JSON (name -> ranks); absent: "
                                           "every group a node names in pg_name holds every rank")
    replicate: bool = Field(False, description="run one rank's trace on every rank")
    cpu_ops: Literal["skip", "compute"] = Field(
        "skip", description="compute nodes with is_cpu_op: a zero-length step, or timed")

    def job(self, hosts: list[str]) -> Job:
        return read_job(_resolve(self.path), hosts,
                        groups=None if self.groups is None else _resolve(self.groups),
                        replicate=self.replicate, cpu_ops=self.cpu_ops)

    def ctrl_deps_dropped(self, hosts: list[str]) -> tuple[int, ...]:
        """Per rank, the ctrl_deps on nodes absent from its file that the reader dropped."""
        return tuple(self.job(hosts).meta["ctrl_deps_dropped"])

    def loaded_line(self, dropped: Sequence[int]) -> str:
        """The line the run's log and `validate` print about the trace as read, from
        `ctrl_deps_dropped`."""
        return f"chakra trace {self.path}: {ctrl_deps_line(dropped)}"


def _resolve(path: str) -> Path:
    p = Path(path)
    return p if p.is_absolute() else ROOT / p


def check(chakra: Chakra, hosts: list[str]) -> None:
    """The trace reads and fits the workload's ranks (a ValueError naming file, node, field)."""
    try:
        chakra.job(hosts)
    except GraphError as exc:
        raise ValueError(f"workload.chakra: {exc}") from None
