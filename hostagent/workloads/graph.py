"""Training-step graphs: per rank, a DAG of compute, collective, send and receive nodes.

Pure data and validation, no IO: the built-in generator (hostagent/workloads/training.py) and
trace readers make a `Job`, the runner ships each rank its `RankPlan`, and the executor
(hostagent/workloads/steps.py) runs it. Node ids are per rank; a node starts once every node
named in its `data_deps` and `ctrl_deps` is done (the executor treats both alike: there is no
tensor to pass, only an order).

Ordering within a communicator, as NCCL orders operations on one communicator's stream: a rank
runs the collectives of one group in the order they appear in its node list, and the sends
(receives) toward (from) one peer in their list order. Every member of a group must list the
same collectives (kind and size) in the same order, and the k-th send from a to b pairs with
the k-th receive at b from a, of the same size; `Job.validate` checks both across ranks, since
a mismatch would deadlock or corrupt a run. The list order must agree with the dependencies:
a node may not depend, directly or through others, on a later node of the same stream; that
shows as a cycle through the stream's order and is reported as one.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from hostagent.workloads.collectives import DTYPE, KINDS, MAX_WORLD, Kind

NodeKind = Literal["compute", "collective", "send", "recv"]
NODE_KINDS: tuple[NodeKind, ...] = ("compute", "collective", "send", "recv")
MAX_NODES = 200_000  # per rank: the executor keeps a task and a record per node
MAX_GROUPS = 254  # group ids fit the 8 bits the executor gives them in an immediate
MAX_BYTES = 2**30  # per collective or message: buffers are real and verified
MAX_DURATION = 3600.0  # s of one compute node


class GraphError(ValueError):
    """A graph that cannot run; the message names the rank, node id and field."""


@dataclass(frozen=True)
class Node:
    """One operation of one rank. `group`: the communicator group a collective runs on; for a
    send or receive an optional label (e.g. the pipeline group) that reports group it by.
    `peer`: the global rank a send goes to or a receive comes from."""

    id: int
    kind: NodeKind
    name: str = ""
    duration: float = 0.0  # compute: seconds of the real job (the executor may scale them)
    collective: Kind | None = None
    group: str | None = None
    bytes: int = 0  # collective: the whole array (nccl-tests' size); send/recv: the message
    peer: int | None = None
    data_deps: tuple[int, ...] = ()
    ctrl_deps: tuple[int, ...] = ()

    @property
    def deps(self) -> tuple[int, ...]:
        return self.data_deps + self.ctrl_deps

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "name": self.name, "duration": self.duration,
                "collective": self.collective, "group": self.group, "bytes": self.bytes,
                "peer": self.peer, "data_deps": list(self.data_deps),
                "ctrl_deps": list(self.ctrl_deps)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Node:
        return cls(id=data["id"], kind=data["kind"], name=data.get("name", ""),
                   duration=data.get("duration", 0.0), collective=data.get("collective"),
                   group=data.get("group"), bytes=data.get("bytes", 0), peer=data.get("peer"),
                   data_deps=tuple(data.get("data_deps", ())),
                   ctrl_deps=tuple(data.get("ctrl_deps", ())))


def stream(node: Node) -> tuple[str, Any] | None:
    """The ordered stream a node belongs to (its group, or its channel), None for compute."""
    if node.kind == "collective":
        return ("group", node.group)
    if node.kind == "send":
        return ("send", node.peer)
    if node.kind == "recv":
        return ("recv", node.peer)
    return None


@dataclass(frozen=True)
class Graph:
    """One rank's nodes, in list order (which orders each stream, see the module doc)."""

    rank: int
    nodes: tuple[Node, ...]

    def where(self, node: Node) -> str:
        return f"rank {self.rank}, node {node.id}{f' ({node.name})' if node.name else ''}"

    def validate(self, world: int, groups: Mapping[str, tuple[int, ...]]) -> None:
        """Each node on its own, then the dependencies: unknown ids and cycles."""
        if len(self.nodes) > MAX_NODES:
            raise GraphError(f"rank {self.rank}: {len(self.nodes)} nodes, more than the "
                             f"limit of {MAX_NODES}")
        seen: set[int] = set()
        for node in self.nodes:
            if node.id in seen:
                raise GraphError(f"{self.where(node)}: id {node.id} is used twice")
            seen.add(node.id)
            self._check_node(node, world, groups)
        for node in self.nodes:
            for dep in node.deps:
                if dep not in seen:
                    raise GraphError(f"{self.where(node)}: depends on node {dep}, which this "
                                     f"rank does not have")
                if dep == node.id:
                    raise GraphError(f"{self.where(node)}: depends on itself")
        self.order()

    def _check_node(self, node: Node, world: int, groups: Mapping[str, tuple[int, ...]]) -> None:
        where = self.where(node)
        if node.kind not in NODE_KINDS:
            raise GraphError(f"{where}: kind {node.kind!r} is not one of {', '.join(NODE_KINDS)}")
        if not 0 <= node.duration <= MAX_DURATION:
            raise GraphError(f"{where}: duration {node.duration} s is outside 0..{MAX_DURATION}")
        if node.kind == "compute":
            return
        if not 0 <= node.bytes <= MAX_BYTES or node.bytes % DTYPE.itemsize:
            raise GraphError(f"{where}: bytes {node.bytes} must be a multiple of "
                             f"{DTYPE.itemsize} in 0..{MAX_BYTES}")
        if node.kind == "collective":
            if node.collective not in KINDS:
                raise GraphError(f"{where}: collective {node.collective!r} is not one of "
                                 f"{', '.join(KINDS)}")
            members = groups.get(cast(str, node.group))
            if members is None:
                raise GraphError(f"{where}: group {node.group!r} is not a known group")
            if self.rank not in members:
                raise GraphError(f"{where}: group {node.group!r} {list(members)} does not "
                                 f"hold rank {self.rank}")
            return
        if node.peer is None or not 0 <= node.peer < world or node.peer == self.rank:
            raise GraphError(f"{where}: peer {node.peer} is not another rank of 0..{world - 1}")

    def order(self) -> list[Node]:
        """The nodes in an order that runs every dependency first, each stream in list order;
        a cycle (through dependencies and stream order) is an error naming its nodes."""
        by_id = {n.id: n for n in self.nodes}
        before = self.predecessors()
        indegree = {n.id: len(before[n.id]) for n in self.nodes}
        after: dict[int, list[int]] = defaultdict(list)
        for nid, deps in before.items():
            for dep in deps:
                after[dep].append(nid)
        ready = [n.id for n in self.nodes if indegree[n.id] == 0]
        out: list[Node] = []
        while ready:
            nid = ready.pop()
            out.append(by_id[nid])
            for nxt in after[nid]:
                indegree[nxt] -= 1
                if indegree[nxt] == 0:
                    ready.append(nxt)
        if len(out) < len(self.nodes):
            cycle = _find_cycle({nid: before[nid] for nid, d in indegree.items() if d > 0})
            raise GraphError(f"rank {self.rank}: dependency cycle through nodes "
                             f"{' -> '.join(map(str, cycle))} (stream order counts: a node "
                             f"may not wait for a later node of its group or channel)")
        return out

    def predecessors(self) -> dict[int, tuple[int, ...]]:
        """Per node id, what must be done before it starts: its deps and the previous node of
        its stream."""
        last: dict[tuple[str, Any], int] = {}
        before: dict[int, tuple[int, ...]] = {}
        for node in self.nodes:
            key = stream(node)
            prev = () if key is None or key not in last else (last[key],)
            before[node.id] = tuple(dict.fromkeys(node.deps + prev))
            if key is not None:
                last[key] = node.id
        return before

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "nodes": [n.to_dict() for n in self.nodes]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Graph:
        return cls(data["rank"], tuple(Node.from_dict(n) for n in data["nodes"]))


def _find_cycle(before: Mapping[int, tuple[int, ...]]) -> list[int]:
    """One cycle among nodes each of which has an unfinished predecessor in `before`."""
    start = next(iter(before))
    path: list[int] = []
    seen: dict[int, int] = {}
    nid = start
    while nid not in seen:
        seen[nid] = len(path)
        path.append(nid)
        nid = next(d for d in before[nid] if d in before)
    cycle = path[seen[nid]:] + [nid]
    return cycle[::-1]  # dependency first: a -> b reads "a before b"


@dataclass(frozen=True)
class Job:
    """Every rank's graph and the communicator groups (name -> global ranks, in group rank
    order). `placement`: the host each rank runs on, recorded with the job."""

    world: int
    groups: Mapping[str, tuple[int, ...]]
    graphs: tuple[Graph, ...]
    placement: tuple[str, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)

    def validate(self) -> Job:
        if not 1 <= self.world <= MAX_WORLD:
            raise GraphError(f"world {self.world} is outside 1..{MAX_WORLD}")
        if len(self.groups) > MAX_GROUPS:
            raise GraphError(f"{len(self.groups)} groups, more than the limit of {MAX_GROUPS}")
        for name, ranks in self.groups.items():
            bad = [r for r in ranks if not 0 <= r < self.world]
            if bad or not ranks or len(set(ranks)) != len(ranks):
                raise GraphError(f"group {name!r}: ranks {list(ranks)} must be distinct ranks "
                                 f"of 0..{self.world - 1}" + (f" ({bad} are not)" if bad else ""))
        if [g.rank for g in self.graphs] != list(range(self.world)):
            raise GraphError(f"graphs must be given for ranks 0..{self.world - 1} in order")
        if self.placement and len(self.placement) != self.world:
            raise GraphError(f"placement names {len(self.placement)} hosts for "
                             f"{self.world} ranks")
        for graph in self.graphs:
            graph.validate(self.world, self.groups)
        self._check_groups_agree()
        self._check_channels_agree()
        return self

    def _check_groups_agree(self) -> None:
        """Every member lists the same collectives of a group, in the same order."""
        for name, ranks in self.groups.items():
            lists = {r: [n for n in self.graphs[r].nodes
                         if n.kind == "collective" and n.group == name] for r in ranks}
            first = ranks[0]
            for r in ranks[1:]:
                a, b = lists[first], lists[r]
                for k, (x, y) in enumerate(zip(a, b, strict=False)):
                    if (x.collective, x.bytes) != (y.collective, y.bytes):
                        raise GraphError(
                            f"group {name!r}, collective #{k}: {self.graphs[first].where(x)} "
                            f"is {x.collective} of {x.bytes} B but "
                            f"{self.graphs[r].where(y)} is {y.collective} of {y.bytes} B "
                            f"(every member must run the same collectives in the same order)")
                if len(a) != len(b):
                    raise GraphError(f"group {name!r}: rank {first} lists {len(a)} collectives, "
                                     f"rank {r} lists {len(b)}")

    def _check_channels_agree(self) -> None:
        """The k-th send from a to b and the k-th receive at b from a have the same size."""
        sends: dict[tuple[int, int], list[Node]] = defaultdict(list)
        recvs: dict[tuple[int, int], list[Node]] = defaultdict(list)
        for g in self.graphs:
            for n in g.nodes:
                if n.kind == "send":
                    sends[(g.rank, cast(int, n.peer))].append(n)
                elif n.kind == "recv":
                    recvs[(cast(int, n.peer), g.rank)].append(n)
        for src, dst in sorted(set(sends) | set(recvs)):
            s, r = sends[(src, dst)], recvs[(src, dst)]
            for k, (x, y) in enumerate(zip(s, r, strict=False)):
                if x.bytes != y.bytes:
                    raise GraphError(f"channel {src} -> {dst}, message #{k}: "
                                     f"{self.graphs[src].where(x)} sends {x.bytes} B, "
                                     f"{self.graphs[dst].where(y)} receives {y.bytes} B")
            if len(s) != len(r):
                raise GraphError(f"channel {src} -> {dst}: rank {src} sends {len(s)} messages, "
                                 f"rank {dst} receives {len(r)}")

    def capacities(self) -> dict[str, int]:
        """Per group, the largest collective on it in float32 elements."""
        out = dict.fromkeys(self.groups, 0)
        for g in self.graphs:
            for n in g.nodes:
                if n.kind == "collective":
                    out[cast(str, n.group)] = max(out[cast(str, n.group)],
                                                  n.bytes // DTYPE.itemsize)
        return out

    def channels(self) -> dict[tuple[int, int], int]:
        """Per (sender, receiver), the largest message in float32 elements."""
        out: dict[tuple[int, int], int] = {}
        for g in self.graphs:
            for n in g.nodes:
                if n.kind == "send":
                    key = (g.rank, cast(int, n.peer))
                    out[key] = max(out.get(key, 0), n.bytes // DTYPE.itemsize)
        return out

    def plan(self, rank: int) -> RankPlan:
        """What rank `rank` needs to run: its graph and the job-wide layout tables."""
        return RankPlan(self.world, dict(self.groups), self.capacities(), self.channels(),
                        self.graphs[rank])


@dataclass(frozen=True)
class RankPlan:
    """One rank's graph with the tables every rank shares: the groups, their capacities and
    the point-to-point channels. From them each rank computes every rank's region layout, so a
    writer knows where its bytes go in a peer's region (steps.Layout)."""

    world: int
    groups: Mapping[str, tuple[int, ...]]
    capacities: Mapping[str, int]  # group -> float32 elements
    channels: Mapping[tuple[int, int], int]  # (sender, receiver) -> float32 elements
    graph: Graph

    def to_dict(self) -> dict[str, Any]:
        return {"world": self.world, "groups": {k: list(v) for k, v in self.groups.items()},
                "capacities": dict(self.capacities),
                "channels": [[s, d, c] for (s, d), c in sorted(self.channels.items())],
                "graph": self.graph.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RankPlan:
        plan = cls(data["world"], {k: tuple(v) for k, v in data["groups"].items()},
                   dict(data["capacities"]),
                   {(s, d): c for s, d, c in data["channels"]}, Graph.from_dict(data["graph"]))
        plan.graph.validate(plan.world, plan.groups)
        return plan

