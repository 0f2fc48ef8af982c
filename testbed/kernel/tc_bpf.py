"""Where a tc eBPF program of the fabric is loaded and attached: both programs (the ECN/trimming
queue at a router port's egress, the End SIDs at its ingress where seg6local is missing) are
loaded once per run through libbpf and attached by fd to a port's clsact hooks."""
from __future__ import annotations

from pathlib import Path

from pyroute2.netlink.exceptions import NetlinkError

from testbed.errors import EnvironmentProblem
from testbed.kernel import libbpf

EGRESS = 0xFFFFFFF3  # parent "ffff:fff3": clsact's egress hook
INGRESS = 0xFFFFFFF2  # parent "ffff:fff2": clsact's ingress hook
EEXIST = 17


def attach(ipr, ifindex: int, prog_fd: int, name: str, hook: int) -> None:
    """The program `name` at one of the port's clsact hooks; the port's clsact is made by the
    first program attached there."""
    try:
        ipr.tc("add", "clsact", index=ifindex)
    except NetlinkError as exc:  # EEXIST: the other program's clsact
        if exc.code != EEXIST:
            raise
    ipr.tc("add-filter", "bpf", index=ifindex, handle=1, parent=hook, fd=prog_fd, name=name,
           direct_action=True)


def stale(path: Path) -> bool:
    """The object is older than its C source beside it (the source changed since `make bpf`,
    e.g. after a pull): loading it would measure the old program."""
    source = path.with_suffix(".c")
    return source.exists() and path.exists() and source.stat().st_mtime > path.stat().st_mtime


def load(path: Path, program: str, maps: tuple[str, ...], what: str, build_fix: str,
         kernel_fix: str) -> tuple[libbpf.BpfObject, int, list[int]]:
    """The object at `path` loaded: it, its program's fd and its maps' fds. One clear error
    when it is not built (`build_fix`) or the kernel refuses it (`kernel_fix`)."""
    if not path.exists():
        raise EnvironmentProblem(f"{what} {path} is not built", build_fix)
    if stale(path):
        raise EnvironmentProblem(f"{what} {path} is older than its source "
                                 f"{path.with_suffix('.c').name}: it would run code the source "
                                 f"no longer says", build_fix)
    try:
        obj = libbpf.BpfObject(str(path))
    except libbpf.LibbpfError as exc:
        raise EnvironmentProblem(f"cannot load {what}: {exc}", kernel_fix) from None
    try:
        return obj, obj.program_fd(program), [obj.map_fd(m) for m in maps]
    except libbpf.LibbpfError as exc:
        obj.close()
        raise EnvironmentProblem(f"cannot load {what}: {exc}", kernel_fix) from None
