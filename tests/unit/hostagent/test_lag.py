"""The agent's event-loop lag: a loop kept busy shows as late timers, the scheduler's
statistics say how much CPU the agent used, and the hosts of one process share one timer."""
from __future__ import annotations

import asyncio
import time

from hostagent.runtime.loop_lag import PERIOD, LagWindow, LoopLag


def test_a_blocked_loop_shows_as_late_timers():
    async def main() -> LagWindow:
        window = LoopLag().start()
        await asyncio.sleep(0.05)
        # the loop does 120 ms of work without yielding: CPU time, so that a loaded machine
        # preempting it stretches the stretch but cannot shorten the work
        t = time.thread_time()
        while time.thread_time() - t < 0.12:
            pass
        await asyncio.sleep(0.05)
        window.close()
        return window

    window = asyncio.run(main())
    lates = [late for _, late in window.samples()]
    assert max(lates) >= 0.1, "the timer due during the busy stretch fired over 100 ms late"
    assert sorted(lates)[len(lates) // 2] < 0.02, "the others were about on time"
    s = window.summary()
    assert s["samples"] == len(lates) and s["max_s"] == max(lates)
    assert s["span_s"] >= 0.2
    if "on_cpu_s" in s:  # a kernel with CONFIG_SCHED_INFO
        # the 120 ms of CPU work were on a CPU, whatever else the machine ran
        assert s["on_cpu_s"] >= 0.1, "the busy stretch was on a CPU"


def test_hosts_of_one_process_share_one_timer_and_see_their_own_window():
    async def main() -> tuple[LoopLag, LagWindow, LagWindow]:
        lag = LoopLag()
        first = lag.start()
        await asyncio.sleep(0.05)
        second = lag.start()  # a second host of the same process
        await asyncio.sleep(0.05)
        first.close()
        await asyncio.sleep(0.05)  # the timer keeps running for the second host
        second.close()
        await asyncio.sleep(0.03)  # and stops with the last one
        return lag, first, second

    lag, first, second = asyncio.run(main())
    woke = [w for w, _ in lag.samples]
    assert min(b - a for a, b in zip(woke, woke[1:])) >= 0.9 * PERIOD, (
        "one timer for both hosts: samples a period apart, not two timers' interleaved")
    assert first.samples() and second.samples()
    assert first.samples()[0][0] < second.samples()[0][0], "each from its own start"
    assert second.samples()[-1][0] > first.samples()[-1][0], "the timer outlived the first"
    assert lag.samples[-1][0] <= second.samples()[-1][0] + 0.001, "and stopped after the last"
