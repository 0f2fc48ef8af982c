"""Reading htsim's standard output: when each flow started and finished.

htsim_uec prints `Flow Uec_S_D flowId I uecSrc S starting at T` and `... finished at T ...`;
htsim_roce prints `startflow Roce_S_D at T` and `Flow Roce_S_D OBJ finished at T ...`, with
no flow id (OBJ is htsim's object id), so its flows of one pair are matched first in, first
out. T is in microseconds; a flow finishes when its sender has every byte acknowledged.
"""
from __future__ import annotations

import re
from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass

_UEC = re.compile(r"^Flow (\S+) flowId (\d+) .*?(starting|finished) at ([0-9.eE+-]+)")
_ROCE_START = re.compile(r"^startflow (\S+) at ([0-9.eE+-]+)")
_ROCE_END = re.compile(r"^Flow (\S+) \d+ finished at ([0-9.eE+-]+)")


@dataclass(frozen=True)
class Event:
    """One start or finish line: the flow's name, its id where htsim prints one, the time."""

    name: str
    flow_id: int | None
    finished: bool
    us: float


def event(line: str) -> Event | None:
    """The event a line of htsim's output reports, None for any other line."""
    if m := _UEC.match(line):
        return Event(m[1], int(m[2]), m[3] == "finished", float(m[4]))
    if m := _ROCE_START.match(line):
        return Event(m[1], None, False, float(m[2]))
    if m := _ROCE_END.match(line):
        return Event(m[1], None, True, float(m[2]))
    return None


@dataclass(frozen=True)
class Completion:
    """A flow that finished: its name, when it started and finished (us)."""

    name: str
    start_us: float
    end_us: float

    @property
    def fct_us(self) -> float:
        return self.end_us - self.start_us


def completions(events: Iterable[Event]) -> list[Completion]:
    """The flows that finished, each paired with its start: by flow id where there is one,
    else the oldest unfinished flow of that name. A finish without a start is an error."""
    started: dict[object, deque[float]] = defaultdict(deque)
    done = []
    for e in events:
        key = e.flow_id if e.flow_id is not None else e.name
        if not e.finished:
            started[key].append(e.us)
        elif started[key]:
            done.append(Completion(e.name, started[key].popleft(), e.us))
        else:
            raise ValueError(f"htsim reported {e.name} finished at {e.us} us but never started")
    return done
