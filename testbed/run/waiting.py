"""Waiting for the agents of a run: until all are done, one has crashed, or time is up.

A collective needs every rank: once an agent has failed, its peers can only wait for it until
their own timeouts, so the wait ends promptly instead (after `CRASH_GRACE`, in which peers that
were finishing may finish). At the deadline, or then, the agents still running get SIGTERM:
each writes what it completed and ends its log with why it stopped (hostagent/agent.py); one
that does not within `TERM_GRACE` is killed. Nothing here raises for a slow or failed agent:
the outcomes say who stopped and why, and the runner collects what completed before failing.
"""
from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

from testbed.lifecycle import interrupts

CRASH_GRACE = 2.0  # s the others may still finish after an agent failed
TERM_GRACE = 5.0  # s an agent has to write its results after SIGTERM
POLL = 0.05


@dataclass
class WaitOutcome:
    """How the wait ended: `why` is None when every agent exited by itself."""

    why: str | None
    stopped: dict[str, str]  # host -> why the runner stopped it (SIGTERM, then SIGKILL)


def wait_for_agents(procs: dict[str, subprocess.Popen], deadline: float,
                    clock: Callable[[], float] = time.time) -> WaitOutcome:
    """Wait for every process; stop the rest at `deadline` (clock time) or `CRASH_GRACE` after
    the first one that exits non-zero."""
    why: str | None = None
    end = deadline
    while any(p.poll() is None for p in procs.values()):
        interrupts.checkpoint()
        now = clock()
        failed = [h for h, p in procs.items() if p.poll() not in (None, 0)]
        if failed and why is None:
            why = (f"the agent of {failed[0]} failed (exit {procs[failed[0]].returncode}): "
                   f"its peers cannot complete without it")
            end = min(end, now + CRASH_GRACE)
        if now >= end:
            why = why or "the workload's deadline passed"
            break
        time.sleep(POLL)
    stopped = {h: why or "" for h, p in procs.items() if p.poll() is None}
    stop(procs)
    return WaitOutcome(why if stopped or why else None, stopped)


def stop(procs: dict[str, subprocess.Popen]) -> None:
    """SIGTERM to every running agent, SIGKILL to those still running `TERM_GRACE` later."""
    running = [p for p in procs.values() if p.poll() is None]
    for p in running:
        try:
            p.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            pass
    end = time.monotonic() + TERM_GRACE
    while any(p.poll() is None for p in running) and time.monotonic() < end:
        time.sleep(POLL)
    for p in procs.values():
        if p.poll() is None:
            p.kill()
        p.wait()
