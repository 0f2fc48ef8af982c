"""Waiting for the agents of a run: until all are done, one has crashed, or time is up.

A collective needs every rank: once an agent has failed, its peers can only wait for it until
their own timeouts, so the wait ends promptly instead (after `CRASH_GRACE`, in which peers that
were finishing may finish). At the deadline, or then, the agents still running get SIGTERM:
each writes what it completed and ends its log with why it stopped (hostagent/runtime/agent.py); one
that does not within `TERM_GRACE` is killed. Nothing here raises for a slow or failed agent:
the outcomes say who stopped and why, and the runner collects what completed before failing.

The deadline follows progress (`ProgressRule`): a run is hung when no iteration has completed
(on every rank) for a while, and that while is set by the iterations measured so far, so a run
slowed by the machine (64 hosts: 25 s an iteration, verification between them included) goes
on while it completes iterations, and a stuck one ends in a few of its own iteration times. A
fixed cap (`deadline`) remains, as a bound on the whole.

A training step that never ends (a receive no rank sends to, a collective a member never
joins) is named by what its agents were waiting in when they stopped (`stuck`): each rank's
nodes still in flight, the ranks each waits on, and what those ranks were doing.
"""
from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from testbed.lifecycle import interrupts

CRASH_GRACE = 2.0  # s the others may still finish after an agent failed
TERM_GRACE = 5.0  # s an agent has to write its results after SIGTERM
POLL = 0.05
WATCH_EVERY = 1.0  # s between two looks at the agents' progress


@dataclass(frozen=True)
class ProgressRule:
    """How long the agents may go without completing an iteration (pure).

    Before the first completion: `first_s` (an estimate that needs no measurement). After:
    `factor` times the longest interval between two completions seen so far (the first counted
    from the start; each interval holds the gap between iterations, where ranks make and check
    buffers, and the collective at the rate the run actually reaches), at least `floor_s`, plus
    `slack_s` (a QP's retries before it fails, which a recovering run may spend in one step).
    """

    first_s: float
    factor: float = 3.0
    floor_s: float = 40.0  # an agent lingers up to 30 s for its peers once it is done
    slack_s: float = 0.0

    def limit(self, start: float, completions: Sequence[float]) -> float:
        """Seconds allowed after the last completion (or the start, before any)."""
        if not completions:
            return self.first_s
        times = [start, *completions]
        longest = max(b - a for a, b in zip(times, times[1:], strict=False))
        return max(self.floor_s, self.factor * longest) + self.slack_s

    def stalled(self, start: float, completions: Sequence[float], now: float) -> str | None:
        """Why the run counts as hung at `now`, or None."""
        limit = self.limit(start, completions)
        last = completions[-1] if completions else start
        if now - last <= limit:
            return None
        if not completions:
            return (f"no iteration completed on every rank within {limit:.0f} s of the start "
                    f"(the first iteration's allowance)")
        return (f"no iteration completed on every rank for {now - last:.0f} s after "
                f"{len(completions)} did (limit {limit:.0f} s: {self.factor:g} x the longest "
                f"interval between completions, at least {self.floor_s:g} s, + "
                f"{self.slack_s:.0f} s of retries)")


@dataclass
class WaitOutcome:
    """How the wait ended: `why` is None when every agent exited by itself."""

    why: str | None
    stopped: dict[str, str]  # host -> why the runner stopped it (SIGTERM, then SIGKILL)


def wait_for_agents(procs: dict[str, subprocess.Popen], deadline: float,
                    clock: Callable[[], float] = time.time,
                    watch: Callable[[float], str | None] | None = None) -> WaitOutcome:
    """Wait for every process; stop the rest at `deadline` (clock time), when `watch` (called
    every WATCH_EVERY s with the time) says why the run is hung, or `CRASH_GRACE` after the
    first one that exits non-zero. `watch` may take processes out of `procs` (a job it
    stopped): a failure among them then ends nothing."""
    why: str | None = None
    crash: tuple[str, float] | None = None  # why and when a failed agent ends the wait
    next_watch = clock()
    while any(p.poll() is None for p in procs.values()):
        interrupts.checkpoint()
        now = clock()
        if watch is not None and now >= next_watch:
            next_watch = now + WATCH_EVERY
            stalled = watch(now)
            if stalled is not None:
                why = stalled
                break
        failed = [h for h, p in procs.items() if p.poll() not in (None, 0)]
        if not failed:
            crash = None
        elif crash is None:
            crash = (f"the agent of {failed[0]} failed (exit {procs[failed[0]].returncode}): "
                     f"its peers cannot complete without it", now + CRASH_GRACE)
        if crash is not None and now >= crash[1]:
            why = crash[0]
            break
        if now >= deadline:
            why = "the workload's deadline passed"
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


STUCK_SHOWN = 6  # waits named in the message; the rest are counted


def stuck(results: Mapping[int, Mapping[str, Any]]) -> str | None:
    """Rank -> its agent's result: the nodes the ranks of a step were waiting in when they
    stopped, each with what the ranks it waited on were doing; None when no rank says it
    waited (a collective workload, or a step that ended)."""
    waits = [w for r in sorted(results) for w in results[r].get("waiting") or ()]
    if not waits:
        return None

    def who(rank: int) -> str:
        return f"rank {rank} ({results.get(rank, {}).get('host', '?')})"

    def doing(rank: int) -> str:
        result = results.get(rank)
        if result is None:
            return f"{who(rank)} reported nothing"
        own = result.get("waiting") or []
        if own:
            w = own[0]
            return f"{who(rank)} was in node {w['node']} ({w['name'] or w['kind']})"
        if result.get("status") == "ok":
            return f"{who(rank)} had ended its iterations"
        return f"{who(rank)} waited in no communication"

    lines = []
    for w in waits[:STUCK_SHOWN]:
        what = (f"a receive from {who(w['peer'])}" if w["kind"] == "recv" else
                f"a send to {who(w['peer'])} (its receive not posted)" if w["kind"] == "send"
                else f"{w['collective']} on group {w['group']}")
        lines.append(f"{who(w['rank'])} waited in iteration {w['iteration']}, node {w['node']}"
                     f" ({w['name'] or w['kind']}): {what}; "
                     + ", ".join(doing(q) for q in w["on"]))
    more = len(waits) - STUCK_SHOWN
    return ("the step never ended: " + " | ".join(lines)
            + (f" | and {more} more waits (each agent's result.json)" if more > 0 else ""))
