"""The runner's end of the server agents: one ssh connection per server, JSON lines over it.

A `ServerSession` starts `testbed.cluster.server_agent` over ssh (the same command for a real
server and an emulated one: only the ssh prefix differs) and sends one request at a time, a
request of ops.py whose type gives the reply's. `send` and `receive` are split so that the
runner can ask every server at once and then read the answers (`ask_all`). An error reply, a
dead ssh connection or a reply that is not JSON raises `ServerError`, one line naming the server.

The ssh connection is the agent's life line: closing its stdin (the runner ending, killed or not:
the kernel closes the pipe) ends the agent, which first cleans its server up.
"""
from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar, cast

from testbed.cluster import ops
from testbed.errors import TestbedError
from testbed.fabric.clock import ClockOffset, Sample, offset_of
from testbed.lifecycle import interrupts
from testbed.lifecycle.cleanup import AGENT_MODULE

REPLY_TIMEOUT = 120.0  # s for one reply (configuring a few hundred nodes takes seconds)
START_TIMEOUT = 30.0  # s for the agent's first line (ssh login, Python start, imports)
CLOCK_SAMPLES = 16
R = TypeVar("R")


class ServerError(TestbedError):
    """A server agent failed a request, or its ssh connection ended: the message names the
    server."""


def agent_argv(*args: str) -> list[str]:
    """The command the server runs (the repository and venv at the same path as here; `-P`:
    root must not import from whatever folder the session starts in): the agent with its log
    path, or `--clean FOLDER SERVER`."""
    return [sys.executable, "-P", "-m", AGENT_MODULE, *args]


def remote_command(ssh: list[str], argv: list[str]) -> list[str]:
    """`argv` run on the server through its ssh prefix, from its root folder; `exec`: the
    login shell gives way to it, which then is the session's process."""
    return [*ssh, "cd / && exec " + shlex.join(argv)]


class ServerSession:
    """Start with `start()` (waits for the agent's hello), then `request()`; `close()` ends it."""

    def __init__(self, server: str, ssh: list[str], log: str) -> None:
        self.server = server
        self.ssh = ssh
        self.log = log
        self.proc: subprocess.Popen | None = None
        self.hello: ops.HelloReply | dict[str, Any] = {}
        self._buffer = b""
        self._sent = self._read_n = 0  # requests sent, replies read (to skip abandoned ones)
        self.lock = threading.Lock()  # one request at a time (telemetry asks from its thread)

    def start(self) -> ops.HelloReply:
        self.proc = subprocess.Popen(remote_command(self.ssh, agent_argv(self.log)),
                                     stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True)
        hello = cast(ops.HelloReply, self._reply(START_TIMEOUT, "starting"))
        self.hello = hello
        return hello

    def send(self, req: ops.Request[Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(req.message()).encode() + b"\n")
            self.proc.stdin.flush()
            self._sent += 1
        except (BrokenPipeError, OSError):
            raise self._dead(req.op) from None

    def receive(self, op: str, timeout: float = REPLY_TIMEOUT) -> Any:
        """The reply to the last request sent; replies to requests abandoned before (a signal
        while waiting) are read and dropped first, so that the connection stays in step."""
        while self._read_n < self._sent - 1:
            self._read_n += 1
            try:
                self._reply(timeout, op)
            except ServerError as exc:
                if "its agent's ssh connection ended" in str(exc):
                    raise
        self._read_n += 1
        return self._reply(timeout, op)

    def request(self, req: ops.Request[R], timeout: float = REPLY_TIMEOUT) -> R:
        with self.lock:
            self.send(req)
            return cast(R, self.receive(req.op, timeout))

    def _reply(self, timeout: float, op: str) -> Any:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        main = threading.current_thread() is threading.main_thread()
        while b"\n" not in self._buffer:
            if main:
                interrupts.checkpoint()  # a signal stops the wait (the reply is skipped later)
            left = deadline - time.monotonic()
            if left <= 0:
                raise ServerError(f"server {self.server}: no answer to `{op}` after "
                                  f"{timeout:g} s", "see its agent log in the results")
            ready, _, _ = select.select([fd], [], [], min(left, 0.05))
            if ready:
                chunk = _read(fd)
                if not chunk:
                    raise self._dead(op)
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            reply = json.loads(line)
        except ValueError:
            raise ServerError(f"server {self.server}: `{op}` got a line that is not JSON: "
                              f"{line[:200]!r}") from None
        if not reply.get("ok"):
            raise ServerError(f"server {self.server}: {op}: {reply.get('error')}")
        return reply.get("result")

    def _dead(self, op: str) -> ServerError:
        assert self.proc is not None
        try:
            self.proc.wait(timeout=2)
            err = (self.proc.stderr.read().decode(errors="replace").strip()
                   if self.proc.stderr else "")
        except subprocess.TimeoutExpired:
            err = ""
        last = err.splitlines()[-1] if err else f"exit status {self.proc.returncode}"
        return ServerError(f"server {self.server}: its agent's ssh connection ended during `{op}`: "
                           f"{last}", "check `ssh` to it and that the repository and its "
                           ".venv are at the same path there (scripts/install.sh)")

    def clock(self, samples: int = CLOCK_SAMPLES) -> ClockOffset:
        """This server's clock against ours, NTP-style, from the least-delayed of `samples`
        exchanges."""
        out: list[Sample] = []
        for _ in range(samples):
            with self.lock:
                t1 = time.time_ns()
                self.send(ops.Clock())
                reply = cast(ops.ClockReply, self.receive(ops.Clock.op))
                t4 = time.time_ns()
            out.append((t1, int(reply["t2"]), int(reply["t3"]), t4))
        return offset_of(out)

    def close(self, timeout: float = 15.0) -> None:
        """End of stdin: the agent cleans up and exits. Waited for, killed if it hangs."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def _read(fd: int) -> bytes:
    return os.read(fd, 1 << 20)


def ask_all(sessions: Iterable[ServerSession],
            request: ops.Request[R] | Mapping[str, ops.Request[R]],
            timeout: float = REPLY_TIMEOUT) -> dict[str, R]:
    """A request to every server at once (the same one, or each server's own from a mapping
    by server), then every answer: servers work in parallel, the runner waits for the
    slowest."""
    sessions = sorted(sessions, key=lambda s: s.server)  # locks always taken in one order
    mine = {s.server: request if isinstance(request, ops.Request) else request[s.server]
            for s in sessions}
    with contextlib.ExitStack() as held:
        for s in sessions:
            held.enter_context(s.lock)
        for s in sessions:
            s.send(mine[s.server])
        out: dict[str, R] = {}
        errors = []
        for s in sessions:  # every answer read, so that no session is left out of step
            try:
                out[s.server] = cast(R, s.receive(mine[s.server].op, timeout))
            except ServerError as exc:
                errors.append(exc)
        if errors:
            raise errors[0]
        return out


PROC_REFRESH = 0.1  # s: a process's status is asked of its server at most this often


class ServerProcesses:
    """The status of the processes one server's agent started, asked at most every
    PROC_REFRESH s however many `RemoteProcess` objects poll it."""

    def __init__(self, session: ServerSession) -> None:
        self.session = session
        self.codes: dict[str, int | None] = {}
        self.asked = 0.0
        self.lock = threading.Lock()

    def code(self, key: str) -> int | None:
        with self.lock:
            if time.monotonic() - self.asked >= PROC_REFRESH:
                self.codes = self.session.request(ops.Procs())["status"]
                self.asked = time.monotonic()
            return self.codes.get(key)

    def signal(self, key: str, sig: int) -> None:
        self.session.request(ops.Signal(keys=[key], signal=int(sig)))


class RemoteProcess:
    """A process in a node on a server, with the part of `subprocess.Popen` the runner uses
    (`poll`, `wait`, `send_signal`, `terminate`, `kill`, `returncode`, `pid`): waiting.py and
    `cleanup.end_process` drive it as they drive a local one."""

    def __init__(self, table: ServerProcesses, key: str, pid: int) -> None:
        self.table, self.key, self.pid = table, key, pid
        self.args = key
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.table.code(self.key)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.key, timeout or 0.0)
            time.sleep(PROC_REFRESH / 2)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            self.table.signal(self.key, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def fetch(session: ServerSession, path: str, local: Path, base: str) -> tuple[int, int]:
    """The file, or every file under the folder, `path` on the server copied to `local`
    (a file under `path` at `path/x` lands at `local/x`); (files, bytes)."""
    files = total = 0
    for name, size in session.request(ops.Listing(path=path))["files"]:
        rel = Path(name).relative_to(path) if name != path else Path()
        target = local / rel if rel != Path() else local
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "wb") as fh:
            offset = 0
            while offset < size:
                got = session.request(ops.Chunk(path=name, offset=offset))
                if not got["size"]:
                    break  # the file shrank while read: keep what there was
                fh.write(base64.b64decode(got["data"]))
                offset += got["size"]
        files += 1
        total += offset
    session.request(ops.Gathered(files=files, bytes=total,
                                 what=str(Path(path).relative_to(base)) if path != base else "."))
    return files, total
