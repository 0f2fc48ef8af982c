"""Work spread over one forked process per core.

Why processes: the build's cost is Python (pyroute2 encoding and parsing messages) and kernel
work done inside the caller's system calls (a probe is forwarded through four namespaces
within its `sendto`), so threads would share one core. Why fork: workers inherit the plan and
the nodes' pids without pickling, and enter the namespaces themselves.
"""
from __future__ import annotations

import multiprocessing
import os
from typing import TypeVar
from collections.abc import Callable, Iterable, Iterator

from . import interrupts
from .progress import Progress

T = TypeVar("T")
R = TypeVar("R")


def worker_count(items: int, min_per_worker: int = 1) -> int:
    return max(1, min(os.cpu_count() or 1, items // min_per_worker))


def parallel_map(fn: Callable[[T], R], items: Iterable[T], progress: Progress, label: str,
                 workers: int | None = None, min_per_worker: int = 8) -> Iterator[R]:
    """fn over items, results in completion order; in this process when one worker is enough.
    `fn` must be a module-level function (it is sent to the workers by name)."""
    items = list(items)
    n = workers if workers is not None else worker_count(len(items), min_per_worker)
    if n == 1:
        for item in progress.bar(items, len(items), label):
            yield fn(item)
        return
    chunk = max(1, len(items) // (4 * n))
    with multiprocessing.get_context("fork").Pool(n, initializer=interrupts.worker_init) as pool:
        yield from progress.bar(pool.imap_unordered(fn, items, chunk), len(items), label)
