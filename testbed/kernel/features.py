"""What this machine can do, checked before anything is built.

The probes use the same code paths as the build (netlink from this process, in a throwaway
namespace), so "supported" here means the build will work, not that a config option is set.
"""
from __future__ import annotations

import os
import shutil
import socket
from functools import cache
from ipaddress import IPv6Network
from pathlib import Path

from pyroute2 import IPRoute
from pyroute2.netlink import NETLINK_ROUTE
from pyroute2.netlink.exceptions import NetlinkError

from testbed.errors import EnvironmentProblem
from testbed.kernel import netns, rtnl, seg6local, shaping, usid_end
from testbed.scenario import Scenario


def require_root() -> None:
    if os.geteuid() != 0:
        raise EnvironmentProblem("mrc-testbed needs root to create network namespaces",
                                 "run it with sudo, e.g. `sudo .venv/bin/mrc-testbed run`")


def require_mininet() -> None:
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        raise EnvironmentProblem(
            "Mininet's Python module is not importable from this Python",
            "run `sudo make install` (Debian package mininet, venv with --system-site-packages)"
        ) from None
    if shutil.which("mnexec") is None:
        raise EnvironmentProblem("mnexec (from the mininet package) is not on PATH",
                                 "run `sudo make install`")


HASH_SEED_SYSCTL = Path("/proc/sys/net/ipv4/fib_multipath_hash_seed")


@cache
def hash_seed_settable() -> bool:
    """Whether routers' ECMP hash can be seeded (net.ipv4.fib_multipath_hash_seed, which serves
    IPv6 too: Linux 6.11 and later). Older kernels hash with a key drawn at boot."""
    return HASH_SEED_SYSCTL.exists()


def probe_kernel() -> dict[str, bool | str]:
    """Feature name -> True, or the reason it is missing. Runs in a fresh namespace."""
    found: dict[str, bool | str] = {}
    with netns.fresh():
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_ROUTE)
    with IPRoute(fileno=sock.detach()) as ipr:
        lo = ipr.link_lookup(ifname="lo")[0]
        ipr.link("set", index=lo, state="up")
        try:
            sid_dev = rtnl.add_sid_device(ipr)
        except NetlinkError as exc:
            raise EnvironmentProblem(
                f"cannot create the ifb device that holds End SIDs: {exc.args[1]}",
                "load the ifb module (`modprobe ifb`)") from None
        try:
            ipr.nlm_request_batch([seg6local.end_sid_message(
                IPv6Network("fcbb:bbbb:100::/48"), sid_dev, 32, 16)])
            counters = seg6local.dump_end_sids(ipr)
            entry = counters.get(IPv6Network("fcbb:bbbb:100::/48"), {})
            found["srv6_end_next_csid"] = (
                True if entry.get("next_csid")
                else "the kernel accepted seg6local End but dropped the next-csid flavor")
            found["seg6local_counters"] = (
                True if entry.get("packets") is not None
                else "the kernel does not report seg6local counters")
        except NetlinkError as exc:
            found["srv6_end_next_csid"] = f"seg6local End next-csid rejected: {exc.args[1]}"
            found["seg6local_counters"] = "untested"
        for name, fn in (("htb", lambda: shaping.shape_port(ipr, lo, 10**8, 100_000, 1500)),):
            try:
                fn()
                found[name] = True
            except NetlinkError as exc:
                found[name] = f"{exc.args[1]}"
        try:
            ipr.tc("replace", "netem", index=lo, handle="2:",
                   parent="1:10", delay=1000)
            found["netem"] = True
        except NetlinkError as exc:
            found["netem"] = f"sch_netem missing ({exc.args[1]})"
    found["ecmp_hash_seed"] = (
        True if hash_seed_settable() else
        "no net.ipv4.fib_multipath_hash_seed (Linux < 6.11): routers hash with the kernel's "
        "boot-time key, so which spine a RoCEv2 QP takes changes with the seed but not "
        "identically after a reboot")
    return found


@cache
def end_sid_mode() -> str:
    """How routers execute their End SIDs on this machine: "seg6local" (the kernel's SRv6,
    preferred) or "ebpf" (testbed/kernel/usid_end.py, on a kernel without seg6local). Probed
    once per process: every process that builds nodes asks for its own machine."""
    found = probe_kernel()
    if found["srv6_end_next_csid"] is True and found["seg6local_counters"] is True:
        return "seg6local"
    usid_end.EbpfEndSids().close()  # loads on this kernel, or a clear error
    return "ebpf"


def require_fabric_features() -> dict[str, bool | str]:
    found = probe_kernel()
    if found.get("htb") is not True:
        raise EnvironmentProblem(f"this kernel cannot run the fabric: htb: {found['htb']}",
                                 "use the sch_htb module (`modprobe sch_htb`)")
    found["end_sids"] = end_sid_mode()
    return found


def require_netem(found: dict[str, bool | str], scenario: Scenario) -> None:
    """What a scenario that uses netem needs of this kernel: sch_netem for its delay faults
    (shaping.set_port_delay) and for `fabric.latency_by: netem` (testbed/kernel/link_delay.py),
    which also needs End SIDs as seg6local routes, since the eBPF End SIDs would run at the
    ports' ingress, where the delay takes every packet away first."""
    delays = [i for i, f in enumerate(scenario.faults) if f.kind == "delay"]
    by_links = scenario.fabric.latency_by == "netem"
    if (delays or by_links) and found.get("netem") is not True:
        what = (f"faults.{delays[0]} adds delay" if delays
                else "fabric.latency_by: netem delays every link")
        instead = ("remove the delay faults" if delays
                   else "latency_by: agents (the default: the agents hold each datagram instead)")
        raise EnvironmentProblem(
            f"{what}, which needs sch_netem: {found.get('netem')}",
            f"use a kernel with netem (stock Debian/Ubuntu kernels, e.g. the Vagrant VM), or "
            f"{instead}")
    if by_links and found.get("end_sids") != "seg6local":
        raise EnvironmentProblem(
            "fabric.latency_by: netem needs the kernel's seg6local End SIDs: on this kernel "
            "they run in eBPF at the ports' ingress, where the links' delay takes the packets",
            "use a kernel with seg6local and the next-csid flavor (Linux 6.1 and later), or "
            "latency_by: agents")
