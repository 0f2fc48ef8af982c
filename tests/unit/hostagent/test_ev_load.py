"""The EV load sampler (ev_load.parquet) of every host of a process on one timer: each host's
rows a period apart from its start, on its own wall-clock offset, until it stops."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from hostagent.runtime.ev_load import EvLoadSampler, ev_load_document, ev_load_records

PERIOD = 0.02


def _peers(qpn: int) -> dict:
    evs = [SimpleNamespace(index=i, plane=i, sent=10 * i, srtt=None, inflight=0, active=True)
           for i in range(2)]
    return {1: [(SimpleNamespace(qpn=qpn, evset=SimpleNamespace(evs=evs)), None)]}


def test_hosts_share_one_timer_and_each_samples_from_its_start_until_it_stops():
    sampler = EvLoadSampler()

    async def main() -> tuple[list, list, int]:
        loop = asyncio.get_running_loop()
        a, b = [], []
        ka = sampler.start(_peers(7), PERIOD, 1000.0, a)
        await asyncio.sleep(PERIOD * 2.5)
        kb = sampler.start(_peers(8), PERIOD, 2000.0, b)
        timers = sum(1 for h in loop._scheduled if not h.cancelled()
                     and getattr(h._callback, "__func__", None) is EvLoadSampler._tick)
        await asyncio.sleep(PERIOD * 3)
        sampler.stop(ka)
        stopped_a = len(a)
        await asyncio.sleep(PERIOD * 2)
        assert len(a) == stopped_a, "a stopped host gets no more rows"
        sampler.stop(kb)
        left = sum(1 for h in loop._scheduled if not h.cancelled()
                   and getattr(h._callback, "__func__", None) is EvLoadSampler._tick)
        assert left == 0, "nobody samples: no timer"
        return a, b, timers

    a, b, timers = asyncio.run(main())
    a, b = (ev_load_records(ev_load_document(rows)) for rows in (a, b))  # as ev_load.json
    assert timers == 1, "one timer for both hosts"
    assert {r["qpn"] for r in a} == {7} and {r["qpn"] for r in b} == {8}
    assert all(r["time"] > 1000 for r in a) and all(r["time"] > 2000 for r in b)
    for rows in (a, b):
        times = sorted({r["time"] for r in rows})
        assert len(rows) == 2 * len(times), "every EV at every sample"
        assert min(y - x for x, y in zip(times[1:], times[2:])) >= 0.9 * PERIOD
    assert len({r["time"] for r in a}) >= 5  # its start, then about 5 periods


def test_rows_name_their_columns():
    rows = ev_load_records(ev_load_document([(1.5, 2, 3, 4, 1, 99, 0.01, 5, False)]))
    assert rows == [{"time": 1.5, "peer": 2, "qpn": 3, "ev": 4, "plane": 1, "sent": 99,
                     "srtt": 0.01, "inflight": 5, "active": False}]
