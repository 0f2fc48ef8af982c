"""One thread per node, living in the node's namespace with a libnftables context, that
applies prepared rulesets at given wall-clock times.

This is what makes every link of one fault action change together: the rulesets of all the
nodes an action touches are rendered before the workload starts, each node's thread sleeps
until the action's time on its own, and applies its node's ruleset as one transaction, in
parallel with the other nodes'. An action is applied when the last of its nodes is done; the
spread between its first and last node is recorded beside the lag.
"""
from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from testbed.kernel import netns
from testbed.kernel.nft import Nft


@dataclass
class Pending:
    """One action's changes across its nodes: done when every node reported."""

    nodes: int
    started: list[float] = field(default_factory=list)
    finished: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    skipped: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _done: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        if self.nodes <= 0:  # an action with nothing for nftables (rates, routing): done now
            self._done.set()

    def report(self, started: float | None, finished: float | None, error: str | None) -> None:
        with self._lock:
            if started is None or finished is None:
                self.skipped += 1
            else:
                self.started.append(started)
                self.finished.append(finished)
            if error:
                self.errors.append(error)
            if self.skipped + len(self.finished) >= self.nodes:
                self._done.set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)


PRIORITY = -10  # nice value of the worker threads

_Job = tuple[float | None, str, Callable[[float | None, float | None, str | None], None]]


class NodeNft:
    """A node's nftables worker. `setup` is applied as it starts; `submit` queues a ruleset
    for a wall-clock time (None: now); jobs run in the order queued, each no earlier than its
    time."""

    def __init__(self, node: str, pid: int, stop: threading.Event, setup: str = "") -> None:
        self.node = node
        self._setup = setup
        self._pid = pid
        self._stop = stop
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name=f"nft-{node}", daemon=True)
        self._thread.start()

    def ready(self, timeout: float = 10.0) -> None:
        """Wait until the thread is in the namespace with its context; raise what it hit."""
        if not self._ready.wait(timeout):
            raise RuntimeError(f"nft worker of {self.node} did not start in {timeout:g} s")
        if self._error is not None:
            raise RuntimeError(f"nft in {self.node}: {self._error}")

    def submit(self, at: float | None, script: str,
               done: Callable[[float | None, float | None, str | None], None]) -> None:
        self._jobs.put((at, script, done))

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        try:
            netns.enter_for_good(self._pid)
            # ahead of the agents (nice 0) on a busy machine: the thread sleeps but for the
            # millisecond of each change, and a change late by a scheduler slice is a fault
            # applied late (root may raise priority; without it the thread runs at nice 0)
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), PRIORITY)
            nft = Nft()
            if self._setup:  # also fills the context's cache: the first call costs ~30 ms
                nft.run(self._setup)
        except BaseException as exc:  # noqa: BLE001 (reported by ready())
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            while (job := self._jobs.get()) is not None:
                at, script, done = job
                if at is not None and self._stop.wait(max(0.0, at - time.time())):
                    done(None, None, None)  # the workload ended first
                    continue
                started = time.time()
                try:
                    nft.run(script)
                    done(started, time.time(), None)
                except Exception as exc:  # noqa: BLE001 (recorded by the injector)
                    done(started, time.time(), f"nft in {self.node}: {exc}")
        finally:
            nft.close()
