"""nftables from this process through libnftables (ctypes), one context per node namespace.

Why not `mnexec -a PID nft -f -`: each change then forked a helper and an `nft` that parsed
its own state, about 35 ms per node, one node after another, so a plane going down (24 links
over 12 nodes) took 0.34 s to be in place. A context here is made once, inside the node's
namespace, before the workload starts; a change is then one library call (one netlink
transaction, about a millisecond), and the calls of different nodes run in parallel threads
(ctypes releases the GIL for the call). libnftables is part of the `nftables` package.
"""
from __future__ import annotations

import ctypes
import threading
from functools import cache

_CREATE = threading.Lock()  # nft_ctx_new sets up library-wide tables: one at a time


class NftError(OSError):
    """libnftables is missing, or refused a ruleset (with nft's message)."""


@cache
def _lib() -> ctypes.CDLL:
    try:
        lib = ctypes.CDLL("libnftables.so.1", use_errno=True)
    except OSError as exc:
        raise NftError(f"libnftables is not installed ({exc}); install the package nftables "
                       f"(scripts/install.sh does)") from None
    lib.nft_ctx_new.restype = ctypes.c_void_p
    lib.nft_ctx_new.argtypes = [ctypes.c_uint32]
    lib.nft_ctx_free.argtypes = [ctypes.c_void_p]
    lib.nft_ctx_buffer_output.argtypes = [ctypes.c_void_p]
    lib.nft_ctx_buffer_error.argtypes = [ctypes.c_void_p]
    lib.nft_ctx_get_error_buffer.argtypes = [ctypes.c_void_p]
    lib.nft_ctx_get_error_buffer.restype = ctypes.c_char_p
    lib.nft_ctx_get_output_buffer.argtypes = [ctypes.c_void_p]
    lib.nft_ctx_get_output_buffer.restype = ctypes.c_char_p
    lib.nft_run_cmd_from_buffer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.nft_run_cmd_from_buffer.restype = ctypes.c_int
    return lib


class Nft:
    """One libnftables context. It talks to the namespace of the thread that uses it: make
    and use it from a thread that stays in the node's namespace (see netns.enter_for_good)."""

    def __init__(self) -> None:
        lib = _lib()
        with _CREATE:
            ctx = lib.nft_ctx_new(0)
        if not ctx:
            raise NftError("nft_ctx_new failed")
        lib.nft_ctx_buffer_output(ctx)
        lib.nft_ctx_buffer_error(ctx)
        self._ctx: int | None = ctx

    def run(self, script: str) -> str:
        """Apply a ruleset script as one transaction; returns nft's output, raises with its
        error message."""
        lib = _lib()
        rc = lib.nft_run_cmd_from_buffer(self._ctx, script.encode())
        if rc != 0:
            err = (lib.nft_ctx_get_error_buffer(self._ctx) or b"").decode().strip()
            raise NftError(f"nft refused the ruleset: {err or f'status {rc}'}")
        return (lib.nft_ctx_get_output_buffer(self._ctx) or b"").decode()

    def close(self) -> None:
        if self._ctx:
            _lib().nft_ctx_free(self._ctx)
            self._ctx = None
