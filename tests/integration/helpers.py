"""Helpers for tests that build real fabrics: the CLI as a user runs it, a fabric built in this
process for poking at, and snapshots of what exists on the machine (for leak checks)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from testbed import scenario as scenario_mod
from testbed.emulation.network import FabricNetwork
from testbed.fabric.plan import make_plan
from testbed.lifecycle.progress import Progress
from testbed.lifecycle.registry import LOCK_NAME, STATE_DIR, RunRegistry

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "testbed.cli"]


def mininet_processes() -> set[int]:
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b"mininet:" in cmdline:
                out.add(int(entry.name))
    return out


def net_namespaces() -> set[int]:
    """Every network namespace held by a process (named or not)."""
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                out.add(os.stat(entry / "ns" / "net").st_ino)
            except OSError:
                pass
    return out


def root_links() -> set[str]:
    res = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True)
    return {line.split(":")[1].strip().split("@")[0] for line in res.stdout.splitlines()}


def registry_entries() -> set[str]:
    """Run records and the folders runs keep beside them (emulated servers' keys); the run
    lock's file is not one: it stays, empty of holders, once any run has taken the lock."""
    if not STATE_DIR.is_dir():
        return set()
    return {p.name for p in STATE_DIR.iterdir()} - {LOCK_NAME}


def named_namespaces() -> set[str]:
    """Named namespaces (/run/netns): an emulated server's survives without any process."""
    path = Path("/run/netns")
    return {p.name for p in path.iterdir()} if path.is_dir() else set()


def sshd_processes() -> set[int]:
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "sshd":
                    out.add(int(entry.name))
            except OSError:
                continue
    return out


def snapshot() -> dict[str, set]:
    return {"mininet processes": mininet_processes(), "namespaces": net_namespaces(),
            "root-namespace links": root_links(), "registry entries": registry_entries(),
            "named namespaces": named_namespaces(), "sshd processes": sshd_processes(),
            "server agents": server_agents()}


def server_agents() -> set:
    """Server agents' processes and their logs on the (emulated) servers."""
    procs = set()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"testbed.cluster.server_agent" in cmd:
                procs.add(f"pid {proc.name}")
    return procs | {str(p) for p in STATE_DIR.glob("*.agents/*")}


def leftovers(before: dict[str, set], wait: float = 5.0) -> dict[str, set]:
    """What is there now and was not before; waits a little for the kernel's async cleanup."""
    deadline = time.monotonic() + wait
    while True:
        now = snapshot()
        extra = {k: now[k] - before[k] for k in now if now[k] - before[k]}
        if not extra or time.monotonic() > deadline:
            return extra
        time.sleep(0.1)


def build(text: str, tmp_path: Path) -> FabricNetwork:
    """A fabric built in this process (for tests that inspect or break it); close() it."""
    sc = scenario_mod.parse(text, "test")
    plan = make_plan(sc)
    registry = RunRegistry(f"test-{os.getpid()}-{time.monotonic_ns()}", tmp_path, sc.name)
    network = FabricNetwork(plan, registry, Progress(quiet=True))
    try:
        network.add_nodes()
        network.add_links()
        network.configure()
    except BaseException:
        network.close()
        raise
    return network


def run_cli(*args: str, timeout: float = 120, results: Path | None = None,
            **kwargs) -> subprocess.CompletedProcess:
    cmd = list(CLI) + list(args)
    if results is not None and args and args[0] in ("run", "list"):
        cmd += ["--results", str(results)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          **kwargs)


def iperf3_tcp_mbps(network: FabricNetwork, src: str, dst: str, dst_address: str,
                    seconds: float = 2.0) -> float:
    """Goodput of one TCP flow between two hosts of a built fabric, received side."""
    import json

    server = network.node(dst).popen(["iperf3", "-s", "-1", "-B", dst_address])
    try:
        time.sleep(0.4)
        out = network.node(src).cmd(f"iperf3 -J -t {seconds:g} -c {dst_address}")
    finally:
        server.wait(15)
    return json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e6


def run_scenario(text: str, tmp_path: Path, results: Path, *args: str) -> Path:
    """Write `text` as a scenario, `mrc-testbed run --no-report` it as a user would (with
    `args`; reports have a test of their own), insist
    it succeeded and made one results folder per transport; the folders, sorted."""
    file = tmp_path / "scenario.yaml"
    file.write_text(text)
    res = run_cli("run", str(file), "--no-report", *args, results=results, timeout=300)
    assert res.returncode == 0, res.stderr
    return sorted(results.iterdir())
