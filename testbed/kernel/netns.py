"""Reach into a Mininet node's network namespace from this process, without spawning anything.

Mininet nodes live in unnamed namespaces held by their shell's pid. A socket is bound for life
to the namespace it was created in, so this module switches the *calling thread* into a node's
namespace (setns(2) is per thread), creates netlink/UDP sockets or writes sysctls there, and
switches back. That is what makes building hundreds of nodes take seconds: one netlink socket
per node instead of one `ip` process per route.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import socket
from collections.abc import Iterator, Mapping

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def netns_inode(pid: int) -> int:
    """Identity of a process's network namespace (what cleanup matches processes by)."""
    return os.stat(f"/proc/{pid}/ns/net").st_ino


def entered(pid: int) -> contextlib.AbstractContextManager[None]:
    """Run the body with this thread inside the network namespace of process `pid`."""
    return entered_path(f"/proc/{pid}/ns/net")


def named(name: str) -> str:
    """The file of a named namespace (`ip netns add NAME`), for `entered_path`/`socket_at`."""
    return f"/run/netns/{name}"


@contextlib.contextmanager
def entered_path(path: str) -> Iterator[None]:
    """Run the body with this thread inside the network namespace at `path` (a
    /proc/PID/ns/net or a named namespace's /run/netns/NAME)."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(path, os.O_RDONLY)
    try:
        _setns(target)
        try:
            yield
        finally:
            _setns(own)
    finally:
        os.close(target)
        os.close(own)


@contextlib.contextmanager
def fresh() -> Iterator[None]:
    """Run the body in a new, empty network namespace (for feature probes); it dies after."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        if _libc.unshare(CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"unshare: {os.strerror(err)}")
        try:
            yield
        finally:
            _setns(own)
    finally:
        os.close(own)


def socket_in(pid: int, family: int, type_: int, proto: int = 0) -> socket.socket:
    with entered(pid):
        return socket.socket(family, type_, proto)


def socket_at(path: str, family: int, type_: int, proto: int = 0) -> socket.socket:
    with entered_path(path):
        return socket.socket(family, type_, proto)


def write_sysctls(pid: int, values: Mapping[str, str | int]) -> None:
    """Set net.* sysctls of the namespace of `pid` (keys like 'net.ipv6.conf.all.forwarding')."""
    with entered(pid):
        for key, value in values.items():
            with open("/proc/sys/" + key.replace(".", "/"), "w") as fh:
                fh.write(str(value))


def enter_for_good(pid: int) -> None:
    """Switch the calling thread into the network namespace of process `pid` for the rest of
    its life: for a worker thread that only ever acts inside one node (a library context
    bound to the namespace it was made in)."""
    target = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    try:
        _setns(target)
    finally:
        os.close(target)
