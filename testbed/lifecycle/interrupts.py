"""SIGINT, SIGTERM and SIGHUP become an `Interrupted` exception, at points where stopping is safe.

Why not raise from the handler at once: the run spends much of its time inside pyroute2's
asyncio loop and Mininet's pty reads; an exception raised in the middle of those leaves
half-built objects that break at exit. So the handler only records the signal, and the run
checks at every step of its long loops (`checkpoint`), which are all short. Where the run only
waits (holding the fabric), the handler raises at once (`immediate`).
"""
from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

from testbed.errors import Interrupted

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_pending: str | None = None
_immediate = 0


def _handler(signum: int, _frame) -> None:
    global _pending
    _pending = signal.Signals(signum).name
    if _immediate:
        raise Interrupted(f"interrupted by {_pending}")


def checkpoint() -> None:
    if _pending is not None:
        raise Interrupted(f"interrupted by {_pending}")


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Install the handlers for the body; a signal shows up at the next checkpoint."""
    global _pending
    _pending = None
    previous = {s: signal.signal(s, _handler) for s in SIGNALS}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        _pending = None  # handled by the region it arrived in, not by a later one


@contextlib.contextmanager
def immediate() -> Iterator[None]:
    """A region that only waits: a signal interrupts it at once."""
    global _immediate
    _immediate += 1  # before the check: a signal between the two would wait out the region
    try:
        checkpoint()
        yield
    finally:
        _immediate -= 1


@contextlib.contextmanager
def ignored() -> Iterator[None]:
    """Teardown: the signal that started it is handled, and a second one must not leave it
    half done."""
    global _pending
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in SIGNALS}
    _pending = None
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _raise(signum: int, _frame) -> None:
    raise Interrupted(f"interrupted by {signal.Signals(signum).name}")


def for_process() -> None:
    """For the command's own process, outside any run region: all three signals end it as
    Ctrl-C does (a line saying so, exit 130). Python's defaults would let SIGTERM and SIGHUP
    end it silently, by the signal, with the results folder already written."""
    for s in SIGNALS:
        signal.signal(s, _raise)


def at_exit() -> None:
    """The command has returned its status: from here a signal is ignored. The interpreter's
    shutdown restores the default actions of the signals it handles (not of ignored ones), so a
    signal in its last moments would otherwise replace the status with a death by signal."""
    for s in SIGNALS:
        signal.signal(s, signal.SIG_IGN)


def worker_init() -> None:
    """For forked workers. Ctrl-C reaches the whole process group: the runner alone handles
    it (and kills its workers); SIGTERM and SIGHUP must end a worker at once (the runner's
    own handler, inherited by the fork, would only record them)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
