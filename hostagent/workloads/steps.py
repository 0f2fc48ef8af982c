"""The executor of step graphs: one rank runs its RankPlan, iteration after iteration.

A node starts once its dependencies (and the previous node of its stream, hostagent/workloads/
graph.py) are done; everything else runs concurrently, so communication overlaps compute and
several groups' collectives are in flight at once over the one Endpoint.

Memory: a rank registers one region, cut into windows: one per group it belongs to, in which
that group's Communicator works (collectives.py's layout), then one receive slot per peer that
sends to it, as large as that peer's largest message. Every rank computes every rank's layout
from the job-wide tables (`Layout`), so a writer adds the window's base in the peer's region.

Immediates: a group's Communicator numbers its imms (call tag << 16 | step); its view of the
endpoint keeps the step, the tag's low 8 bits, and puts the group's id (1..254) in the top 8
bits, so concurrent collectives of different groups between the same two ranks never meet one
another's imms. Eight bits of call tag suffice: within a group a rank is at most one call ahead
of a peer (collectives.py) and a wait consumes its imm. Point-to-point imms carry 255 on top.

Send and receive: a rendezvous, as NCCL's point-to-point. The receiver, when its receive node
starts, writes a zero-byte clear-to-send to the sender; the sender waits for it, then writes the
message into its slot at the receiver. A slot thus holds one message at a time and a send
completes once the receiver has it.

Data: every collective moves the arrays of hostagent/workloads/iterations.py (keyed by a seed
per group call or message) and every result is checked bit for bit. Inputs are made when the
iteration begins and results verified after its last node, so neither sits on the timeline.
Compute nodes are timed waits of `duration` x `compute_scale` (the time-dilation factor when
the fabric stands for a faster one), times a seeded jitter factor drawn per rank, iteration and
node, uniform in 1 +- `jitter` (mean 1). A straggler window (start, end, factor), in seconds
after `origin` (the workload's start, which the network faults count from too), makes compute
progress `factor` times slower while it holds: a node that spans a window's edge runs at each
rate for its part (`stretched`).

Deadlines: a GPU stream runs its kernels back to back, so a compute node starts at the latest
end among its dependencies, counting a compute dependency's planned end and a communication
node's actual completion (a rank that waited on the network starts from when the data came),
and sleeps until that start plus its time. An event-loop timer that fires late thus delays
the end of one compute node, not of every later node of a chain; the straggler windows and
jitter apply to the planned start.
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from hostagent.protocol.endpoint import Endpoint, MessageStats
from hostagent.workloads import algorithms
from hostagent.workloads.algorithms import Algorithm, Choice
from hostagent.workloads.collectives import DTYPE, Communicator, Kind, registered_region
from hostagent.workloads.graph import Node, RankPlan, stream
from hostagent.workloads.iterations import (
    IterationRecord,
    MessageRecord,
    describe_mismatch,
    expected,
    inputs,
    verify,
)

if TYPE_CHECKING:
    from typing_extensions import Buffer

log = logging.getLogger(__name__)
_P2P = 0xFF  # top byte of a point-to-point imm
_CTS = 1 << 23  # clear-to-send bit of a point-to-point imm
_SEQ_MASK = _CTS - 1


@dataclass(frozen=True)
class Layout:
    """Where each group's window and each channel's slot start in every rank's region (float32
    elements), and every region's size."""

    group_base: Mapping[tuple[str, int], int]  # (group, rank) -> element offset
    slot_base: Mapping[tuple[int, int], int]  # (sender, receiver) -> offset at the receiver
    size: Mapping[int, int]  # rank -> elements

    @classmethod
    def of(cls, plan: RankPlan, *, trees: bool = False) -> Layout:
        """`trees`: every group's Communicator has room for a tree all-reduce."""
        group_base: dict[tuple[str, int], int] = {}
        slot_base: dict[tuple[int, int], int] = {}
        size: dict[int, int] = {}
        for rank in range(plan.world):
            at = 0
            for name in sorted(plan.groups):
                members = plan.groups[name]
                if rank in members:
                    group_base[(name, rank)] = at
                    at += Communicator.region_elements(len(members), plan.capacities[name],
                                                       trees=trees)
            for (src, dst), elements in sorted(plan.channels.items()):
                if dst == rank:
                    slot_base[(src, dst)] = at
                    at += elements
            size[rank] = at
        return cls(group_base, slot_base, size)


class _GroupView:
    """The Endpoint a group's Communicator sees: group ranks, offsets within the group's window,
    the group's id in the imms."""

    def __init__(self, endpoint: Endpoint, members: tuple[int, ...], gid: int,
                 bases: Mapping[int, int]) -> None:
        self._endpoint = endpoint
        self._members = members
        self._tag = gid << 24
        self._bases = {m: bases[m] * DTYPE.itemsize for m in members}  # bytes
        self.rank = members.index(endpoint.rank)
        self.world = len(members)

    def register(self, buffer: memoryview) -> None:
        raise RuntimeError("a group's Communicator works in the step region, registered once")

    def _imm(self, imm: int) -> int:
        return self._tag | (imm >> 16 & 0xFF) << 16 | (imm & 0xFFFF)

    def write(self, peer: int, data: memoryview, remote_offset: int,
              imm: int | None = None) -> Awaitable[MessageStats]:
        rank = self._members[peer]
        return self._endpoint.write(rank, data, self._bases[rank] + remote_offset,
                                    None if imm is None else self._imm(imm))

    async def wait_imm(self, peer: int, imm: int) -> None:
        await self._endpoint.wait_imm(self._members[peer], self._imm(imm))


@dataclass(frozen=True)
class NodeRecord:
    """One node of one rank in one iteration (a row of `steps.parquet`). `start`/`end` on the
    executor's clock; for a receive, `start` is when it was posted (clear-to-send), for a send
    when it began waiting for the receiver."""

    rank: int
    iteration: int
    warmup: bool
    node: int
    name: str
    kind: str
    collective: str | None
    group: str | None
    peer: int | None
    bytes: int
    start: float
    end: float
    verified: bool
    error: str | None


Window = tuple[float, float | None, float]  # start, end (None: no end), factor


def stretched(start: float, work: float, windows: Sequence[Window]) -> float:
    """Wall time `work` seconds of compute take from `start` when inside each window (start,
    end, factor) they run `factor` times slower; windows must not overlap."""
    t, left = start, work
    for begin, end, factor in sorted(windows):
        stop = float("inf") if end is None else end
        if stop <= t:
            continue
        if begin > t:
            if left <= begin - t:
                break
            t, left = begin, left - (begin - t)
        if left * factor <= stop - t:
            return t + left * factor - start
        t, left = stop, left - (stop - t) / factor
    return t + left - start


def _seed(seed: int, *parts: object) -> int:
    """A 64-bit data seed per group call or message, the same on every rank that needs it."""
    text = "/".join(map(str, (seed, *parts))).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")


class StepExecutor:
    """One rank's step graph over `endpoint`. Build it on every rank before traffic starts (it
    registers the region), then `await run_iteration(k)` for k = 0, 1, ... on each.

    `algorithm` (ring, tree or auto; ring when None) is every all-reduce's; auto chooses per
    node by the cost model over `fabric`, from the node's bytes and its group's size, the same
    on every rank. Other collectives run their default."""

    def __init__(self, endpoint: Endpoint, plan: RankPlan, *, seed: int,
                 clock: Callable[[], float], compute_scale: float = 1.0,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                 jitter: float = 0.0, stragglers: Sequence[Window] = (),
                 algorithm: Choice | None = None,
                 fabric: algorithms.Fabric | None = None) -> None:
        if compute_scale <= 0:
            raise ValueError(f"compute_scale must be above 0, not {compute_scale}")
        if not 0 <= jitter < 1:
            raise ValueError(f"jitter must be in 0..1, not {jitter}")
        if endpoint.world != plan.world or endpoint.rank != plan.graph.rank:
            raise ValueError(f"a plan for rank {plan.graph.rank} of {plan.world} on the endpoint "
                             f"of rank {endpoint.rank} of {endpoint.world}")
        if algorithm is not None:
            algorithms.check("all_reduce", algorithm)
        if algorithm == "auto" and fabric is None:
            raise ValueError("algorithm auto needs the fabric its cost model reads")
        self._algorithm, self._fabric = algorithm, fabric
        trees = algorithm in ("tree", "auto")
        self.endpoint, self.plan, self.seed = endpoint, plan, seed
        self.rank = endpoint.rank
        self._clock, self._scale, self._sleep = clock, compute_scale, sleep
        self._jitter, self._stragglers = jitter, tuple(stragglers)
        self.origin = 0.0  # the workload's start on `clock`: what straggler windows count from
        self.order = plan.graph.order()
        self._before = plan.graph.predecessors()
        self.layout = Layout.of(plan, trees=trees)
        self._region = registered_region(max(1, self.layout.size[self.rank]))
        endpoint.register(memoryview(cast("Buffer", self._region)).cast("B"))
        self._comms: dict[str, Communicator] = {}
        for gid, name in enumerate(sorted(plan.groups), start=1):
            members = plan.groups[name]
            if self.rank not in members:
                continue
            at = self.layout.group_base[(name, self.rank)]
            size = Communicator.region_elements(len(members), plan.capacities[name],
                                                trees=trees)
            view = _GroupView(endpoint, members, gid,
                              {m: self.layout.group_base[(name, m)] for m in members})
            self._comms[name] = Communicator(view, plan.capacities[name],
                                             region=self._region[at:at + size], trees=trees)
        # per-iteration data: the index of each collective in its group, of each message in
        # its channel (the same numbers on both sides), counted over the node list
        self._index: dict[int, int] = {}
        counts: dict[tuple[str, Any], int] = {}
        for node in plan.graph.nodes:
            key = stream(node)
            if key is not None:
                self._index[node.id] = counts.get(key, 0)
                counts[key] = self._index[node.id] + 1
        self._per_iteration = counts
        self._messages: list[MessageRecord] = []
        self._sent: list[MessageStats] = []  # this iteration's point-to-point writes
        self._iteration = 0
        self._running: dict[int, tuple[Node, float]] = {}  # started, not done: node, start

    def take_messages(self) -> list[MessageRecord]:
        """Every write since the last take (collectives' and point-to-point's)."""
        messages, self._messages = self._messages, []
        return messages

    async def run_iteration(self, iteration: int, warmup: bool = False) -> list[NodeRecord]:
        """Every node once; the records of all of them in node-list order. A transport failure
        raises; a wrong result does not (its record says verified=False and why)."""
        data = {n.id: self._input(n, iteration) for n in self.order}
        results: dict[int, np.ndarray | None] = {}
        times: dict[int, tuple[float, float]] = {}
        tasks: dict[int, asyncio.Task[None]] = {}

        ends: dict[int, float] = {}  # what a successor starts from (`_compute`)

        async def run(node: Node) -> None:
            before = self._before[node.id]
            if before:
                await asyncio.gather(*(tasks[d] for d in before))
            start = self._clock()
            self._running[node.id] = (node, start)
            if node.kind == "compute":
                begin = max((ends[d] for d in before), default=start)
                ends[node.id] = await self._compute(node, iteration, begin)
                results[node.id] = None
            else:
                results[node.id] = await self._execute(node, iteration, data[node.id])
                ends[node.id] = self._clock()
            times[node.id] = (start, self._clock())
            del self._running[node.id]  # a node cancelled mid-way stays: waiting() names it

        self._iteration = iteration
        self._running = {}

        for node in self.order:  # dependencies first, so each task finds its deps' tasks
            tasks[node.id] = asyncio.ensure_future(run(node))
        try:
            await asyncio.gather(*tasks.values())
        finally:
            for task in tasks.values():
                task.cancel()
        records = []
        for node in self.plan.graph.nodes:
            error = self._check(node, iteration, results[node.id])
            start, end = times[node.id]
            records.append(NodeRecord(self.rank, iteration, warmup, node.id, node.name, node.kind,
                                      node.collective, node.group, node.peer, node.bytes,
                                      start, end, error is None, error))
        stats = [s for comm in self._comms.values() for s in comm.take_messages()] + self._sent
        self._sent = []
        self._messages += [MessageRecord.of(self.rank, iteration, warmup, s) for s in stats]
        return records

    def waiting(self) -> list[dict[str, Any]]:
        """The communication nodes started and not done (after a timeout, or a stop: what the
        rank was waiting in), each with the ranks it waits for: a receive's sender, a send's
        receiver (its clear-to-send), a collective's other members. A compute node in flight
        is no wait on a peer and is left out."""
        out = []
        for node, start in sorted(self._running.values(), key=lambda x: x[0].id):
            if node.kind == "compute":
                continue
            on = ([cast(int, node.peer)] if node.kind != "collective" else
                  [r for r in self.plan.groups[cast(str, node.group)] if r != self.rank])
            out.append({"rank": self.rank, "iteration": self._iteration, "node": node.id,
                        "name": node.name, "kind": node.kind, "collective": node.collective,
                        "group": node.group, "peer": node.peer, "on": on, "since": start})
        return out

    # ---- one node ----
    def _input(self, node: Node, iteration: int) -> np.ndarray | None:
        count = node.bytes // DTYPE.itemsize
        if node.kind == "collective":
            group = self.plan.groups[cast(str, node.group)]
            kind = cast(Kind, node.collective)
            return inputs(kind, self._data_seed(node), iteration, group.index(self.rank),
                          len(group), count)
        if node.kind == "send":
            return inputs("all_reduce", self._data_seed(node), iteration, self.rank, 1, count)
        return None

    def _data_seed(self, node: Node) -> int:
        if node.kind == "collective":
            return _seed(self.seed, "group", node.group, self._index[node.id])
        src, dst = (self.rank, node.peer) if node.kind == "send" else (node.peer, self.rank)
        return _seed(self.seed, "p2p", src, dst, self._index[node.id])

    async def _compute(self, node: Node, iteration: int, begin: float) -> float:
        """Run a compute node that may start at `begin`; its planned end. It sleeps until that
        deadline rather than for its duration from when the loop woke it, so the loop's timer
        lateness does not add up along a chain of compute nodes."""
        end = begin + self.compute_time(node, iteration, begin - self.origin)
        await self._sleep(max(0.0, end - self._clock()))
        return end

    def algorithm_of(self, kind: Kind, nbytes: int, comm: Communicator) -> Algorithm | None:
        """The algorithm a collective node runs (None: its default)."""
        if kind != "all_reduce" or self._algorithm is None:
            return None
        return algorithms.choose(kind, self._algorithm, nbytes, comm.endpoint.world,
                                 cast(algorithms.Fabric, self._fabric))

    async def _execute(self, node: Node, iteration: int,
                       data: np.ndarray | None) -> np.ndarray | None:
        """Run a communication node; its result (a collective's or a receive's array)."""
        if node.kind == "collective":
            comm = self._comms[cast(str, node.group)]
            kind = cast(Kind, node.collective)
            return await comm.run(kind, cast(np.ndarray, data), node.bytes // DTYPE.itemsize,
                                  algorithm=self.algorithm_of(kind, node.bytes, comm))
        seq = (iteration * self._per_iteration[cast(tuple[str, Any], stream(node))]
               + self._index[node.id]) & _SEQ_MASK
        peer = cast(int, node.peer)
        if node.kind == "send":
            await self.endpoint.wait_imm(peer, _P2P << 24 | _CTS | seq)
            at = self.layout.slot_base[(self.rank, peer)] * DTYPE.itemsize
            stats = await self.endpoint.write(
                peer, memoryview(cast("Buffer", data)).cast("B"), at, _P2P << 24 | seq)
            self._sent.append(stats)
            return None
        at = self.layout.slot_base[(peer, self.rank)]
        cts = self.endpoint.write(peer, memoryview(bytearray(0)), 0, _P2P << 24 | _CTS | seq)
        await asyncio.gather(cts, self.endpoint.wait_imm(peer, _P2P << 24 | seq))
        return self._region[at:at + node.bytes // DTYPE.itemsize].copy()

    def compute_time(self, node: Node, iteration: int, now: float) -> float:
        """How long a compute node started `now` s after the origin takes: its duration
        scaled, jittered, and stretched by the stragglers' windows."""
        work = node.duration * self._scale
        if self._jitter:
            u = _seed(self.seed, "jitter", self.rank, iteration, node.id) / 2**64
            work *= 1 + self._jitter * (2 * u - 1)
        return stretched(now, work, self._stragglers) if self._stragglers else work

    def _check(self, node: Node, iteration: int, result: np.ndarray | None) -> str | None:
        """None if the node's result is right (or it has none), else what is wrong."""
        count = node.bytes // DTYPE.itemsize
        if node.kind == "collective":
            group = self.plan.groups[cast(str, node.group)]
            kind = cast(Kind, node.collective)
            want = expected(kind, self._data_seed(node), iteration, group.index(self.rank),
                            len(group), count)
        elif node.kind == "recv":
            kind = "all_reduce"  # a message is the sender's whole array
            want = inputs(kind, self._data_seed(node), iteration, cast(int, node.peer), 1, count)
        else:
            return None
        ok, bad = verify(kind, cast(np.ndarray, result), want)
        return None if ok else describe_mismatch(kind, cast(np.ndarray, result), want,
                                                 cast(int, bad))



async def run_steps(executor: StepExecutor, iterations: int, warmup: int,
                    records: list[IterationRecord], nodes: list[NodeRecord],
                    messages: list[MessageRecord]) -> None:
    """`warmup` then `iterations` steps. Each appends its node records to `nodes` and one
    record of kind "step" to `records` (first node's start to last node's end on this rank;
    bytes: every collective and message of the step; verified if every node was), so the
    runner follows the progress of steps as it follows collectives'."""
    for iteration in range(warmup + iterations):
        done = await executor.run_iteration(iteration, warmup=iteration < warmup)
        nodes += done
        messages += executor.take_messages()
        wrong = [r for r in done if not r.verified]
        if wrong:
            log.error("rank %d, iteration %d: %d nodes wrong, first %d (%s): %s",
                      executor.rank, iteration, len(wrong), wrong[0].node, wrong[0].name,
                      wrong[0].error)
        records.append(IterationRecord(
            "step", executor.rank, iteration, iteration < warmup,
            min((r.start for r in done), default=0.0), max((r.end for r in done), default=0.0),
            sum(r.bytes for r in done if r.kind != "compute"), not wrong,
            f"node {wrong[0].node} ({wrong[0].name}): {wrong[0].error}" if wrong else None))
