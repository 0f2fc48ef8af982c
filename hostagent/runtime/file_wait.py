"""Waiting for files that others write (the runner's start time, the peers' `done`), with one
timer for the whole process.

A pooled process serves tens of hosts. Each polling its own files every 10 ms cost a wake-up
per host each time and, while a host lingered for its peers, a look at every peer's file at
each: 32 lingering hosts (ref-64's share of a process) kept 13% of a core busy doing nothing
while the hosts still working needed it. The waits of a process share one poll here, `POLL`
apart and only while some host waits, which looks at each awaited path at most once however
many hosts await it, and no more once it exists. Polling, as before, not inotify: it needs
nothing of the file system nor of whoever writes the files (in the cluster mode the runner's
server agent on each machine).
"""
from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path

from hostagent.runtime.per_loop import PerLoop

POLL = 0.01  # s: how late a wait may see its file appear


class FileWaits:
    """The files this process's hosts wait for, polled together."""

    def __init__(self) -> None:
        self._waits: list[tuple[list[Path], asyncio.Future[None]]] = []  # (missing, waiter)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None
        self.polls = 0  # how often the files were looked at (for the tests)

    async def until(self, paths: Iterable[Path], timeout: float) -> bool:
        """Whether every one of `paths` exists within `timeout` s (False: the time ran out)."""
        missing = [p for p in paths if not p.exists()]
        if not missing:
            return True
        loop = self._loop = asyncio.get_running_loop()  # one only (FILES: one per loop)
        entry = (missing, loop.create_future())
        self._waits.append(entry)
        if self._handle is None:
            self._handle = loop.call_later(POLL, self._poll)
        try:
            await asyncio.wait_for(entry[1], timeout)
            return True
        except TimeoutError:
            return False
        finally:
            self._waits.remove(entry)
            if not self._waits and self._handle is not None:
                self._handle.cancel()
                self._handle = None

    def _poll(self) -> None:
        """Each wait's missing paths in order, up to the first still missing: a wait ends only
        once all exist, so a host lingering for 32 peers costs one look per poll, not 32, and
        a path many hosts await is looked at once."""
        self.polls += 1
        seen: dict[Path, bool] = {}
        for missing, waiter in self._waits:
            while missing:
                there = seen.get(missing[0])
                if there is None:
                    there = seen[missing[0]] = missing[0].exists()
                if not there:
                    break
                missing.pop(0)
            if not missing and not waiter.done():
                waiter.set_result(None)
        assert self._loop is not None  # set by the first wait
        self._handle = (self._loop.call_later(POLL, self._poll)
                        if any(missing for missing, _ in self._waits) else None)


FILES = PerLoop(FileWaits)  # the process's
