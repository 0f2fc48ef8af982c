"""Emulated servers: several "machines" on this one, to test the cluster mode without a cluster.

Each server is a named network namespace with its own sshd (a key made for this run only),
joined to the others by a veth underlay through a bridge in a hub namespace. The hub is where
this machine's ssh client runs, as a controller on the servers' management network would.
A server's underlay MTU is what the scenario asks (`cluster.underlay_mtu`, by default the
fabric MTU plus VXLAN's overhead), and it is measured before anything of the fabric is built.

Every namespace and the key folder are written to the run's registry before they are made,
so `mrc-testbed clean` removes them after a crash; nothing lives in the root namespace.

What stands in for what on real servers:
- the server's sshd for the server's: the server agents (server_agent.py) always start through
  it, and with `cluster.ssh_transport: true` so do the nodes' shells, as Mininet's RemoteMixin
  does;
- `ip netns exec SERVER` (here `nsenter --net`, which leaves the mount namespace alone) for
  `ssh SERVER` when starting node shells the fast way (the default): only the shells' start
  takes this shortcut; everything done to a node after it goes through the agent;
- a server's own disk for the agents' folder: each sshd runs in a mount namespace of its own
  with a private tmpfs on that folder, so what a server's agent and the processes it starts
  write there (host agents' results, iperf3 reports, captures) is invisible from this
  machine's side, as on a real server: the runner gets it only by gathering it through the
  agent.

`RealServers` is the same interface for the servers of a `cluster.servers` list: nothing to
make or remove, their ssh destinations checked, their underlay measured by the agents.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from ipaddress import IPv6Address, ip_address
from pathlib import Path

from testbed.errors import EnvironmentProblem
from testbed.kernel import netns
from testbed.lifecycle import cleanup
from testbed.lifecycle.registry import STATE_DIR, RunRegistry
from testbed.scenario.cluster import Cluster

HUB_ADDRESS = "10.254.0.254"  # the hub's address on the emulated underlay (the controller)
PREFIX_LEN = 24
UNDERLAY_IF = "ul0"
SSHD = "/usr/sbin/sshd"
TOOLS = ("ssh", "ssh-keygen", "nsenter", "unshare", "ethtool", "ping")
SSH_OPTIONS = ["-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=5",
               "-o", "ServerAliveCountMax=6"]


@dataclass(frozen=True)
class UnderlayPath:
    """What one server measured toward another: a full-size tunnel packet unfragmented, RTT."""

    src: str
    dst: str
    mtu: int  # the sender's underlay device MTU
    rtt_ms: float


def _run(cmd: list[str], what: str, stdin: str | None = None) -> str:
    res = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=30)
    if res.returncode != 0:
        raise RuntimeError(f"{what}: `{' '.join(cmd)}` failed: {res.stderr.strip()}")
    return res.stdout


def require_tools() -> None:
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if not os.access(SSHD, os.X_OK):
        missing.append(SSHD + " (openssh-server)")
    if missing:
        raise EnvironmentProblem(f"emulated servers need {', '.join(missing)}, not found",
                                 "run `sudo make install` (openssh-server, ethtool, iputils-ping)")


class EmulatedServers:
    """Create with `create()`, always end with `remove()`. The underlay is measured by the
    server agents (ClusterNetwork), as on real servers."""

    emulated = True

    def __init__(self, cluster: Cluster, fabric_mtu: int, registry: RunRegistry,
                 private: Path) -> None:
        """`private`: the agents' folder, a tmpfs of its own in each server's mount namespace
        (made empty here, registered by the caller)."""
        assert cluster.emulated is not None
        self.private = private
        self.cluster = cluster
        self.registry = registry
        self.names = cluster.server_names()
        self.address = cluster.underlays()
        token = hashlib.sha1(registry.path.name.encode()).hexdigest()[:6]
        self.netns = {name: f"mrc-{token}-{name}" for name in self.names}
        self.hub = f"mrc-{token}-hub"
        self.mtu = cluster.emulated_mtu(fabric_mtu)
        self.required_mtu = cluster.required_mtu(fabric_mtu)
        self.fabric_mtu = fabric_mtu
        self.keydir = STATE_DIR / f"{registry.path.stem}.ssh"
        self.sshd: dict[str, subprocess.Popen] = {}
        self.paths: list[UnderlayPath] = []
        self._removed = False

    # ---- access ----
    def path(self, server: str) -> str:
        """The server's namespace file: netlink sockets opened there are the server's."""
        return netns.named(self.netns[server])

    def prefix(self, server: str) -> list[str]:
        """Command prefix that runs a command on the server, the fast way (no ssh)."""
        return ["nsenter", f"--net={self.path(server)}"]

    def ssh(self, server: str, tty: bool = False) -> list[str]:
        """Command prefix that runs a command on the server through its sshd, from the hub."""
        return (["nsenter", f"--net={netns.named(self.hub)}", "ssh", "-q",
                 "-i", str(self.keydir / "client_key"), *SSH_OPTIONS,
                 "-o", "StrictHostKeyChecking=no",
                 "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"]
                + (["-tt"] if tty else []) + [f"root@{self.address[server]}"])

    # ---- build ----
    def create(self) -> None:
        for name in [self.hub, *self.netns.values()]:
            self.registry.add_named_netns(name)
            _run(["ip", "netns", "add", name], f"creating namespace {name}")
        self._underlay()
        self._sshd()

    def _underlay(self) -> None:
        """A bridge in the hub, one veth per server into it, every device at the MTU asked."""
        v6 = isinstance(ip_address(self.address[self.names[0]]), IPv6Address)
        if v6:  # the hub's own address is IPv4: emulated underlays are IPv4 (see cluster.py)
            raise RuntimeError("emulated underlays are IPv4")
        hub = [f"link add br0 mtu {self.mtu} type bridge",
               f"addr add {HUB_ADDRESS}/{PREFIX_LEN} dev br0"]
        for name in self.names:
            hub += [f"link add s-{name} mtu {self.mtu} type veth peer name {UNDERLAY_IF} "
                    f"netns {self.netns[name]} mtu {self.mtu}",
                    f"link set s-{name} master br0 up"]
        hub += ["link set br0 up", "link set lo up"]
        _run(["ip", "-n", self.hub, "-batch", "-"], "the emulated underlay", "\n".join(hub))
        for name in self.names:
            _run(["ip", "-n", self.netns[name], "-batch", "-"], f"underlay of {name}",
                 f"addr add {self.address[name]}/{PREFIX_LEN} dev {UNDERLAY_IF}\n"
                 f"link set {UNDERLAY_IF} up\nlink set lo up\n")

    def _sshd(self) -> None:
        """One sshd per server, with a host key and a client key made for this run only."""
        self.registry.add_dir(self.keydir)
        self.keydir.mkdir(mode=0o700, parents=True, exist_ok=True)
        for key in ("host_key", "client_key"):
            _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "mrc-testbed emulated",
                  "-f", str(self.keydir / key)], "making a test-only ssh key")
        shutil.copy(self.keydir / "client_key.pub", self.keydir / "authorized_keys")
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation dir
        for name in self.names:
            config = self.keydir / f"sshd_{name}.conf"
            config.write_text(
                f"ListenAddress {self.address[name]}\nPort 22\n"
                f"HostKey {self.keydir / 'host_key'}\nPidFile none\n"
                f"AuthorizedKeysFile {self.keydir / 'authorized_keys'}\n"
                "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
                "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
                "PrintMotd no\nUseDNS no\n")
            log = open(self.keydir / f"sshd_{name}.log", "w")
            # the server's own folder: a tmpfs only its sshd (and what it serves) sees
            private = (f'mount -t tmpfs -o mode=0700 mrc-server "$1" && '
                       f'exec {SSHD} -D -e -f "$2"')
            self.sshd[name] = subprocess.Popen(
                [*self.prefix(name), "unshare", "--mount", "--propagation", "private",
                 "sh", "-c", private, "sh", str(self.private), str(config)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
            log.close()
        deadline = time.monotonic() + 10
        for name in self.names:
            while True:
                res = subprocess.run([*self.ssh(name), "true"], capture_output=True, text=True,
                                     timeout=10)
                if res.returncode == 0:
                    break
                if self.sshd[name].poll() is not None or time.monotonic() > deadline:
                    log_text = (self.keydir / f"sshd_{name}.log").read_text()[-500:]
                    raise RuntimeError(f"the sshd of emulated server {name} did not answer: "
                                       f"{res.stderr.strip()} {log_text}")
                time.sleep(0.05)

    # ---- the end ----
    def remove(self) -> int:
        """End every sshd (and what it serves), delete the namespaces and the keys; processes
        ended. Idempotent."""
        if self._removed:
            return 0
        self._removed = True
        killed = cleanup.remove_named_netns([*self.netns.values(), self.hub])
        for proc in self.sshd.values():
            proc.wait()  # killed with its namespace; reaped here
        cleanup.remove_dirs([str(self.keydir)])
        return killed


class RealServers:
    """The servers of `cluster.servers`: reached as root over ssh with a key (BatchMode: never
    a prompt), node shells started over ssh as Mininet's RemoteMixin does."""

    emulated = False

    def __init__(self, cluster: Cluster, fabric_mtu: int) -> None:
        self.names = cluster.server_names()
        self.target = {s.name: s.ssh for s in cluster.servers}
        self.netns: dict[str, str] = {}
        self.mtu: int | None = None  # each server's, measured by its agent
        self.required_mtu = cluster.required_mtu(fabric_mtu)
        self.fabric_mtu = fabric_mtu

    def ssh(self, server: str, tty: bool = False) -> list[str]:
        return ["ssh", "-q", *SSH_OPTIONS, *(["-tt"] if tty else []), self.target[server]]

    def prefix(self, server: str) -> list[str]:
        return self.ssh(server, tty=True)

    def create(self) -> None:
        """Every server answers over ssh without a prompt, or a clear error naming it."""
        for name in self.names:
            res = subprocess.run([*self.ssh(name), "true"], capture_output=True, text=True,
                                 timeout=30, stdin=subprocess.DEVNULL)
            if res.returncode != 0:
                raise EnvironmentProblem(
                    f"server {name}: `ssh {self.target[name]} true` failed (exit "
                    f"{res.returncode}): {res.stderr.strip() or 'no message'}",
                    f"key-based root login from this machine: `ssh-copy-id "
                    f"{self.target[name]}`, then `ssh {self.target[name]} true` must work "
                    f"without a prompt")

    def remove(self) -> int:
        return 0
