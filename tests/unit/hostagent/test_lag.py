"""The agent's event-loop lag: a loop kept busy shows as late timers, and the scheduler's
statistics say how much CPU the agent used."""
from __future__ import annotations

import asyncio
import time

from hostagent.lag import LoopLag


def test_a_blocked_loop_shows_as_late_timers():
    async def main() -> LoopLag:
        lag = LoopLag()
        lag.start()
        await asyncio.sleep(0.05)
        t = time.monotonic()
        while time.monotonic() - t < 0.12:  # the loop does 120 ms of work without yielding
            pass
        await asyncio.sleep(0.05)
        lag.stop()
        return lag

    lag = asyncio.run(main())
    lates = [late for _, late in lag.samples]
    assert max(lates) >= 0.1, "the timer due during the busy stretch fired over 100 ms late"
    assert sorted(lates)[len(lates) // 2] < 0.02, "the others were about on time"
    s = lag.summary()
    assert s["samples"] == len(lates) and s["max_s"] == max(lates)
    assert s["span_s"] >= 0.2
    if "on_cpu_s" in s:  # a kernel with CONFIG_SCHED_INFO
        assert s["on_cpu_s"] >= 0.1, "the busy stretch was on a CPU"
