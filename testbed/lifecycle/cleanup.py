"""Removing what a run created, and only that.

A Mininet node is a namespace held alive by its processes (its shell, and anything started in
it). Killing every process whose network namespace is one of the run's removes the namespaces,
and with them every veth, address, route and qdisc inside: nothing of ours lives in the root
namespace (veths are created directly inside the nodes). Processes are matched by the netns
inode recorded when the node was made, so another tool's namespaces are never touched.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from testbed.lifecycle import registry
from testbed.lifecycle.files import mark_ended_elsewhere


def processes_in(inodes: set[int]) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.stat(entry / "ns" / "net").st_ino in inodes:
                pids.append(int(entry.name))
        except OSError:
            continue  # exited meanwhile, or a kernel thread
    return pids


def kill_namespaces(inodes: set[int], timeout: float = 10.0) -> int:
    """SIGKILL every process in these namespaces and wait until they are gone; how many."""
    own = os.getpid()
    killed: set[int] = set()
    deadline = time.monotonic() + timeout
    while True:
        pids = [p for p in processes_in(inodes) if p != own]
        if not pids:
            return len(killed)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except ProcessLookupError:
                pass
        _reap()
        if time.monotonic() > deadline:
            raise TimeoutError(f"processes {sorted(pids)} survived SIGKILL for {timeout:.0f} s")
        time.sleep(0.02)


def _reap() -> None:
    """Collect our own dead children (node shells are ours) so they do not linger as zombies."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _is_node_shell(pid: int, name: str) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"mininet:{name}".encode() in cmdline


def end_process(proc: subprocess.Popen, grace: float = 2.0) -> None:
    """SIGTERM (a tool like tcpdump or iperf3 then writes out what it has), SIGKILL if it
    does not end within `grace` seconds; always reaped."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def remove_named_netns(names: list[str]) -> int:
    """End every process in these named namespaces (an emulated server's sshd, the ssh
    sessions it serves), then delete the names; processes killed. Names that are gone are
    skipped: the record may list one that was never created."""
    killed = 0
    for name in names:
        path = Path("/run/netns") / name
        if not path.exists():
            continue
        killed += kill_namespaces({os.stat(path).st_ino})
        res = subprocess.run(["ip", "netns", "delete", name], capture_output=True, text=True)
        if res.returncode != 0 and path.exists():
            raise RuntimeError(f"ip netns delete {name}: {res.stderr.strip()}")
    return killed


def remove_dirs(paths: list[str]) -> None:
    """Folders a run made under the registry's directory (never anything outside it)."""
    for path in map(Path, paths):
        if path.resolve().parent == registry.STATE_DIR.resolve():
            shutil.rmtree(path, ignore_errors=True)


def clean_record(record: registry.RunRecord, reason: str) -> int:
    """Remove a dead run's leftovers, mark its results folder, forget it. Processes killed."""
    inodes = {inode for _, inode in record.nodes.values() if inode is not None}
    killed = kill_namespaces(inodes) if inodes else 0
    for name, (pid, inode) in record.nodes.items():
        # a shell spawned but never seen ready: its own pid and name identify it
        if inode is None and _is_node_shell(pid, name):
            os.kill(pid, signal.SIGKILL)
            killed += 1
    killed += remove_named_netns(record.named_netns)
    remove_dirs(record.dirs)
    _reap()
    mark_ended_elsewhere(Path(record.results), reason)
    if record.path is not None:
        record.path.unlink(missing_ok=True)
    return killed


def clean_stale() -> list[tuple[registry.RunRecord, int]]:
    """Every registered run whose runner is gone (crashed, SIGKILLed): clean it."""
    done = []
    for record in registry.read_all():
        if not record.runner_alive():
            done.append((record, clean_record(record, "crashed: runner died, cleaned later")))
    return done
