"""One object per event loop, for what every host of a pooled process shares: the timer heap
(driver.py), the file waits, the EV load sampler and the loop-lag monitor.

Such an object holds the loop's timer handles and futures, so it must not outlive its loop: a
process runs one loop, but tests run many one after another, and a handle of a closed loop
never fires. `PerLoop.get()` gives the running loop's object, made on first use; objects of
closed loops are dropped.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class PerLoop(Generic[T]):
    """`make()`, once per running event loop."""

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._by_loop: dict[asyncio.AbstractEventLoop, T] = {}

    def get(self) -> T:
        loop = asyncio.get_running_loop()
        found = self._by_loop.get(loop)
        if found is None:
            for old in [other for other in self._by_loop if other.is_closed()]:
                del self._by_loop[old]
            found = self._by_loop[loop] = self._make()
        return found
