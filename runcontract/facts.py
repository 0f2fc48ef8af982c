"""What a report needs to know of the scenario, written by the run into `meta.json`.

A report reads these facts instead of re-reading the scenario: the folder says what was
measured against (the ideal, the link rates), with the numbers as the testbed computed them
when it ran, and the analysis needs no scenario parser.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

MAX_RANKS_NAMED = 8  # ranks a line about dropped dependencies names one by one


@dataclass(frozen=True)
class BackgroundWindow:
    """One pattern of background flows (s after the workload's start): as scheduled when the
    run starts, then, once its flows ended, the span the flows that ran covered (a pattern
    none of whose flows ran is left out)."""

    pattern: str
    protocol: str
    plane: int
    start: float
    end: float


@dataclass(frozen=True)
class RunFacts:
    scenario: str
    description: str
    collective: str
    size: int  # bytes per rank
    transport: str
    link_rates: dict[str, float]  # link kind ("host", "fabric") -> bits/s
    node_tiers: dict[str, str]  # node name -> "host" | "leaf" | "spine"
    ideal_busbw: float  # GB/s a rank can inject over the planes the transport uses
    ideal_planes: int
    packet_bits: int  # a full data packet on the wire (payload, headers, framing)
    background: tuple[BackgroundWindow, ...] = field(default=())
    real_rate: float | None = None  # bits/s of the real link the host link stands for
    # the transport as run, e.g. "RoCEv2, lossless, Go-Back-N, DCQCN" (Scenario.variant);
    # empty in runs recorded before it was
    variant: str = ""
    # a Chakra trace workload: per trace rank, the ctrl_deps on nodes absent from its file that
    # the reader dropped, as Chakra's feeder does (docs/manual/chakra.md); None: another
    # workload, or a run recorded before it was counted
    ctrl_deps_dropped: tuple[int, ...] | None = None
    # the collective's algorithm as it ran (hostagent/workloads/algorithms.py), for a step graph
    # its setting; None: the collective's default (ring; direct for all-to-all)
    algorithm: str | None = None
    # `auto`: the modelled seconds of each algorithm it chose among (emulated)
    algorithm_modelled: dict[str, float] | None = None

    @property
    def baseline(self) -> str:
        """The variant, or the bare transport name for a run that did not record one."""
        return self.variant or self.transport

    def dilation(self) -> float | None:
        """How many times slower than the real fabric this one ran: real_rate over the host
        link's emulated rate (None when the scenario named no real_rate). A time measured
        here, divided by it, is the time at the real rate, for what scales with the rate."""
        host = self.link_rates.get("host")
        return None if self.real_rate is None or not host else self.real_rate / host

    def algorithm_line(self) -> str | None:
        """What the summary and report say of the algorithm (None: the scenario chose none)."""
        return None if self.algorithm is None else algorithm_line(self.algorithm,
                                                                  self.algorithm_modelled)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunFacts:
        """Raises KeyError or TypeError when `data` is not a whole record."""
        return cls(**{**data, "background": tuple(BackgroundWindow(**b)
                                                  for b in data.get("background", ()))})


def algorithm_line(algorithm: str, modelled: dict[str, float] | None) -> str:
    """'tree (auto; modelled: ring 2.1 ms, tree 1.6 ms)': the algorithm, and with `auto` each
    algorithm's modelled seconds (emulated)."""
    return algorithm + ("" if not modelled else " (auto; modelled: " + ", ".join(
        f"{name} {seconds * 1e3:.3g} ms" for name, seconds in modelled.items()) + ")")


def ctrl_deps_line(counts: Sequence[int]) -> str:
    """'3 control dependencies on nodes absent from their trace file dropped, as Chakra's
    feeder ignores them (rank 0: 3)', from the per-rank counts: what the run's log, the
    validation and the summary say of a Chakra trace."""
    total = sum(counts)
    what = (f"{total} control dependenc{'y' if total == 1 else 'ies'} on nodes absent from "
            f"their trace file dropped, as Chakra's feeder ignores them")
    named = [(r, n) for r, n in enumerate(counts) if n]
    if not named:
        return what
    if len(named) == len(counts) > 1 and len(set(counts)) == 1:
        return f"{what} ({counts[0]} in each of the {len(counts)} ranks)"
    shown = ", ".join(f"rank {r}: {n}" for r, n in named[:MAX_RANKS_NAMED])
    more = len(named) - MAX_RANKS_NAMED
    return f"{what} ({shown}{f', {more} more ranks' if more > 0 else ''})"
