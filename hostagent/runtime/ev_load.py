"""The EV load sampler: every MRC EV's load and delay over time (ev_load.parquet).

Each pooled process samples all its hosts on one timer per period. Rows are tuples, written with
their column names once (`ev_load_document`): the sampler runs while the traffic does, and a
dict per EV per sample was its largest cost.
"""
from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from hostagent.runtime.per_loop import PerLoop

EV_LOAD_COLUMNS = ("time", "peer", "qpn", "ev", "plane", "sent", "srtt", "inflight", "active")
EvLoadRow = tuple[float, int, int, int, int, int, "float | None", int, bool]  # EV_LOAD_COLUMNS
Peers = Mapping[int, Sequence[tuple[Any, Any]]]  # peer rank -> its (QP, route) pairs
_Sampled = tuple[list[tuple[int, int, Any]], float, list[EvLoadRow]]  # a host's (peer, QP
# number, EV) triples, its wall-clock offset and the rows it fills


def ev_load_document(rows: list[EvLoadRow]) -> dict[str, Any]:
    """ev_load.json: the column names once, then one list per EV and sample."""
    return {"columns": list(EV_LOAD_COLUMNS), "rows": rows}


def ev_load_records(document: dict[str, Any]) -> list[dict[str, Any]]:
    """ev_load.json's rows as one dict each (the collector's tables)."""
    columns = document["columns"]
    return [dict(zip(columns, row, strict=True)) for row in document["rows"]]


class EvLoadSampler:
    """Every `period`, each MRC EV's packets sent so far, its smoothed RTT, packets in flight
    and whether it is in the active set: the per-EV load and delay over time (ev_load.parquet),
    for every host of this process on one timer per period (a task per host woke a pooled
    process once per host each period). A host's first sample is taken when it starts."""

    def __init__(self) -> None:
        self._hosts: dict[float, dict[int, _Sampled]] = {}  # period -> key -> its host
        self._handles: dict[float, asyncio.TimerHandle] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._keys = itertools.count()

    def start(self, peers: Peers, period: float, wall_offset: float,
              rows: list[EvLoadRow]) -> int:
        """Sample this host's EVs into `rows` until `stop` with the key returned."""
        loop = self._loop = asyncio.get_running_loop()  # one only (EV_LOAD: one per loop)
        evs = [(peer, qp.qpn, ev) for peer, entries in peers.items() for qp, _ in entries
               for ev in getattr(getattr(qp, "evset", None), "evs", ())]
        key = next(self._keys)
        self._hosts.setdefault(period, {})[key] = (evs, wall_offset, rows)
        self._sample(evs, loop.time() + wall_offset, rows)
        if period not in self._handles:
            self._handles[period] = loop.call_later(period, self._tick, period)
        return key

    def stop(self, key: int) -> None:
        for period, hosts in list(self._hosts.items()):
            if hosts.pop(key, None) is not None and not hosts:
                del self._hosts[period]
                self._handles.pop(period).cancel()

    @staticmethod
    def _sample(evs: list[tuple[int, int, Any]], now: float, rows: list[EvLoadRow]) -> None:
        rows += [(now, peer, qpn, ev.index, ev.plane, ev.sent, ev.srtt, ev.inflight, ev.active)
                 for peer, qpn, ev in evs]

    def _tick(self, period: float) -> None:
        assert self._loop is not None  # set by start
        now = self._loop.time()
        for evs, wall_offset, rows in self._hosts[period].values():
            self._sample(evs, now + wall_offset, rows)
        self._handles[period] = self._loop.call_later(period, self._tick, period)


EV_LOAD = PerLoop(EvLoadSampler)  # the process's
