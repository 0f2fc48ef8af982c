"""Opening sockets in another network namespace from this process.

A socket keeps the namespace it was created in, whatever the creating thread does next. So a
process serving many emulated hosts (hostagent/runtime/pooled.py) creates each host's sockets on a
short-lived thread that first joins the host's namespace with setns(2): setns changes only the
calling thread's namespace, and the thread ends right after, so the rest of the process stays
where it was. Python 3.11 has no os.setns; libc's is called through ctypes.
"""
from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

CLONE_NEWNET = 0x40000000
T = TypeVar("T")
_libc = ctypes.CDLL(None, use_errno=True)


def current() -> int:
    """The inode of this thread's network namespace (what `ip netns identify` compares)."""
    return os.stat(f"/proc/self/task/{threading.get_native_id()}/ns/net").st_ino


def call_in(netns: str | None, fn: Callable[..., T], *args: Any) -> T:
    """fn(*args) on a thread inside the network namespace at path `netns` (e.g.
    /proc/<pid>/ns/net); None: here, on this thread."""
    if netns is None:
        return fn(*args)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            fd = os.open(netns, os.O_RDONLY | os.O_CLOEXEC)
            try:
                if _libc.setns(fd, CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"setns({netns}): {os.strerror(err)}")
            finally:
                os.close(fd)
            box["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 (re-raised on the caller's thread)
            box["error"] = exc

    thread = threading.Thread(target=target, name=f"setns {netns}")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    value: T = box["value"]
    return value
