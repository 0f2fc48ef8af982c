"""Applying the fault timeline to the running fabric, at its times, and recording what was done.

Where each condition lives:
- down, blackhole: every packet leaving either end of the link is dropped (nftables, at the
  postrouting hook of both nodes). The interfaces stay configured, so `link_up` restores
  exactly the plan. MRC's paths are static and see nothing; see the note below for RoCEv2.
- loss: random drop with the given probability (nftables `numgen random`, in 1/10,000 steps)
  at the egress of the lower end ("up", toward the spine), the upper end ("down"), or both;
- degrade: the port's htb line class at a lower rate, on both ends (and the eBPF virtual
  queue of a router port drains at that rate too);
- delay: netem in place of the data FIFO, where the kernel has netem (checked before the run).
All nftables rules of a node live in one table, `inet mrc_faults`, rewritten whole at every
change, so a node never holds a half-applied state. The namespaces, and the rules with them,
vanish at teardown.

- routed: the baseline's routing has converged around the link (the "down" condition's echo,
  a convergence delay later): every node's plain routes are recomputed without next hops that
  cross a routed-around link (testbed/fabric/routes.py) and changed over netlink where they differ.
  The uSID routes are never touched: MRC's paths are static, as with BGP off.
"""
from __future__ import annotations

import subprocess
import threading
import time
from dataclasses import dataclass, field

from testbed.emulation.network import FabricNetwork
from testbed.fabric.plan import Link, Port
from testbed.fabric.routes import node_config
from testbed.fabric.timeline import Action
from testbed.kernel import shaping
from testbed.kernel.rtnl import RTPROT_BGP, NodeNetlink
from testbed.scenario.faults import Fault

TABLE = "mrc_faults"
NFT_TIMEOUT = 10.0  # s for one nft call (a few ms normally): a stuck one must not stall the run


def _plain(cfg) -> dict:
    return {r.dst: r for r in cfg.routes if r.kind == "plain"}


@dataclass
class _PortState:
    drop: set[int] = field(default_factory=set)  # events dropping everything here
    loss: dict[int, float] = field(default_factory=dict)  # event -> probability


class Injector:
    def __init__(self, network: FabricNetwork, faults: list[Fault], actions: list[Action]) -> None:
        self.network = network
        self.faults = faults
        self.actions = actions
        self.links: dict[str, Link] = {link.name: link for link in network.plan.links}
        self.ports: dict[tuple[str, str], _PortState] = {}
        self.rows: list[dict] = []
        self.error: str | None = None
        self._handles: dict[str, NodeNetlink] = {}  # netlink sockets of the injector's thread
        self.routed_around: set[str] = set()
        self._plain = {name: _plain(node_config(network.plan, name))
                       for name in network.plan.nodes}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ---- the timeline ----
    def start(self, t0: float) -> None:
        """Apply every action at t0 + its time (wall clock), in a thread."""
        self._thread = threading.Thread(target=self._run, args=(t0,), name="faults",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self, t0: float) -> None:
        try:
            for k, action in enumerate(self.actions):
                if self._stop.wait(max(0.0, t0 + action.time - time.time())):
                    for late in self.actions[k:]:
                        self._record(late, t0, None, "not applied: the workload had ended")
                    return
                try:
                    self.apply(action)
                    self._record(action, t0, time.time(), None)
                except Exception as exc:  # noqa: BLE001 (recorded; the run reports it)
                    self.error = f"faults.{action.event} at {action.time:g} s: {exc}"
                    self._record(action, t0, time.time(), self.error)
        finally:
            for handle in self._handles.values():
                handle.close()

    def _netlink(self, node: str) -> NodeNetlink:
        if node not in self._handles:
            self._handles[node] = NodeNetlink(self.network.pid(node),
                                              self.network.ifindex.get(node))
        return self._handles[node]

    def _record(self, a: Action, t0: float, applied: float | None, note: str | None) -> None:
        fault = self.faults[a.event]
        self.rows.append({
            "event": a.event, "kind": fault.kind, "target": fault.target.label(),
            "condition": a.condition, "on": a.on, "links": list(a.links),
            "scheduled": t0 + a.time, "applied": applied,
            "lag": None if applied is None else applied - (t0 + a.time),
            "params": dict(a.params), "note": note})

    # ---- one action ----
    def apply(self, action: Action) -> None:
        nodes: set[str] = set()
        for name in action.links:
            link = self.links[name]
            if action.condition in ("down", "blackhole"):
                for port in (link.lower, link.upper):
                    state = self._state(port.node, port.ifname)
                    (state.drop.add if action.on else state.drop.discard)(action.event)
                    nodes.add(port.node)
            elif action.condition == "loss":
                params = dict(action.params)
                direction = params.get("direction", "both")
                ends = {"up": [link.lower], "down": [link.upper]}.get(direction,
                                                                     [link.lower, link.upper])
                for port in ends:
                    state = self._state(port.node, port.ifname)
                    if action.on:
                        state.loss[action.event] = float(params["probability"])
                    else:
                        state.loss.pop(action.event, None)
                    nodes.add(port.node)
            elif action.condition == "degrade":
                params = dict(action.params)
                rate = params.get("rate") or int(link.rate * params["fraction"])
                for port in (link.lower, link.upper):
                    self._set_rate(port, link, rate if action.on else link.rate)
            elif action.condition == "routed":
                (self.routed_around.add if action.on else self.routed_around.discard)(name)
            elif action.condition == "delay":
                for port in (link.lower, link.upper):
                    self._set_delay(port, link,
                                    dict(action.params)["delay"] if action.on else None)
        for node in nodes:
            self._render(node)
        if action.condition == "routed":
            self._converge()

    def _converge(self) -> None:
        """Plain routes as BGP leaves them with the routed-around links gone."""
        failed = frozenset(self.routed_around)
        for name, current in self._plain.items():
            wanted = _plain(node_config(self.network.plan, name, failed))
            if wanted == current:
                continue
            handle = self._netlink(name)
            for prefix in current.keys() - wanted.keys():
                handle.ipr.route("del", dst=str(prefix))
            for prefix, route in wanted.items():
                if current.get(prefix) != route:
                    hops = [{"gateway": str(h.gateway), "oif": handle.ifindex(h.ifname)}
                            for h in route.nexthops]
                    extra = hops[0] if len(hops) == 1 else {"multipath": hops}
                    handle.ipr.route("replace", dst=str(prefix), proto=RTPROT_BGP, **extra)
            self._plain[name] = wanted

    def _state(self, node: str, ifname: str) -> _PortState:
        return self.ports.setdefault((node, ifname), _PortState())

    def _render(self, node: str) -> None:
        """The node's whole fault table, replaced atomically."""
        rules = []
        for (n, ifname), state in sorted(self.ports.items()):
            if n != node:
                continue
            if state.drop:
                rules.append(f'oifname "{ifname}" counter drop')
            elif state.loss:
                keep = 1.0
                for p in state.loss.values():
                    keep *= 1 - p
                threshold = round((1 - keep) * 10_000)
                rules.append(f'oifname "{ifname}" numgen random mod 10000 < {threshold} '
                             f'counter drop')
        script = (f"table inet {TABLE}\ndelete table inet {TABLE}\n"
                  f"table inet {TABLE} {{\n chain egress {{\n"
                  f"  type filter hook postrouting priority 0; policy accept;\n"
                  + "".join(f"  {r}\n" for r in rules) + " }\n}\n")
        try:
            res = subprocess.run(["mnexec", "-a", str(self.network.pid(node)), "nft", "-f", "-"],
                                 input=script, capture_output=True, text=True,
                                 timeout=NFT_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"nft in {node}: no answer after {NFT_TIMEOUT:g} s") from None
        if res.returncode != 0:
            raise RuntimeError(f"nft in {node}: {res.stderr.strip()}")

    def _set_rate(self, port: Port, link: Link, rate: int) -> None:
        """The shaper's rate, and the rate the port's eBPF virtual queue drains at."""
        handle = self._netlink(port.node)
        shaping.set_port_rate(handle.ipr, handle.ifindex(port.ifname), rate,
                              self.network.plan.scenario.fabric.mtu)
        self.network.set_queue_rate(port, link, rate)

    def _set_delay(self, port: Port, link: Link, delay: float | None) -> None:
        handle = self._netlink(port.node)
        index = handle.ifindex(port.ifname)
        limit = self.network.fifo_limit(port, link)
        if delay is None:
            handle.ipr.tc("replace", "bfifo", index=index, handle="10:", parent="1:10",
                          limit=limit)
        else:
            packets = max(1, limit // self.network.plan.scenario.fabric.mtu)
            handle.ipr.tc("replace", "netem", index=index, handle="10:", parent="1:10",
                          delay=int(delay * 1e6), limit=packets)
