"""What a person watching a run sees: one line per phase with its duration, a bar on long work.

Phases and bar steps are also where a pending signal stops the run (interrupts.checkpoint).

Bars go to stderr and only when it is a terminal, so logs and CI output stay one line a phase.
"""
from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm import tqdm

from testbed.lifecycle import interrupts

T = TypeVar("T")


class Progress:
    def __init__(self, stream=None, quiet: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.started = time.monotonic()
        self.durations: dict[str, float] = {}
        self.current: str | None = None

    def say(self, text: str) -> None:
        if not self.quiet:
            print(text, file=self.stream, flush=True)

    @contextlib.contextmanager
    def phase(self, name: str, detail: str = "") -> Iterator[dict]:
        """Time a phase; the body may put a result summary into the yielded dict under 'done'.

        If the body raises, `current` keeps naming the phase, so the run can record where it
        stopped."""
        self.current = name  # a signal pending from just before counts as stopping here
        info: dict = {}
        t0 = time.monotonic()
        try:
            interrupts.checkpoint()
            yield info
        except BaseException as exc:
            self.durations[name] = time.monotonic() - t0
            self.say(f"  {name:<9} {self.durations[name]:6.2f} s  stopped: "
                     f"{type(exc).__name__}")
            raise
        self.durations[name] = time.monotonic() - t0
        self.current = None
        self.say(f"  {name:<9} {self.durations[name]:6.2f} s  {info.get('done', detail)}")

    def bar(self, items: Iterable[T], total: int, label: str) -> Iterator[T]:
        """Step through long work: a bar on a terminal, and a signal checkpoint per item."""
        if not (self.quiet or not self.stream.isatty() or total < 50):
            items = tqdm(items, total=total, desc=f"  {label}", leave=False, file=self.stream,
                         unit="", dynamic_ncols=True)
        for item in items:
            interrupts.checkpoint()
            yield item
