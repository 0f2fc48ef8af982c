"""The server agent's protocol, with the agent started locally through `sh -c` (what ssh does
with the command on a server): JSON lines, errors as one line naming the server, abandoned
replies skipped, and the end of stdin ending the agent and its log."""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from testbed.cluster import ops
from testbed.cluster.client import ServerError, ServerSession


@dataclass(frozen=True)
class Unknown(ops.Request[ops.Empty]):
    """A request of an op the agent does not have (its name set after the class, which keeps
    it out of ops.REQUESTS)."""


Unknown.op = "nope"


@dataclass(frozen=True)
class Misspelt(ops.Request[ops.Empty]):
    """`link` with a field it does not have."""

    node: str
    port: str
    up: bool


Misspelt.op = "link"


@pytest.fixture
def session(tmp_path: Path):
    s = ServerSession("t1", ["sh", "-c"], str(tmp_path / "run" / "agent.log"))
    s.start()
    yield s
    s.close()


def test_hello_and_clock(session: ServerSession):
    assert session.hello["pid"] > 0 and session.hello["python"]
    reply = session.request(ops.Clock())
    assert reply["t2"] <= reply["t3"] <= time.time_ns()
    offset = session.clock(samples=4)
    assert offset.samples == 4 and 0 < offset.rtt_ns < 1e9
    assert abs(offset.offset_ns) <= offset.error_ns  # one machine, one clock


def test_errors_come_back_as_one_line_naming_the_server(session: ServerSession):
    with pytest.raises(ServerError,
                       match=r"^server t1: nope: BadRequest: unknown request 'nope'$"):
        session.request(Unknown())
    with pytest.raises(ServerError, match=r"^server t1: link: BadRequest: link: .*unexpected "
                                          r"keyword argument 'port'$"):
        session.request(Misspelt(node="h0", port="h0-eth0", up=True))
    with pytest.raises(ServerError, match="server t1: configure: AgentError: no plan yet"):
        session.request(ops.Configure(fifo={}))
    assert session.request(ops.Clock())["t3"] > 0  # the session is still in step


def test_a_reply_abandoned_by_a_signal_is_skipped(session: ServerSession):
    session.send(ops.Hello())  # as if a signal had stopped the wait for its reply
    assert "t2" in session.request(ops.Clock())


def test_the_end_of_stdin_ends_the_agent_and_its_log(tmp_path: Path):
    log = tmp_path / "run" / "agent.log"  # the agent makes its folder
    s = ServerSession("t2", ["sh", "-c"], str(log))
    s.start()
    s.request(ops.Clock())
    assert log.exists() and "started" in log.read_text()
    proc = s.proc
    assert proc is not None
    s.close()
    assert proc.returncode == 0 and not log.exists()
    assert not log.parent.exists()  # and the folder, empty


def test_an_agent_that_cannot_start_is_one_line(tmp_path: Path):
    s = ServerSession("t3", ["sh", "-c", "exit 7; "], str(tmp_path / "agent.log"))
    with pytest.raises(ServerError, match="server t3: its agent's ssh connection ended during "
                                          "`starting`: exit status 7"):
        s.start()
    s.close()


def test_files_go_to_and_come_back_from_the_agents_folder_only(session: ServerSession,
                                                               tmp_path: Path):
    """Written into the agent's work folder, read back, fetched chunk by chunk (a file over
    one chunk too); a path outside the folder, through `..` or not, is refused."""
    from testbed.cluster.client import fetch
    from testbed.cluster.server_jobs import CHUNK

    work = session.hello["work"]
    big = "x" * (CHUNK + 100)
    session.request(ops.Write(files={f"{work}/a/r.json": '{"ok": 1}', f"{work}/a/big": big}))
    assert session.request(ops.Read(paths=[f"{work}/a/r.json", f"{work}/a/none"]))["files"] == {
        f"{work}/a/r.json": '{"ok": 1}', f"{work}/a/none": None}
    assert fetch(session, f"{work}/a", tmp_path / "got", work) == (2, CHUNK + 100 + 9)
    assert (tmp_path / "got" / "big").read_text() == big
    assert (tmp_path / "got" / "r.json").read_text() == '{"ok": 1}'
    for outside in (str(tmp_path / "evil"), f"{work}/../evil"):
        with pytest.raises(ServerError, match="outside this agent's folder"):
            session.request(ops.Write(files={outside: "x"}))
        with pytest.raises(ServerError, match="outside this agent's folder"):
            session.request(ops.Listing(path=outside))
    assert not (tmp_path / "evil").exists()
    assert "gathered 2 files" in session.request(ops.Log())["text"]


def test_a_clean_command_recorded_under_a_former_module_name_runs_the_agent():
    """A crashed run's record holds its servers' clean command under the agent's module name
    of the version that wrote it; a clean-up replays it under the current one."""
    import importlib

    from testbed.cluster.client import agent_argv, remote_command
    from testbed.lifecycle import cleanup

    ssh = ["ssh", "root@s1"]
    now = remote_command(ssh, agent_argv("--clean", "/run/x.agents", "s1"))
    assert f" -m {cleanup.AGENT_MODULE} --clean " in now[-1]
    assert callable(importlib.import_module(cleanup.AGENT_MODULE).main)
    for former in ("testbed.emulation.server_agent", "testbed.emulation.cluster.server_agent"):
        recorded = [*ssh, now[-1].replace(cleanup.AGENT_MODULE, former)]
        assert recorded != now and cleanup.as_current(recorded) == now
    other = ["sh", "-c", "echo testbed.emulation.server_agent; python -m testbed.emulation.x"]
    assert cleanup.as_current(other) == other
