"""The few libbpf calls the testbed needs, through ctypes: open and load an object file, find
its program and maps, read and write map entries, and run a program on a test packet.

Why libbpf and not `tc filter add ... bpf obj`: tc would load a fresh copy of the program (and
of its maps) for every port, and its maps could only be shared through bpffs pins that outlive
a crashed run. Loaded once here, one program and one pair of maps serve every port; the fds
live in this process (and its forked workers), so nothing is left behind when it ends.
libbpf itself is the Debian/Ubuntu package `libbpf1` (pulled in by iproute2 and libbpf-dev).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from functools import cache

BPF_F_LOCK = 4  # read or write a map value under its bpf_spin_lock
BPF_ANY = 0


class LibbpfError(OSError):
    """libbpf is missing, or refused an object (with the log lines it printed)."""


_PRINT_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
_log: list[str] = []
_callbacks: list[object] = []  # what libbpf calls back: ctypes frees it with its last reference


@cache
def _lib() -> ctypes.CDLL:
    name = ctypes.util.find_library("bpf") or "libbpf.so.1"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as exc:
        raise LibbpfError(f"libbpf is not installed ({exc}); install the package libbpf1 "
                          f"(scripts/install.sh does)") from None
    libc = ctypes.CDLL(None, use_errno=True)
    libc.vsnprintf.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,
                               ctypes.c_void_p]

    def collect(_level: int, fmt: bytes, args: int) -> int:
        buf = ctypes.create_string_buffer(1024)
        libc.vsnprintf(buf, len(buf), fmt, args)
        _log.append(buf.value.decode(errors="replace").rstrip())
        return 0

    print_fn = _PRINT_FN(collect)
    _callbacks.append(print_fn)
    lib.libbpf_set_print.argtypes = [_PRINT_FN]
    lib.libbpf_set_print.restype = ctypes.c_void_p
    lib.libbpf_set_print(print_fn)
    for fn, args, res in (
        ("bpf_object__open_file", [ctypes.c_char_p, ctypes.c_void_p], ctypes.c_void_p),
        ("bpf_object__load", [ctypes.c_void_p], ctypes.c_int),
        ("bpf_object__close", [ctypes.c_void_p], None),
        ("bpf_object__find_program_by_name", [ctypes.c_void_p, ctypes.c_char_p],
         ctypes.c_void_p),
        ("bpf_program__fd", [ctypes.c_void_p], ctypes.c_int),
        ("bpf_object__find_map_fd_by_name", [ctypes.c_void_p, ctypes.c_char_p], ctypes.c_int),
        ("bpf_map_lookup_elem_flags", [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                       ctypes.c_uint64], ctypes.c_int),
        ("bpf_map_update_elem", [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.c_uint64], ctypes.c_int),
        ("bpf_map_delete_elem", [ctypes.c_int, ctypes.c_void_p], ctypes.c_int),
        ("bpf_prog_test_run_opts", [ctypes.c_int, ctypes.c_void_p], ctypes.c_int),
        ("bpf_program__attach", [ctypes.c_void_p], ctypes.c_void_p),
        ("bpf_link__destroy", [ctypes.c_void_p], ctypes.c_int),
        ("libbpf_get_error", [ctypes.c_void_p], ctypes.c_long),
    ):
        getattr(lib, fn).argtypes = args
        getattr(lib, fn).restype = res
    return lib


def _check(rc: int, what: str) -> None:
    if rc < 0:
        err = ctypes.get_errno() or -rc
        raise LibbpfError(err, f"{what}: {os.strerror(err)}")


class BpfObject:
    """A loaded object file; `close()` releases its program and maps (unless attached)."""

    def __init__(self, path: str) -> None:
        lib = _lib()
        del _log[:]
        obj = lib.bpf_object__open_file(path.encode(), None)
        if not obj:
            raise LibbpfError(f"cannot open {path}: {os.strerror(ctypes.get_errno())}")
        rc = lib.bpf_object__load(obj)
        if rc < 0:
            lib.bpf_object__close(obj)
            tail = "\n".join(line for line in _log[-12:] if line)
            raise LibbpfError(f"the kernel refused {os.path.basename(path)}: "
                              f"{os.strerror(-rc)}" + (f"\n{tail}" if tail else ""))
        self._obj = obj
        self._links: list[int] = []

    def program_fd(self, name: str) -> int:
        prog = _lib().bpf_object__find_program_by_name(self._obj, name.encode())
        if not prog:
            raise LibbpfError(f"no program {name!r} in the object")
        return _lib().bpf_program__fd(prog)

    def attach(self, name: str) -> int:
        """Attach the program to the hook its section names (a tracepoint, a raw tracepoint);
        a link handle for `detach`. Closing the object also detaches it."""
        lib = _lib()
        prog = lib.bpf_object__find_program_by_name(self._obj, name.encode())
        if not prog:
            raise LibbpfError(f"no program {name!r} in the object")
        del _log[:]
        link = lib.bpf_program__attach(prog)
        err = lib.libbpf_get_error(link) if link else -(ctypes.get_errno() or 22)
        if not link or err:
            code = -err if err else ctypes.get_errno()
            tail = "; ".join(line for line in _log[-3:] if line)
            raise LibbpfError(code, f"attaching {name}: {os.strerror(code)}"
                              + (f" ({tail})" if tail else ""))
        self._links.append(link)
        return link

    def map_fd(self, name: str) -> int:
        fd = _lib().bpf_object__find_map_fd_by_name(self._obj, name.encode())
        _check(fd, f"map {name!r}")
        return fd

    def close(self) -> None:
        for link in self._links:
            _lib().bpf_link__destroy(link)
        self._links.clear()
        if self._obj:
            _lib().bpf_object__close(self._obj)
            self._obj = None


def lookup(fd: int, key: ctypes.Structure | ctypes._SimpleCData,
           value: ctypes.Structure, flags: int = 0) -> bool:
    """Fill `value` from the map; False when the key is absent."""
    rc = _lib().bpf_map_lookup_elem_flags(fd, ctypes.byref(key), ctypes.byref(value), flags)
    if rc < 0 and ctypes.get_errno() == 2:  # ENOENT
        return False
    _check(rc, "map lookup")
    return True


def update(fd: int, key: ctypes.Structure | ctypes._SimpleCData,
           value: ctypes.Structure | ctypes._SimpleCData,
           flags: int = BPF_ANY) -> None:
    _check(_lib().bpf_map_update_elem(fd, ctypes.byref(key), ctypes.byref(value), flags),
           "map update")


def delete(fd: int, key: ctypes.Structure | ctypes._SimpleCData) -> bool:
    """Remove the key's entry; False when it was absent."""
    rc = _lib().bpf_map_delete_elem(fd, ctypes.byref(key))
    if rc < 0 and ctypes.get_errno() == 2:  # ENOENT
        return False
    _check(rc, "map delete")
    return True


class _TestRunOpts(ctypes.Structure):
    _fields_ = [("sz", ctypes.c_size_t), ("data_in", ctypes.c_void_p),
                ("data_out", ctypes.c_void_p), ("data_size_in", ctypes.c_uint32),
                ("data_size_out", ctypes.c_uint32), ("ctx_in", ctypes.c_void_p),
                ("ctx_out", ctypes.c_void_p), ("ctx_size_in", ctypes.c_uint32),
                ("ctx_size_out", ctypes.c_uint32), ("retval", ctypes.c_uint32),
                ("repeat", ctypes.c_int), ("duration", ctypes.c_uint32),
                ("flags", ctypes.c_uint32), ("cpu", ctypes.c_uint32),
                ("batch_size", ctypes.c_uint32)]


# struct __sk_buff up to `ingress_ifindex` (its 10th u32): the part of the context a test sets
_SkbContext = ctypes.c_uint32 * 10
_INGRESS_IFINDEX = 9


def test_run(prog_fd: int, packet: bytes, ingress_ifindex: int = 0) -> tuple[int, bytes]:
    """Run a tc program once on `packet` (an Ethernet frame, as on loopback), as if it had
    come in through `ingress_ifindex` (0: from nowhere); its verdict and the packet as the
    program left it. How the tests check the program without a fabric."""
    data_in = ctypes.create_string_buffer(packet, len(packet))
    data_out = ctypes.create_string_buffer(len(packet) + 256)
    ctx = _SkbContext()
    ctx[_INGRESS_IFINDEX] = ingress_ifindex
    opts = _TestRunOpts(sz=ctypes.sizeof(_TestRunOpts),
                        data_in=ctypes.cast(data_in, ctypes.c_void_p),
                        data_out=ctypes.cast(data_out, ctypes.c_void_p),
                        data_size_in=len(packet), data_size_out=len(data_out),
                        ctx_in=ctypes.cast(ctypes.byref(ctx), ctypes.c_void_p),
                        ctx_size_in=ctypes.sizeof(ctx), repeat=1)
    _check(_lib().bpf_prog_test_run_opts(prog_fd, ctypes.byref(opts)), "test run")
    return opts.retval, data_out.raw[:opts.data_size_out]
