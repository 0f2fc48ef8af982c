"""A testbed scenario as uet-htsim's inputs: the workload as flows chained by triggers, written
as htsim's connection matrix, and the fabric as htsim's topology (command-line options for its
automatic fat tree, or a topology file), so that both simulate the same fabric and flows.

Pure: no process, no file. The bench (bench/htsim.py) writes these and runs htsim.

The frame. htsim's topology file takes whole Gbit/s and at least 1 ns per link, and its
constants (DCQCN's timers, RoCE's minimum RTO) are absolute microseconds meant for real
fabrics; the testbed's small fabrics run at Mbit/s with millisecond queues. So htsim runs the
scenario time-dilated, as `fabric.real_rate` reads it: every rate times D and every time over D
(buffers, MTU and sizes unchanged), which leaves every ratio to the ideal the same. D is the
scenario's own (real_rate over the host link's rate) or DILATION. A scenario in the real frame
(`fabric.real_rate`) thus runs in htsim natively: its real rate, its real hop latency.

Faults: htsim has none during a run, only `-failed N`, which builds spines 0..N-1's links to
every leaf at FAILED_FRACTION of their rate from the start; a scenario's faults are accepted
when they say exactly that (`failed_spines`).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from hostagent.protocol.wire import HEADER_SIZE
from hostagent.workloads.collectives import block_bounds
from hostagent.workloads.flows import Pattern, pairs_of
from testbed.scenario.schema import Scenario

DILATION = 1000  # Mbit/s in the scenario read as Gbit/s in htsim
IP_UDP = 40 + 8  # IPv6 and UDP headers: htsim's packet is the testbed's IP packet
RING_KINDS = ("all_reduce", "all_gather", "reduce_scatter")
FAILED_FRACTION = 0.25  # htsim's FatTreeTopologyCfg::_failed_link_ratio


class HtsimError(ValueError):
    """A scenario htsim cannot simulate as written (the message says what to change)."""


@dataclass(frozen=True)
class Flow:
    """One transfer: `size` bytes from node `src` to node `dst`, starting at time 0 or, with
    `after`, when the sender of flow `after` has every byte acknowledged (htsim's
    send_done_trigger: the only completion trigger both htsim_uec and htsim_roce honour)."""

    id: int  # from 1: htsim refuses flow id 0
    src: int
    dst: int
    size: int
    after: int | None = None


def ring(kind: str, nodes: list[int], size: int) -> list[Flow]:
    """A ring collective of `size` bytes over `nodes` (rank order) as the testbed runs it
    (hostagent/workloads/collectives.py): at step s rank r writes one block to rank r+1, and it
    starts step s+1 when rank r-1's step-s write has arrived. Reduce-scatter is W-1 steps,
    all-gather W-1, all-reduce both (2(W-1)); blocks are np.array_split's of the float32s."""
    if kind not in RING_KINDS:
        raise HtsimError(f"{kind}: a ring is one of {', '.join(RING_KINDS)}")
    world = len(nodes)
    steps = {"all_reduce": 2, "all_gather": 1, "reduce_scatter": 1}[kind] * (world - 1)
    bounds = block_bounds(size // 4, world)

    def block(rank: int, step: int) -> int:
        """Bytes rank `rank` sends at `step`: reduce-scatter's block rank-s-1, then
        all-gather's block rank-s (s counted from the all-gather's first step)."""
        gather = kind == "all_gather" or step >= world - 1
        s = step - (world - 1) if kind == "all_reduce" and gather else step
        b = (rank - s) % world if gather else (rank - s - 1) % world
        return 4 * (bounds[b + 1] - bounds[b])

    flows: list[Flow] = []
    for step in range(steps):
        for rank in range(world):
            prev = None if step == 0 else (step - 1) * world + (rank - 1) % world + 1
            flows.append(Flow(step * world + rank + 1, nodes[rank], nodes[(rank + 1) % world],
                              block(rank, step), prev))
    return flows


def all_to_all(nodes: list[int], size: int) -> list[Flow]:
    """Every rank writes its block p to rank p, all at once (the testbed's all-to-all)."""
    bounds = block_bounds(size // 4, len(nodes))
    pairs = [(s, d) for s in range(len(nodes)) for d in range(len(nodes)) if s != d]
    return [Flow(i + 1, nodes[s], nodes[d], 4 * (bounds[d + 1] - bounds[d]))
            for i, (s, d) in enumerate(pairs)]


def write_flows(pattern: Pattern, nodes: list[int], message: int, messages: int) -> list[Flow]:
    """A flows workload (hostagent/workloads/flows.py) over `nodes` (rank order): each flow's
    `messages` writes of `message` bytes, one after another, each starting when the one
    before it is acknowledged. The testbed's next write waits for its receiver's
    clear-to-send, sent when the write before it arrived: the same one return later."""
    flows: list[Flow] = []
    for src, dst in pairs_of(pattern, len(nodes)):
        for k in range(messages):
            flows.append(Flow(len(flows) + 1, nodes[src], nodes[dst], message,
                              None if k == 0 else len(flows)))
    return flows


def matrix(nodes: int, flows: list[Flow]) -> str:
    """htsim's connection matrix: `Nodes`, `Connections`, `Triggers`, a line per flow
    (`src->dst id I start 0 size B` or `... trigger T ...`, and `send_done_trigger T` on the
    flow whose completion fires T), then a oneshot line per trigger."""
    ids = {f.id for f in flows}
    trigger_of: dict[int, int] = {}  # predecessor flow id -> trigger id
    for f in flows:
        if f.after is not None:
            if f.after not in ids:
                raise HtsimError(f"flow {f.id} waits for flow {f.after}, which is not a flow")
            if f.after in trigger_of:
                raise HtsimError(f"flow {f.after} starts two flows; htsim's send_done_trigger "
                                 f"fires one trigger per flow (give a barrier instead)")
            trigger_of[f.after] = len(trigger_of) + 1
    lines = [f"Nodes {nodes}", f"Connections {len(flows)}", f"Triggers {len(trigger_of)}"]
    for f in flows:
        start = "start 0" if f.after is None else f"trigger {trigger_of[f.after]}"
        done = f" send_done_trigger {trigger_of[f.id]}" if f.id in trigger_of else ""
        lines.append(f"{f.src}->{f.dst} id {f.id} {start} size {f.size}{done}")
    lines += [f"trigger id {t} oneshot" for t in sorted(trigger_of.values())]
    return "\n".join(lines) + "\n"


def arrival_cct_us(flows: list[Flow], ends_us: dict[int, float],
                   return_us: Callable[[Flow], float]) -> float:
    """The collective's completion time (us) had each flow started when its predecessor's
    last byte arrived, as the testbed's ring starts a step, instead of when its sender had
    every byte acknowledged (htsim's send_done_trigger): each flow's end, less its own
    acknowledgement's return and those of every flow before it in its chain. Exact while
    flows that start earlier meet the same queues; an estimate otherwise."""
    by_id = {f.id: f for f in flows}

    def earlier(f: Flow) -> float:
        total = 0.0
        while f.after is not None:
            f = by_id[f.after]
            total += return_us(f)
        return total

    return max(ends_us[f.id] - return_us(f) - earlier(f) for f in flows)


def ideal_cct(flows: list[Flow], rate: float) -> float:
    """Seconds the busiest host link needs for its bytes (sent or received) at `rate` bit/s:
    the collective's completion time with no header, latency or congestion."""
    load: dict[tuple[str, int], int] = {}
    for f in flows:
        load[("tx", f.src)] = load.get(("tx", f.src), 0) + f.size
        load[("rx", f.dst)] = load.get(("rx", f.dst), 0) + f.size
    return max(load.values()) * 8 / rate


@dataclass(frozen=True)
class Inputs:
    """What htsim runs for one scenario: the matrix, the topology (options and, where the
    automatic fat tree cannot build the fabric, a file), each binary's options, and what in
    the scenario htsim models differently (`notes`)."""

    nodes: int
    flows: list[Flow]
    dilation: float
    host_rate: float  # bit/s, the scenario's (the ideal's rate on the testbed side)
    topology_file: str | None
    uec: list[str]
    roce: list[str] | None  # None: htsim_roce cannot build this fabric
    notes: list[str] = field(default_factory=list)
    hop_us: float = 0.0  # one link's latency in htsim's frame
    per_leaf: int = 1  # hosts per leaf: hosts n and m share a leaf when n // per_leaf does
    # the testbed starts a chained flow when its predecessor's last byte arrives (a ring's
    # step), not when it is acknowledged (a write after a clear-to-send)
    at_arrival: bool = True

    def return_us(self, flow: Flow) -> float:
        """Microseconds (htsim's frame) from the last byte reaching a flow's receiver to its
        acknowledgement reaching the sender: the links back (2 on one leaf, else 4) at
        `hop_us` each; htsim has no NIC latency, and an ACK's serialization is under 1% of it
        at these rates."""
        links = 2 if flow.src // self.per_leaf == flow.dst // self.per_leaf else 4
        return links * self.hop_us

    @property
    def matrix(self) -> str:
        return matrix(self.nodes, self.flows)


def failed_spines(sc: Scenario) -> int:
    """N for htsim's `-failed N`: the scenario's faults, which must degrade every leaf's link
    to spines 0..N-1 to FAILED_FRACTION of their rate for the whole run (`at` 0, no
    duration), as htsim builds them. HtsimError for any other fault."""
    f = sc.fabric
    links: set[tuple[int, int]] = set()
    for k, fault in enumerate(sc.faults):
        t = fault.target
        if (fault.kind != "degrade" or t.shape != "link" or fault.fraction != FAILED_FRACTION
                or fault.at != 0 or fault.duration is not None or t.plane != 0):
            raise HtsimError(f"faults.{k}: htsim runs no fault during a run; it takes only "
                             f"degrade of a leaf-spine link, fraction {FAILED_FRACTION:g}, at "
                             f"0, no duration (its -failed)")
        assert t.leaf is not None and t.spine is not None
        links.add((t.leaf, t.spine))
    n = len({s for _, s in links})
    if links != {(leaf, s) for leaf in range(f.leaves_per_plane) for s in range(n)}:
        raise HtsimError(f"degraded links {sorted(links)}: htsim's -failed N degrades every "
                         f"leaf's link to spines 0..N-1; degrade exactly those")
    return n


def workload_flows(sc: Scenario) -> list[Flow]:
    """The scenario's workload (one iteration) as flows between host indexes: its collective
    or its write flows."""
    index = {sc.naming.host_name(i): i for i in range(sc.fabric.host_count)}
    nodes = [index[h] for h in sc.rank_hosts()]
    w = sc.workload
    if w.flows is not None:
        return write_flows(w.flows.pattern, nodes, w.flows.message, w.flows.messages)
    if w.steps:
        raise HtsimError("workload.training / chakra: htsim takes flows; give a collective "
                         "or workload.flows")
    if w.collective == "all_to_all":
        return all_to_all(nodes, w.size)
    return ring(w.collective, nodes, w.size)


def inputs(sc: Scenario, uec_paths: int = 64, lb: str = "bitmap",
           dcqcn: bool = False) -> Inputs:
    """htsim's inputs for `sc` (one plane, 2 tiers, leaves filled); HtsimError otherwise.
    htsim_roce runs with PFC (its default queues); `dcqcn` adds DCQCN marking at the ECN
    threshold, off by default: at the measured commit it stalls flows that PFC alone
    completes (docs/performance/htsim.md)."""
    f = sc.fabric
    if f.planes != 1:
        raise HtsimError(f"{f.planes} planes: htsim's fat tree has one plane (planes > 1 "
                         f"aborts it); set fabric.planes: 1")
    if f.host_count != f.leaves_per_plane * f.hosts_per_leaf:
        raise HtsimError("htsim fills every leaf: set hosts to leaves_per_plane x hosts_per_leaf")
    if sc.background:
        raise HtsimError("background flows: htsim runs none beside the flows it is given")
    if sc.jobs:
        raise HtsimError("jobs: htsim runs one workload; give it as workload")
    failed = failed_spines(sc)
    host, fab = f.host_link, f.fabric_link
    if host.buffer != fab.buffer:
        raise HtsimError("htsim gives every switch queue one size: make host_link.buffer "
                         "equal fabric_link.buffer")
    d = (f.real_rate / host.rate) if f.real_rate is not None else DILATION
    hop_us = f.hop_latency * 1e6 / (1 if f.real_rate is not None else d)
    packet = sc.qp.mss + IP_UDP + HEADER_SIZE
    queue = fab.buffer // packet
    ecn = fab.ecn()
    low, high = round(ecn.kmin / packet), min(round(ecn.kmax / packet), queue)
    frame = (f"the real one, {host.rate * d / 1e9:g} Gbit/s and {hop_us:g} us hops"
             if f.real_rate is not None else f"rates x {d:g}, times / {d:g}")
    notes = [f"htsim frame: {frame}; {packet} B packets, {queue}-packet queues"]
    if ecn.kmin != ecn.kmax and ecn.pmax != 1:
        notes.append(f"ECN: the testbed's RED rises to {ecn.pmax:g} at K_max, htsim's from "
                     f"{low} to {high} packets to 1")
    if f.nic_latency:
        notes.append("fabric.nic_latency: htsim models none")
    if sc.switch.trimming and fab.trim() < fab.buffer:
        notes.append(f"trimming: the testbed's above {fab.trim()} B, htsim's when the "
                     f"{queue}-packet queue is full")
    if failed:
        notes.append(f"-failed {failed}: htsim also scales those links' queues and ECN "
                     f"thresholds by {FAILED_FRACTION:g}; the testbed keeps their bytes")
    flows = workload_flows(sc)
    common = ["-mtu", str(packet), "-linkspeed", f"{host.rate * d / 1e6:g}", "-q", str(queue),
              "-nodes", str(f.host_count), *(["-failed", str(failed)] if failed else [])]
    k = f.leaves_per_plane
    auto = (host.rate == fab.rate and k % 2 == 0 and f.spines_per_plane == k // 2
            and f.hosts_per_leaf == k // 2)
    topo_file = None
    if auto:
        shape = ["-tiers", "2", "-hop_latency", f"{hop_us:g}"]
    else:
        topo_file = topology_file(sc, d, hop_us)
        shape = []
        notes.append("htsim_roce builds only its automatic fat tree (leaves = 2 x spines = "
                      "2 x hosts per leaf); this fabric runs on htsim_uec alone")
    uec = [*common, *shape, "-sender_cc_only", "-load_balancing_algo", lb,
           "-paths", str(uec_paths), "-ecn", str(low), str(high),
           "-trimsize", str(IP_UDP + HEADER_SIZE)]
    roce = ([*common, *shape, "-strat", "ecmp_host", "-paths", "1",
             *(["-dcqcn", str(low)] if dcqcn else [])] if auto else None)
    return Inputs(f.host_count, flows, d, host.rate, topo_file, uec, roce, notes, hop_us,
                  f.hosts_per_leaf, sc.workload.flows is None)


def topology_file(sc: Scenario, dilation: float, hop_us: float) -> str:
    """htsim's topology file for a 2-tier fabric its automatic fat tree cannot build: tier 0
    (leaves) down to the hosts, tier 1 (spines) down to the leaves, one pod of every host."""
    f = sc.fabric
    s0, s1 = (round(c.rate * dilation / 1e9, 6) for c in (f.host_link, f.fabric_link))
    if s0 != int(s0) or s1 != int(s1):
        raise HtsimError(f"htsim's topology file takes whole Gbit/s: the rates x {dilation:g} "
                         f"are {s0:g} and {s1:g}; use rates that are whole Mbit/s")
    over, rest = divmod(f.hosts_per_leaf * int(s0), f.spines_per_plane * int(s1))
    if rest or over < 1 or f.hosts_per_leaf // f.spines_per_plane != over:
        raise HtsimError(f"{f.hosts_per_leaf} hosts and {f.spines_per_plane} spines per leaf: "
                         f"htsim's fat tree needs hosts per leaf = spines x its oversubscription")
    ns = max(1, round(hop_us * 1000))  # htsim refuses 0 ns in a file
    return "\n".join([
        f"Nodes {f.host_count}", "Tiers 2", f"Podsize {f.host_count}", "",
        "Tier 0", f"Downlink_speed_Gbps {int(s0)}", f"Radix_Down {f.hosts_per_leaf}",
        f"Radix_Up {f.spines_per_plane}", f"Downlink_Latency_ns {ns}",
        f"Oversubscribed {over}", "",
        "Tier 1", f"Downlink_speed_Gbps {int(s1)}", f"Radix_Down {f.leaves_per_plane}",
        f"Downlink_Latency_ns {ns}", ""])
