"""Removing what a run created, and only that.

A Mininet node is a namespace held alive by its processes (its shell, and anything started in
it). Killing every process whose network namespace is one of the run's removes the namespaces,
and with them every veth, address, route and qdisc inside: nothing of ours lives in the root
namespace (veths are created directly inside the nodes).

A live run kills by the inodes of the namespaces it made and holds. A clean-up of a dead run
cannot trust an inode alone: once a namespace is freed the kernel may give its inode number to
another tool's namespace. So before any signal it proves a recorded namespace is still the
run's: its shell is alive with the recorded pid, kernel start time, `mininet:<name>` command line
and namespace. In a namespace it cannot prove so, only processes carrying the run's mark
(`MRC_TESTBED_RUN=<run id>` in their environment, registry.py) are ended. The init namespace
and the caller's own are never touched.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from testbed.lifecycle import registry
from testbed.lifecycle.files import mark_ended_elsewhere


def netns_of(pid: int | str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def _protected() -> set[int]:
    """Namespaces a clean-up must never empty: init's (the machine's) and our own."""
    return {ino for ino in (netns_of(1), netns_of("self")) if ino is not None}


def kill_namespaces(inodes: set[int], timeout: float = 10.0) -> int:
    """SIGKILL every process in these namespaces (never init's nor ours) and wait until they
    are gone; how many."""
    inodes = set(inodes) - _protected()
    return _kill_until_gone(lambda pid, ino: ino in inodes, timeout)


def _kill_until_gone(match: Callable[[int, int], bool], timeout: float) -> int:
    own = os.getpid()
    killed: set[int] = set()
    deadline = time.monotonic() + timeout
    while True:
        pids = [pid for pid, ino in _processes() if pid != own and match(pid, ino)]
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


def _processes() -> list[tuple[int, int]]:
    """(pid, netns inode) of every process we can see."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            ino = netns_of(entry.name)
            if ino is not None:
                out.append((int(entry.name), ino))
    return out


def _marked(pid: int, run_id: str) -> bool:
    """The process carries this run's mark in its environment."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"{registry.RUN_ENV}={run_id}".encode() in environ


def is_recorded_shell(name: str, node: registry.NodeRecord) -> bool:
    """The recorded pid is still the node's shell: same kernel start time, `mininet:<name>` on
    its command line, and (once recorded) the same namespace."""
    if node.start is None or registry.start_time(node.pid) != node.start:
        return False
    if not _is_node_shell(node.pid, name):
        return False
    return node.netns is None or netns_of(node.pid) == node.netns


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


SERVER_CLEAN_TIMEOUT = 60.0  # s for one server's clean over ssh
# The server agent's module (testbed/cluster/server_agent.py) and the names it ran under before:
# a record written by an earlier version holds its servers' clean command under such a name.
AGENT_MODULE = "testbed.cluster.server_agent"
_FORMER_AGENT = re.compile(r"(?<=-m )testbed\.emulation(?:\.cluster)?\.server_agent(?![\w.])")


def as_current(command: list[str]) -> list[str]:
    """A recorded clean command, the agent's former module names replaced by its own."""
    return [_FORMER_AGENT.sub(AGENT_MODULE, part) for part in command]


def clean_servers(record: registry.RunRecord, problems: list[str]) -> int:
    """Run each recorded server's clean command (over ssh: its agent's `--clean`, which ends
    what its record lists there); processes it ended. A server that cannot be reached is
    described in `problems`: what is left there is named, not guessed at."""
    killed = 0
    for server, command in record.servers.items():
        try:
            res = subprocess.run(as_current(command), capture_output=True, text=True,
                                 timeout=SERVER_CLEAN_TIMEOUT, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            problems.append(f"server {server}: its clean-up did not run ({exc})")
            continue
        last = (res.stdout.strip().splitlines() or [""])[-1]
        try:
            killed += int(json.loads(last)["killed"])
        except (ValueError, KeyError, TypeError):
            problems.append(f"server {server}: clean-up over ssh failed (exit "
                            f"{res.returncode}): {(res.stderr.strip() or last)[-300:]}")
    return killed


def clean_record(record: registry.RunRecord, reason: str,
                 problems: list[str] | None = None) -> int:
    """Remove a dead run's leftovers (its servers' first, over ssh), mark its results folder,
    forget it. Processes killed."""
    problems = problems if problems is not None else []
    before = len(problems)
    server_killed = clean_servers(record, problems)
    unreached = len(problems) > before  # the record stays: `clean` again once reachable
    protected = _protected()
    proven = {node.netns for name, node in record.nodes.items()
              if node.netns is not None and is_recorded_shell(name, node)} - protected
    unproven = {node.netns for node in record.nodes.values()
                if node.netns is not None} - proven - protected
    killed = _kill_until_gone(
        lambda pid, ino: ino in proven or (ino in unproven and _marked(pid, record.run_id)),
        10.0) if proven or unproven else 0
    for name, node in record.nodes.items():
        # a shell spawned but never seen ready: only a proven one is ended
        if node.netns is None and is_recorded_shell(name, node):
            try:
                os.kill(node.pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
    killed += remove_named_netns(record.named_netns)
    remove_dirs(record.dirs)
    _reap()
    mark_ended_elsewhere(Path(record.results), reason)
    if record.path is not None and not unreached:
        record.path.unlink(missing_ok=True)
    return killed + server_killed


def clean_stale(problems: list[str] | None = None) -> list[tuple[registry.RunRecord, int]]:
    """Every registered run whose runner is gone (crashed, SIGKILLed): clean it. Damaged
    registry entries are described in `problems` and left alone."""
    done = []
    for record in registry.read_all(problems):
        if not record.runner_alive():
            done.append((record, clean_record(record, "crashed: runner died, cleaned later",
                                              problems)))
    return done
