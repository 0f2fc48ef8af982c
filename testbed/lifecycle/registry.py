"""The registry of live runs: what each run created, written down before it is created.

One file per run under /run/mrc-testbed (tmpfs: gone at reboot, like the namespaces). The runner
appends a line per node as soon as its namespace exists, so even a run killed with SIGKILL
mid-build leaves an exact list of what to remove. `mrc-testbed clean` and the next run read it;
nothing that is not listed here is ever touched.

Each node is recorded with its shell's pid, that pid's kernel start time and its namespace's
inode, so that a clean-up can prove a process is still the one recorded before it signals
anything (cleanup.py). Every process a run starts also carries `MRC_TESTBED_RUN=<run id>` in
its environment (set here, inherited by Mininet's shells and everything they start).

A damaged file (a torn line from a SIGKILL, an edit by hand) is skipped and reported, never
deleted: it may belong to a run that is being born. `run_lock` makes the check for an active
run and the start of a new one one atomic step (an flock held for the whole run).
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from testbed.errors import EnvironmentProblem

STATE_DIR = Path(os.environ.get("MRC_TESTBED_STATE", "/run/mrc-testbed"))
RUN_ENV = "MRC_TESTBED_RUN"  # in the environment of every process a run starts
LOCK_NAME = "run.lock"


def start_time(pid: int) -> int | None:
    """Kernel start time of `pid` (field 22 of /proc/pid/stat): tells a pid from its reuse.
    None for a process that is gone or a zombie (dead, not yet reaped by its parent)."""
    try:
        stat_text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat_text.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else int(fields[19])


_start_time = start_time  # the name other modules used


@dataclass(frozen=True)
class NodeRecord:
    pid: int  # the node's shell
    netns: int | None  # its namespace's inode; None: spawned, namespace not seen yet
    start: int | None  # the shell's kernel start time; None in records of older testbeds


@dataclass
class RunRecord:
    run_id: str
    runner_pid: int
    runner_start: int | None
    results: str
    scenario: str
    nodes: dict[str, NodeRecord] = field(default_factory=dict)
    # emulated servers (testbed/cluster/emulated_servers.py): named namespaces it made,
    # and the folder of their sshd keys and configs
    named_netns: list[str] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)
    # cluster mode: per server, the command that cleans it over ssh (its agent's own record)
    servers: dict[str, list[str]] = field(default_factory=dict)
    path: Path | None = None

    def runner_alive(self) -> bool:
        return self.runner_start is not None and start_time(self.runner_pid) == self.runner_start


def _state_dir() -> Path:
    """The registry folder, made root-only; a symlink or a folder of another user is refused
    (the registry decides which processes a root clean-up kills)."""
    STATE_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(STATE_DIR)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise EnvironmentProblem(f"{STATE_DIR}: not a folder of this user (a symlink, or made "
                                 f"by another user); the run registry cannot live there",
                                 "remove it, or set MRC_TESTBED_STATE to another folder")
    return STATE_DIR


class RunRegistry:
    """The current run's own record, appended to as the build goes."""

    def __init__(self, run_id: str, results: Path, scenario: str,
                 path: Path | None = None) -> None:
        """`path`: a record kept elsewhere than the registry folder (a server agent's own,
        in its folder on its server, read by its `--clean`)."""
        self.path = path if path is not None else _state_dir() / f"{run_id}.jsonl"
        header = {"run_id": run_id, "runner_pid": os.getpid(),
                  "runner_start": start_time(os.getpid()), "results": str(results),
                  "scenario": scenario}
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600)
        self._fh = os.fdopen(fd, "w")
        self._write(header)
        self._previous_env = os.environ.get(RUN_ENV)
        os.environ[RUN_ENV] = run_id

    def _write(self, obj: dict) -> None:
        self._fh.write(json.dumps(obj) + "\n")
        self._fh.flush()

    def add_node(self, name: str, pid: int, inode: int | None) -> None:
        """Record a node; a later line for the same node completes an earlier one."""
        self._write({"node": name, "pid": pid, "netns": inode, "start": start_time(pid)})

    def add_named_netns(self, name: str) -> None:
        """Record a named namespace (/run/netns/NAME) before `ip netns add` creates it."""
        self._write({"named_netns": name})

    def add_dir(self, path: Path) -> None:
        """Record a folder of the run's own under STATE_DIR before it is made."""
        self._write({"dir": str(path)})

    def add_server(self, name: str, clean: list[str]) -> None:
        """Record a server before its agent starts, with the command (ssh included) that
        cleans it from its agent's own record should the run die."""
        self._write({"server": name, "clean": clean})

    def close(self) -> None:
        """The run removed everything it created: forget it."""
        self._fh.close()
        self.path.unlink(missing_ok=True)
        if self._previous_env is None:
            os.environ.pop(RUN_ENV, None)
        else:
            os.environ[RUN_ENV] = self._previous_env


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _parse(path: Path, text: str, problems: list[str]) -> RunRecord | None:
    lines = text.splitlines()
    if not lines:
        return None  # a run between creating its file and writing the first line
    try:
        head = json.loads(lines[0])
        record = RunRecord(str(head["run_id"]), int(head["runner_pid"]),
                           _int(head.get("runner_start")), str(head["results"]),
                           str(head["scenario"]), path=path)
    except (ValueError, KeyError, TypeError) as exc:
        problems.append(f"{path}: unreadable header ({type(exc).__name__}); left as it is")
        return None
    for number, line in enumerate(lines[1:], 2):
        try:
            entry = json.loads(line)
            if isinstance(entry.get("named_netns"), str):
                record.named_netns.append(entry["named_netns"])
                continue
            if isinstance(entry.get("dir"), str):
                record.dirs.append(entry["dir"])
                continue
            if isinstance(entry.get("server"), str):
                clean = entry["clean"]
                if not isinstance(clean, list) or not all(isinstance(a, str) for a in clean):
                    raise TypeError("clean")
                record.servers[entry["server"]] = clean
                continue
            pid = _int(entry["pid"])
            if not isinstance(entry["node"], str) or pid is None:
                raise TypeError("node or pid")
            record.nodes[entry["node"]] = NodeRecord(pid, _int(entry.get("netns")),
                                                     _int(entry.get("start")))
        except (ValueError, KeyError, TypeError):
            problems.append(f"{path}: line {number} unreadable (a run killed mid-write?); "
                            f"skipped")
    return record


def read_record(path: Path, problems: list[str]) -> RunRecord | None:
    """One record file (a server agent's own), or None when it is not there or unreadable."""
    try:
        return _parse(path, path.read_text(errors="replace"), problems)
    except OSError:
        return None


def read_all(problems: list[str] | None = None) -> list[RunRecord]:
    """Every readable run record. A damaged file or line is skipped and described in
    `problems`; no file is ever deleted here."""
    problems = problems if problems is not None else []
    records: list[RunRecord] = []
    if not STATE_DIR.is_dir():
        return records
    for path in sorted(STATE_DIR.glob("*.jsonl")):
        try:
            if path.is_symlink() or not path.is_file():
                problems.append(f"{path}: not a regular file; left as it is")
                continue
            text = path.read_text(errors="replace")
        except OSError as exc:
            problems.append(f"{path}: unreadable ({exc.strerror}); left as it is")
            continue
        record = _parse(path, text, problems)
        if record is not None:
            records.append(record)
    return records


@contextlib.contextmanager
def run_lock() -> Iterator[None]:
    """Held for a whole run: a second run fails at once instead of racing the first between
    its check for active runs and its first registry entry. The kernel drops the lock when the
    holder dies, however it dies."""
    path = _state_dir() / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise EnvironmentProblem(
                f"another run is active (pid {holder}); two fabrics on two cores would make "
                f"both runs' numbers meaningless",
                f"wait for it, or stop it with `kill {holder}`") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock
