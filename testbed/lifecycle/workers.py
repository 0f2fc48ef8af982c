"""Work spread over one forked process per core.

Why processes: the build's cost is Python (pyroute2 encoding and parsing messages) and kernel
work done inside the caller's system calls (a probe is forwarded through four namespaces
within its `sendto`), so threads would share one core. Why fork: workers inherit the plan and
the nodes' pids without pickling, and enter the namespaces themselves.

Why not multiprocessing.Pool: its terminate() can block for ever on a queue lock held by a
worker it has just killed, and a run interrupted at the wrong moment hung there. Here each
worker takes a fixed share of the items, sends its pickled results down a pipe and exits; the
parent reads the pipes (checking for signals between reads), and on any exit kills and reaps
whatever worker is left. Nothing is shared but the pipes.
"""
from __future__ import annotations

import os
import pickle
import select
import signal
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from testbed.lifecycle import interrupts
from testbed.lifecycle.progress import Progress

T = TypeVar("T")
R = TypeVar("R")


def worker_count(items: int, min_per_worker: int = 1) -> int:
    return max(1, min(os.cpu_count() or 1, items // min_per_worker))


def _child(fn: Callable[[T], R], share: list[T], write_fd: int) -> None:
    """Runs in the forked worker; never returns (os._exit skips the parent's clean-ups)."""
    code = 0
    try:
        interrupts.worker_init()
        try:
            payload = pickle.dumps(("ok", [fn(item) for item in share]))
        except BaseException as exc:  # noqa: BLE001 (reported to the parent)
            payload = pickle.dumps(("error", f"{type(exc).__name__}: {exc}"))
        with os.fdopen(write_fd, "wb") as out:
            out.write(payload)
    except BaseException:  # noqa: BLE001
        code = 1
    finally:
        os._exit(code)


def parallel_map(fn: Callable[[T], R], items: Iterable[T], progress: Progress, label: str,
                 workers: int | None = None, min_per_worker: int = 8) -> Iterator[R]:
    """fn over items (worker k takes items k, k+n, ...); in this process when one is enough."""
    items = list(items)
    n = workers if workers is not None else worker_count(len(items), min_per_worker)
    if n == 1:
        for item in progress.bar(items, len(items), label):
            yield fn(item)
        return
    children: list[tuple[int, int]] = []
    try:
        for k in range(n):
            read_fd, write_fd = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(read_fd)
                _child(fn, items[k::n], write_fd)
            os.close(write_fd)
            children.append((pid, read_fd))
        received = {fd: bytearray() for _, fd in children}
        open_fds = set(received)
        while open_fds:
            interrupts.checkpoint()
            ready, _, _ = select.select(list(open_fds), [], [], 0.05)
            for fd in ready:
                chunk = os.read(fd, 1 << 20)
                if chunk:
                    received[fd] += chunk
                else:
                    open_fds.discard(fd)
        results: list[R] = []
        for pid, fd in children:
            if not received[fd]:
                raise RuntimeError(f"{label} worker {pid} died without a result")
            status, payload = pickle.loads(bytes(received[fd]))
            if status != "ok":
                raise RuntimeError(f"{label} worker: {payload}")
            results.extend(payload)
        yield from progress.bar(results, len(results), label)
    finally:
        for pid, fd in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass  # already reaped
            os.close(fd)
