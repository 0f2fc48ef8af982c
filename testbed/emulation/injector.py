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

Timing: every node's ruleset after every action is rendered when the injector is made, and
`prepare` starts one thread per node inside its namespace (nft_workers.py). At `start`, each
node's thread gets its rulesets with their times and applies them itself, so all the links of
one action change within a few ms of each other and of the scheduled time, whatever their
number. Each action's row in events.parquet says when it was scheduled, when its last node
was done (`applied`, `lag`) and the `spread` from its first node to its last.

Overlapping faults (timeline.py): a port drops everything while any fault holds it down or
blackholed; losses of different faults combine as independent drops; routing goes around a
link while any of its down-conditions has converged.

- routed: the baseline's routing has converged around the link (the "down" condition's echo,
  a convergence delay later): every node's plain routes are recomputed without next hops that
  cross a routed-around link (testbed/fabric/routes.py) and changed over netlink where they differ.
  The uSID routes are never touched: MRC's paths are static, as with BGP off.
"""
from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field

from testbed.emulation.network_api import Network, NftWorker
from testbed.emulation.nft_workers import Pending
from testbed.errors import EnvironmentProblem
from testbed.fabric.plan import Link, Port
from testbed.fabric.routes import node_config
from testbed.fabric.timeline import Action
from testbed.scenario.faults import Fault

TABLE = "mrc_faults"
NFT_CONDITIONS = ("down", "blackhole", "loss")  # the conditions nftables rules carry
# made once in every node the timeline touches, before the workload: an empty egress chain
SETUP = (f"table inet {TABLE}\ndelete table inet {TABLE}\ntable inet {TABLE} {{\n"
         f" chain egress {{\n  type filter hook postrouting priority 0; policy accept;\n }}\n}}\n")


def _plain(cfg) -> dict:
    return {r.dst: r for r in cfg.routes if r.kind == "plain"}


def _number(action: Action, key: str) -> float:
    """A numeric parameter of an action; the timeline keeps parameters untyped, so the type
    is checked here, where the number is used."""
    value = dict(action.params)[key]
    if not isinstance(value, (int, float)):
        raise TypeError(f"faults.{action.event}: {key} is {value!r}, not a number")
    return value


@dataclass
class _PortState:
    drop: set[int] = field(default_factory=set)  # faults dropping everything here
    loss: dict[int, float] = field(default_factory=dict)  # fault -> probability


class NftRules:
    """What every port's nftables rules say, as actions are applied (pure): `update` returns
    the nodes whose ruleset changed, `script` renders a node's whole table."""

    def __init__(self, links: dict[str, Link]) -> None:
        self.links = links
        self.ports: dict[tuple[str, str], _PortState] = {}

    def update(self, action: Action) -> set[str]:
        nodes: set[str] = set()
        if action.condition not in NFT_CONDITIONS:
            return nodes
        holder = action.held_by
        for name in action.links:
            link = self.links[name]
            if action.condition in ("down", "blackhole"):
                ends = [link.lower, link.upper]
            else:
                direction = str(dict(action.params).get("direction", "both"))
                ends = {"up": [link.lower], "down": [link.upper]}.get(direction,
                                                                     [link.lower, link.upper])
            for port in ends:
                state = self.ports.setdefault((port.node, port.ifname), _PortState())
                if action.condition == "loss":
                    if action.on:
                        state.loss[holder] = _number(action, "probability")
                    else:
                        state.loss.pop(holder, None)
                else:
                    (state.drop.add if action.on else state.drop.discard)(holder)
                nodes.add(port.node)
        return nodes

    def script(self, node: str) -> str:
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
        # the chain was made by SETUP; flushing and refilling it in one transaction leaves its
        # hook registered (re-registering one waits for an RCU grace period: milliseconds)
        return f"flush chain inet {TABLE} egress\n" + "".join(
            f"add rule inet {TABLE} egress {r}\n" for r in rules)


def prepared(links: dict[str, Link], actions: list[Action]) -> list[dict[str, str]]:
    """Per action, the ruleset of every node it changes, as it stands after the action."""
    rules = NftRules(links)
    return [{node: rules.script(node) for node in sorted(rules.update(a))} for a in actions]


def _fan_out(pendings: list[Pending]):
    """One node's transaction reported to every action it carries."""
    def report(started: float | None, finished: float | None, error: str | None) -> None:
        for p in pendings:
            p.report(started, finished, error)
    return report


class Injector:
    def __init__(self, network: Network, faults: list[Fault], actions: list[Action]) -> None:
        self.network = network
        self.faults = faults
        self.actions = actions
        self.links: dict[str, Link] = {link.name: link for link in network.plan.links}
        self.rules = NftRules(self.links)  # as applied by `apply` (tests, by hand)
        self.scripts = prepared(self.links, actions)  # the timeline's, rendered ahead
        self._workers: dict[str, NftWorker] = {}
        self._pending: list[Pending | None] = [None] * len(actions)
        self.rows: list[dict] = []
        self.error: str | None = None
        self.routed_around: dict[str, set[int]] = {}  # link -> faults routing went around
        self._plain = {name: _plain(node_config(network.plan, name))
                       for name in network.plan.nodes}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._switch: float | None = None

    # ---- the timeline ----
    def prepare(self) -> None:
        """Start the nftables thread of every node the timeline touches (each enters its
        node's namespace and makes its context), before the workload starts."""
        for scripts in self.scripts:
            for node in scripts:
                self._worker(node)
        for worker in self._workers.values():
            try:
                worker.ready()
            except RuntimeError as exc:
                raise EnvironmentProblem(
                    f"the fault injector could not start: {exc}",
                    "install nftables (its libnftables.so.1; scripts/install.sh does)") from None

    def start(self, t0: float) -> None:
        """Apply every action at t0 + its time (wall clock): nftables changes by each node's
        thread, the others (rates, routes, delay) by a thread of the injector."""
        self.prepare()
        # a woken node thread waits for the GIL up to the switch interval (5 ms by default)
        # while another of the runner's threads (telemetry) runs Python: 0.5 ms while faults run
        self._switch = sys.getswitchinterval()
        sys.setswitchinterval(0.0005)
        # per node, its changes in time order; changes due at one instant are one
        # transaction (the ruleset after the last of them), reported to each of their actions
        jobs: dict[str, list[tuple[float, str, list[Pending]]]] = {}
        for k, (action, scripts) in enumerate(zip(self.actions, self.scripts, strict=True)):
            if scripts:
                pending = self._pending[k] = Pending(len(scripts))
                for node, script in scripts.items():
                    queue = jobs.setdefault(node, [])
                    if queue and queue[-1][0] == action.time:
                        queue[-1] = (action.time, script, [*queue[-1][2], pending])
                    else:
                        queue.append((action.time, script, [pending]))
        for node, queue in jobs.items():
            for at, script, pendings in queue:
                self._workers[node].submit(t0 + at, script, _fan_out(pendings))
        self._thread = threading.Thread(target=self._run, args=(t0,), name="faults",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._switch is not None:
            sys.setswitchinterval(self._switch)
            self._switch = None
        for worker in self._workers.values():
            worker.close()
        self._workers.clear()

    def _run(self, t0: float) -> None:
        for k, action in enumerate(self.actions):
            if self._stop.wait(max(0.0, t0 + action.time - time.time())):
                for late in range(k, len(self.actions)):
                    self._finish(late, t0, None, stopped=True)
                return
            netlink = (self._apply_other(action)
                       if action.condition not in NFT_CONDITIONS else None)
            self._finish(k, t0, netlink, stopped=False)

    def _finish(self, k: int, t0: float, applied: tuple[float, float, str | None] | None,
                stopped: bool) -> None:
        """Record action k once all of its parts are done (or known not to happen): its
        netlink part (`applied`: start, end, error) and its nodes' nftables changes."""
        action, pending = self.actions[k], self._pending[k]
        times: list[float] = []
        starts: list[float] = []
        errors: list[str] = []
        if applied is not None:
            starts.append(applied[0])
            times.append(applied[1])
            errors += [applied[2]] if applied[2] else []
        if pending is not None:
            pending.wait(10.0 if stopped else None)
            starts += pending.started
            times += pending.finished
            errors += pending.errors
        if errors:
            self.error = f"faults.{action.event} at {action.time:g} s: {'; '.join(errors)}"
        if not times:
            self._record(action, t0, None, None, "not applied: the workload had ended")
        else:
            self._record(action, t0, max(times), max(times) - min(starts), self.error
                         if errors else None)

    def _apply_other(self, action: Action) -> tuple[float, float, str | None]:
        """Apply the part of an action that is not nftables' (at once): (start, end, error)."""
        started = time.time()
        try:
            self._apply_netlink(action)
            return started, time.time(), None
        except Exception as exc:  # noqa: BLE001 (recorded; the run reports it)
            return started, time.time(), str(exc)

    def _worker(self, node: str) -> NftWorker:
        if node not in self._workers:
            self._workers[node] = self.network.nft_worker(node, self._stop, SETUP)
        return self._workers[node]

    def _record(self, a: Action, t0: float, applied: float | None, spread: float | None,
                note: str | None) -> None:
        fault = self.faults[a.event]
        self.rows.append({
            "event": a.event, "kind": fault.kind, "target": fault.target.label(),
            "condition": a.condition, "on": a.on, "links": list(a.links),
            "scheduled": t0 + a.time, "applied": applied,
            "lag": None if applied is None else applied - (t0 + a.time), "spread": spread,
            "holder": a.held_by,
            "params": dict(a.params), "note": note})

    # ---- one action ----
    def apply(self, action: Action) -> None:
        """Apply one action now (tests, by hand): every node's nftables change in parallel,
        then what netlink does."""
        nodes = self.rules.update(action)
        pending = Pending(len(nodes))
        for node in nodes:
            self._worker(node).submit(None, self.rules.script(node), pending.report)
        pending.wait(30)
        if pending.errors:
            raise RuntimeError("; ".join(pending.errors))
        self._apply_netlink(action)

    def _apply_netlink(self, action: Action) -> None:
        """The conditions not carried by nftables: rates, delay, routing."""
        for name in action.links:
            link = self.links[name]
            if action.condition == "degrade":
                rate = (int(_number(action, "rate")) if dict(action.params).get("rate")
                        else int(link.rate * _number(action, "fraction")))
                for port in (link.lower, link.upper):
                    self._set_rate(port, link, rate if action.on else link.rate)
            elif action.condition == "routed":
                holders = self.routed_around.setdefault(name, set())
                (holders.add if action.on else holders.discard)(action.held_by)
            elif action.condition == "delay":
                for port in (link.lower, link.upper):
                    self._set_delay(port, link,
                                    _number(action, "delay") if action.on else None)
        if action.condition == "routed":
            self._converge()

    def _converge(self) -> None:
        """Plain routes as BGP leaves them with the routed-around links gone."""
        failed = frozenset(link for link, holders in self.routed_around.items() if holders)
        for name, current in self._plain.items():
            wanted = _plain(node_config(self.network.plan, name, failed))
            if wanted == current:
                continue
            self.network.set_routes(
                name, [str(p) for p in current.keys() - wanted.keys()],
                [(str(p), [(str(h.gateway), h.ifname) for h in r.nexthops])
                 for p, r in wanted.items() if current.get(p) != r])
            self._plain[name] = wanted

    def _set_rate(self, port: Port, link: Link, rate: int) -> None:
        self.network.set_port_rate(port, link, rate)

    def _set_delay(self, port: Port, link: Link, delay: float | None) -> None:
        self.network.set_port_delay(port, link, delay)
