"""What the single-machine network and the cluster's share: Mininet's nodes, their shells,
and their end. Each network adds what differs (where a node's shell runs, what is done once it
is up, and everything after) on this small base; both implement `network_api.Network`.
"""
from __future__ import annotations

import os
import pty
import select
import signal
import time
from pathlib import Path

from mininet.net import Mininet
from mininet.node import Host

from testbed.errors import TestbedError
from testbed.fabric.plan import FabricPlan
from testbed.lifecycle import interrupts
from testbed.lifecycle.progress import Progress
from testbed.lifecycle.registry import RunRegistry

PROMPT_TIMEOUT = 30.0  # s for a node's shell to print its first prompt (about 10 ms when idle)


class FabricNode(Host):
    """A Mininet host whose start is split in two, spawn (`startShell`) and wait for the
    shell's prompt (`finish_start`), so that a hundred nodes boot at once instead of one after
    the other. The two halves are Mininet 2.3's own `Node.startShell`, cut at its wait."""

    def shell_argv(self, opts: str) -> list[str]:
        return ["mnexec", opts, "env", "PS1=" + chr(127), "bash", "--norc", "--noediting",
                "-is", "mininet:" + self.name]

    def startShell(self, mnopts: str | None = None) -> None:  # Mininet's name
        # `shell_prefix` (cluster mode) runs the shell on a server: `ssh -tt root@server`, as
        # Mininet's RemoteMixin does (whose `-c`: ssh already gives the session its own tty)
        prefix = list(self.params.get("shell_prefix", []))
        mnopts = mnopts if mnopts is not None else ("-c" if prefix else "-cd")
        opts = mnopts + ("n" if self.inNamespace else "")
        cmd = prefix + self.shell_argv(opts)
        self.master, self.slave = pty.openpty()
        self.shell = self._popen(cmd, stdin=self.slave, stdout=self.slave, stderr=self.slave,
                                 close_fds=False)
        self.stdin = os.fdopen(self.master, "r")
        self.stdout = self.stdin
        self.pid = self.shell.pid
        self.pollOut = select.poll()
        self.pollOut.register(self.stdout)
        self.outToNode[self.stdout.fileno()] = self
        self.inToNode[self.stdin.fileno()] = self
        self.execed = False
        self.lastCmd = None
        self.lastPid = None
        self.readbuf = ""
        self.waiting = True  # until finish_start has seen the prompt

    def finish_start(self, timeout: float = PROMPT_TIMEOUT) -> None:
        """Wait for the prompt: from then on the node's namespace exists (mnexec made it).
        Bounded, and a signal ends the wait (Mininet's own wait has neither): a shell that
        never prompts is an error naming the node."""
        deadline = time.monotonic() + timeout
        while True:
            interrupts.checkpoint()
            # select, not pollOut: Mininet registered pollOut for POLLOUT too, always ready
            readable, _, _ = select.select([self.stdout], [], [], 0.05)
            if readable:
                if self.shell.poll() is not None:
                    raise TestbedError(f"node {self.name}: its shell exited (status "
                                       f"{self.shell.returncode}) before its prompt")
                data = self.read(1024)
                if data and data[-1] == chr(127):
                    break
            elif time.monotonic() > deadline:
                raise TestbedError(f"node {self.name}: no shell prompt after {timeout:g} s",
                                   "the machine may be overloaded; see `mrc-testbed clean`")
        self.waiting = False
        self.cmd("unset HISTFILE; stty -echo; set +m")
        if self.params.get("shell_prefix"):  # the shell's own pid, not its ssh's (RemoteMixin)
            self.pid = int(self.cmd("echo $$").strip())


class MininetFabric:
    """The plan's nodes as Mininet hosts whose shells boot together; `close_shells()` releases
    them. Subclasses say where a shell runs (`node_params`) and what follows its start
    (`node_started`)."""

    def __init__(self, plan: FabricPlan, registry: RunRegistry, progress: Progress) -> None:
        self.plan = plan
        self.registry = registry
        self.progress = progress
        self.net = Mininet(controller=None, build=False, autoSetMacs=False,
                           autoStaticArp=False, waitConnected=False)
        self.ifindex: dict[str, dict[str, int]] = {}  # node -> interface name -> index
        self.results_dir: Path | None = None  # the run's results folder (the runner sets it)
        self._closed = False

    def add_nodes(self) -> None:
        """Spawn every node's shell, then wait for each: the shells boot in parallel."""
        names = list(self.plan.nodes)
        for name in names:
            node = self.net.addHost(name, cls=FabricNode, ip=None, inNamespace=True,
                                    **self.node_params(name))
            self.registry.add_node(name, node.pid, None)  # before its namespace even exists
        for name in self.progress.bar(names, len(names), "nodes"):
            self.net[name].finish_start()
            self.node_started(name)

    def node_params(self, name: str) -> dict[str, object]:
        """Extra parameters of a node's Mininet host (the cluster mode's shell prefix)."""
        return {}

    def node_started(self, name: str) -> None:
        """A node's shell is up (its prompt seen)."""

    def node(self, name: str) -> Host:
        return self.net[name]

    def pid(self, name: str) -> int:
        """The pid of the node's shell (on its server, in the cluster mode)."""
        return int(self.net[name].pid)

    def close_shells(self) -> None:
        """Mininet's ptys released and the node shells (or their ssh) ended: once the nodes'
        namespaces are emptied."""
        for node in self.net.hosts:
            for fd in (node.stdin, node.stdout):
                try:
                    fd.close()
                except OSError:
                    pass
            if node.slave is not None:  # the pty's other end, which the shell inherited:
                os.close(node.slave)  # left open, the fds of many runs in one process pile
                node.slave = None  # up until select() fails past fd 1024
            if node.shell is not None and node.shell.poll() is None:
                os.kill(node.shell.pid, signal.SIGKILL)
                node.shell.wait()
