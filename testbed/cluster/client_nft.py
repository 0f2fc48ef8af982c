"""A node's nftables worker on its server: the injector's `NodeNft`, run by the server's
agent, driven from here through the same three calls (`ready`, `submit`, `close`).

Fault times are the runner's wall clock; each server's worker sleeps on its own clock, so a
time goes out shifted by the server's measured offset and the times it reports come back
shifted the other way (each within the offset's error, half the RTT of its best sample).
Outcomes are fetched by one poller per network, and only once a job's time has come: it
sleeps until the earliest job that is due, then asks every 2 ms until that job reported.
"""
from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable

from testbed.cluster import ops
from testbed.cluster.client import ServerError, ServerSession

Done = Callable[[float | None, float | None, str | None], None]
POLL = 0.002  # s between two asks while a job that is due has not reported


class NftPoller:
    """Callbacks of the jobs submitted to every server, called as their outcomes come back."""

    def __init__(self, sessions: dict[str, ServerSession], offsets: dict[str, float]) -> None:
        self.sessions = sessions
        self.offsets = offsets  # server clock minus ours, s
        self.pending: dict[int, tuple[str, float, Done]] = {}  # job -> server, due, callback
        self.ids = itertools.count()
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.closed = False
        self.thread: threading.Thread | None = None
        self.stops: list[tuple[threading.Event, str, str]] = []  # the injector's, per worker

    def watch(self, stop: threading.Event, server: str, node: str) -> None:
        """When the injector stops, the node's jobs still waiting on the server are dropped
        (as a local worker sharing the injector's event would drop them)."""
        self.stops.append((stop, server, node))

    def submit(self, server: str, node: str, at: float | None, script: str, done: Done) -> None:
        job = next(self.ids)
        with self.lock:
            self.pending[job] = (server, at if at is not None else time.time(), done)
        shift = self.offsets.get(server, 0.0)
        self.sessions[server].request(ops.NftSubmit(node=node, job=job, script=script,
                                                    at=None if at is None else at + shift))
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name="nft-poller", daemon=True)
            self.thread.start()
        self.wake.set()

    def drain(self, server: str, timeout: float = 10.0) -> None:
        """Wait until every job sent to `server` reported (after its worker was closed)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if not any(s == server for s, _, _ in self.pending.values()):
                    return
            self._poll(server)
            time.sleep(POLL)

    def close(self) -> None:
        self.closed = True
        self.wake.set()
        if self.thread is not None:
            self.thread.join()

    def _run(self) -> None:
        while not self.closed:
            self._propagate_stops()
            with self.lock:
                due = min((d for _, d, _ in self.pending.values()), default=None)
            wait = 0.05 if due is None else due - time.time()
            if wait > POLL:
                self.wake.wait(min(wait, 0.05))
                self.wake.clear()
                continue
            with self.lock:
                servers = {s for s, d, _ in self.pending.values() if d <= time.time() + POLL}
            for server in sorted(servers):
                self._poll(server)
            time.sleep(POLL)

    def _propagate_stops(self) -> None:
        for entry in [e for e in self.stops if e[0].is_set()]:
            self.stops.remove(entry)
            _, server, node = entry
            try:
                self.sessions[server].request(ops.NftStop(node=node))
            except ServerError:
                pass  # the session is gone: _poll reports its jobs as failed
            with self.lock:  # what waited for its time reports now
                for job, (s, _, done) in list(self.pending.items()):
                    if s == server:
                        self.pending[job] = (s, time.time(), done)

    def _poll(self, server: str) -> None:
        try:
            done = self.sessions[server].request(ops.NftDone())["done"]
        except ServerError as exc:
            done = [(job, None, None, str(exc)) for job, (s, _, _) in list(self.pending.items())
                    if s == server]
        shift = self.offsets.get(server, 0.0)
        for job, started, finished, error in done:
            with self.lock:
                entry = self.pending.pop(job, None)
            if entry is not None:
                entry[2](None if started is None else started - shift,
                         None if finished is None else finished - shift, error)


class RemoteNft:
    """NodeNft's interface, the worker living in the server's agent."""

    def __init__(self, node: str, server: str, poller: NftPoller, stop: threading.Event,
                 setup: str) -> None:
        self.node, self.server, self.poller = node, server, poller
        self.session = poller.sessions[server]
        self.session.request(ops.NftStart(node=node, setup=setup))
        poller.watch(stop, server, node)

    def ready(self, timeout: float = 10.0) -> None:
        try:
            self.session.request(ops.NftStart(node=self.node), timeout=timeout)
        except ServerError as exc:
            raise RuntimeError(str(exc)) from None

    def submit(self, at: float | None, script: str, done: Done) -> None:
        self.poller.submit(self.server, self.node, at, script, done)

    def close(self) -> None:
        """Jobs still waiting for their time report as not applied, then the worker ends."""
        self.session.request(ops.NftClose(node=self.node))
        self.poller.drain(self.server)
