"""How late the agent's event loop runs its timers, and how much of the time the agent wanted a
CPU: the agent side of the fidelity monitor.

One task per process (shared by the hosts a pooled process serves) sleeps `PERIOD` again and
again and records when it woke (wall clock, the clock of the results) and how much later than
asked. On an idle machine that is the loop's timer granularity (about a millisecond: epoll's
timeout is in ms); when the CPU cannot keep up, every timer of the agent (pacing,
retransmission, probes) is late by as much. The runner keeps the samples that fall inside the
timed collectives (making and checking buffers between iterations stalls the loop too, but is
not timed).

Timer lateness misses an agent that is simply too slow: woken promptly, it then spends its
slice on per-packet work. The kernel's scheduler statistics (/proc/self/schedstat: time on a
CPU, time runnable but waiting for one) say how much of the workload the agent wanted a CPU; an
agent that wanted one nearly all the time set the pace itself, whatever the network allowed.
"""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

from hostagent.runtime.per_loop import PerLoop

PERIOD = 0.01  # s between wake-ups: 100 samples a second, negligible CPU
SCHEDSTAT = Path("/proc/self/schedstat")


def _schedstat() -> tuple[float, float] | None:
    """(seconds on a CPU, seconds runnable waiting for one) of this process's main thread."""
    try:
        on_cpu, waiting, _ = SCHEDSTAT.read_text().split()
    except (OSError, ValueError):  # a kernel without CONFIG_SCHED_INFO
        return None
    return int(on_cpu) / 1e9, int(waiting) / 1e9


class LoopLag:
    """The process's monitor: its hosts share one event loop (hostagent/runtime/pooled.py serves
    many), so one timer measures the loop for all of them; a timer per host would itself load a
    pooled process. It runs while any host's workload does. The timer is a plain loop callback,
    as the driver's QP timers are: it measures how late such a callback runs, at one loop turn
    per sample (a sleeping task took two, and a future and a task step each time)."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, float]] = []  # (woke at, wall clock; late by, s)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._asked = 0.0
        self._users = 0

    def start(self) -> LagWindow:
        """A host's workload starts: its window on the samples, and the timer if not running."""
        self._users += 1
        if self._handle is None:
            loop = self._loop = asyncio.get_running_loop()  # one only (PROCESS_LAG: per loop)
            self._asked = loop.time() + PERIOD
            self._handle = loop.call_at(self._asked, self._tick)
        return LagWindow(self)

    def release(self) -> None:
        self._users -= 1
        if self._users <= 0 and self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _tick(self) -> None:
        assert self._loop is not None  # set by start
        now = self._loop.time()
        self.samples.append((round(time.time(), 5), round(max(0.0, now - self._asked), 6)))
        self._asked = now + PERIOD
        self._handle = self._loop.call_at(self._asked, self._tick)


class LagWindow:
    """One host's share: the samples from its start to its `close()`, and the process's CPU
    over that time (with many hosts in one process, theirs together)."""

    def __init__(self, lag: LoopLag) -> None:
        self._lag = lag
        self._wall0, self._t0, self._sched0 = time.time(), time.monotonic(), _schedstat()
        self._wall1: float | None = None
        self._t1 = self._t0
        self._sched1: tuple[float, float] | None = None

    def close(self) -> None:
        if self._wall1 is None:
            self._wall1, self._t1, self._sched1 = time.time(), time.monotonic(), _schedstat()
            self._lag.release()

    def samples(self) -> list[tuple[float, float]]:
        end = self._wall1 if self._wall1 is not None else time.time()
        return [s for s in self._lag.samples if self._wall0 <= s[0] <= end]

    def summary(self) -> dict[str, float]:
        """Lateness over the whole workload (between iterations included) and the agent's CPU:
        `on_cpu_s` and `runq_s` (runnable, waiting for a CPU) over `span_s`."""
        lates = sorted(late for _, late in self.samples())
        n = len(lates)
        out: dict[str, float] = {"samples": n, "p50_s": lates[n // 2] if n else 0.0,
                     "p99_s": lates[min(n - 1, int(0.99 * n))] if n else 0.0,
                     "max_s": lates[-1] if n else 0.0,
                     "span_s": round(max(0.0, self._t1 - self._t0), 3)}
        if self._sched0 is not None and self._sched1 is not None:
            out["on_cpu_s"] = round(self._sched1[0] - self._sched0[0], 4)
            out["runq_s"] = round(self._sched1[1] - self._sched0[1], 4)
        return out


PROCESS_LAG = PerLoop(LoopLag)  # the process's
