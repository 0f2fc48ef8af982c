"""What a server agent runs in its nodes and keeps on its server, for the runner to gather.

The host agents, background iperf3 flows and packet captures of the nodes on a server run on
that server: the runner asks its agent to `spawn` them (a process entering the node's network
namespace only, so it writes into the server's own folders), follows them (`procs`: exit
statuses; `read`: small files such as `ready` and `progress`), signals them, and at the end
copies their outputs back (`listing`, then `chunk` after `chunk`). Every path is inside the
agent's work folder (`ServerFiles`): a request naming anything else is refused, so a runner
can neither read nor write elsewhere on the server through it.
"""
from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from testbed.cluster import ops

CHUNK = 1 << 20  # bytes of a file per `chunk` reply (base64 makes it 1.4 MB of JSON)
SMALL = 1 << 16  # bytes of a file `read` returns (progress, ready, result.json)
TERM_GRACE = 5.0  # s a spawned process has to end after SIGTERM before SIGKILL


class JobError(Exception):
    """A request about files or processes that cannot be done (sent back to the runner)."""


class ServerFiles:
    """The agent's work folder on this server: made at start, removed at exit."""

    def __init__(self, root: Path) -> None:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.root = Path(os.path.realpath(root))

    def path(self, name: str) -> Path:
        """An absolute path inside the work folder (symlinks resolved), else JobError."""
        path = Path(os.path.realpath(name))
        if path != self.root and self.root not in path.parents:
            raise JobError(f"{name}: outside this agent's folder {self.root}")
        return path

    def write(self, files: dict[str, str]) -> None:
        for name, text in files.items():
            path = self.path(name)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(text)
            tmp.replace(path)  # a reader (an agent waiting for its start time) sees all or none

    def read(self, names: list[str]) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        for name in names:
            try:
                with open(self.path(name), "rb") as fh:
                    out[name] = fh.read(SMALL).decode(errors="replace")
            except OSError:
                out[name] = None
        return out

    def listing(self, name: str) -> list[tuple[str, int]]:
        """[path, size] of the file, or of every file under the folder; [] if neither."""
        path = self.path(name)
        if path.is_file():
            return [(str(path), path.stat().st_size)]
        if not path.is_dir():
            return []
        return [(str(p), p.stat().st_size) for p in sorted(path.rglob("*")) if p.is_file()]

    def chunk(self, name: str, offset: int) -> ops.ChunkReply:
        with open(self.path(name), "rb") as fh:
            fh.seek(offset)
            data = fh.read(CHUNK)
        return {"data": base64.b64encode(data).decode(), "size": len(data)}

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


class NodeProcesses:
    """Processes started in this server's nodes, by the runner's key (`agent:h0`, ...)."""

    def __init__(self, files: ServerFiles) -> None:
        self.files = files
        self.procs: dict[str, subprocess.Popen] = {}

    def spawn(self, key: str, node_pid: int, argv: list[str], stdout: str,
              cwd: str | None) -> int:
        """`argv` in the network namespace of `node_pid` (the node's shell), nothing else of
        it: the mount namespace stays the agent's, so outputs land in the work folder."""
        if key in self.procs:
            raise JobError(f"a process {key} was started already")
        out = self.files.path(stdout)
        out.parent.mkdir(parents=True, exist_ok=True)
        workdir = str(self.files.path(cwd)) if cwd else str(out.parent)
        with open(out, "wb") as fh:
            proc = subprocess.Popen(["nsenter", f"--net=/proc/{node_pid}/ns/net", "--", *argv],
                                    stdout=fh, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, cwd=workdir,
                                    start_new_session=True)
        self.procs[key] = proc
        return proc.pid

    def status(self) -> dict[str, int | None]:
        return {key: proc.poll() for key, proc in self.procs.items()}

    def signal(self, keys: list[str], sig: int) -> None:
        for key in keys:
            proc = self.procs.get(key)
            if proc is not None and proc.poll() is None:
                try:
                    proc.send_signal(sig)
                except ProcessLookupError:
                    pass

    def end_all(self) -> int:
        """SIGTERM to every process still running, SIGKILL after TERM_GRACE; how many ran."""
        running = [p for p in self.procs.values() if p.poll() is None]
        for p in running:
            p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + TERM_GRACE
        for p in running:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        return len(running)
