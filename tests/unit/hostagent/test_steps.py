"""The step executor: dependencies respected, independent nodes concurrent, several groups'
collectives in flight over the same connections, messages delivered, every byte verified."""
from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Awaitable, Callable
from typing import cast

import pytest

from hostagent.protocol.mrc import MrcQP
from hostagent.workloads.algorithms import Fabric
from hostagent.workloads.collectives import Communicator
from hostagent.workloads.graph import Graph, Job, Node, RankPlan
from hostagent.workloads.loopback import Flip, LoopbackFabric
from hostagent.workloads.steps import Layout, NodeRecord, StepExecutor, stretched

from .simnet import SimFabric
from .test_sim_collectives import lossy, mrc_pair, roce_pair

REORDERED = {"reorder": True, "chunk": 7, "seed": 3}
TIMEOUT = 20.0


def run_job(job: Job, iterations: int = 2, clock=time.perf_counter, scale: float = 1.0,
            sleep=asyncio.sleep, algorithm=None, cost=None, **fabric) -> list[NodeRecord]:
    job.validate()
    net = LoopbackFabric(job.world, **fabric)

    async def rank(r: int) -> list[NodeRecord]:
        ex = StepExecutor(net.endpoint(r), job.plan(r), seed=11, clock=clock,
                          compute_scale=scale, sleep=sleep, algorithm=algorithm, fabric=cost)
        out = []
        for it in range(iterations):
            out += await ex.run_iteration(it)
        return out

    async def main():
        return await asyncio.wait_for(asyncio.gather(*(rank(r) for r in range(job.world))),
                                      TIMEOUT)

    return [rec for per in asyncio.run(main()) for rec in per]


def same_graph(world: int, nodes: list[Node], groups: dict) -> Job:
    return Job(world, groups, tuple(Graph(r, tuple(nodes)) for r in range(world)))


def overlap(a: NodeRecord, b: NodeRecord) -> bool:
    return a.start < b.end and b.start < a.end


def by(records: list[NodeRecord], rank: int, iteration: int) -> dict[int, NodeRecord]:
    return {r.node: r for r in records if r.rank == rank and r.iteration == iteration}


def two_groups_on_the_same_ranks() -> Job:
    """Two groups holding the same 4 ranks (so the same connections), each with collectives
    that depend on nothing of the other: both groups' calls are in flight at once."""
    nodes = [Node(1, "collective", collective="all_reduce", group="a", bytes=4 * 4000),
             Node(2, "collective", collective="all_reduce", group="b", bytes=4 * 4000),
             Node(3, "collective", collective="all_gather", group="a", bytes=4 * 999,
                  data_deps=(1,)),
             Node(4, "collective", collective="all_to_all", group="b", bytes=4 * 1001,
                  data_deps=(2,)),
             Node(5, "collective", collective="reduce_scatter", group="a", bytes=4 * 37,
                  ctrl_deps=(3, 4))]
    return same_graph(4, nodes, {"a": (0, 1, 2, 3), "b": (3, 1, 0, 2)})


def test_concurrent_groups_on_shared_connections_verify():
    records = run_job(two_groups_on_the_same_ranks(), **REORDERED)
    assert len(records) == 4 * 2 * 5
    assert [r.error for r in records if not r.verified] == []
    overlapping = sum(overlap(by(records, r, it)[1], by(records, r, it)[2])
                      for r in range(4) for it in range(2))
    assert overlapping == 8, "groups a and b ran their first collectives at the same time"


@pytest.mark.parametrize("algorithm", ["tree", "auto"])
def test_a_step_runs_its_all_reduces_as_the_setting_says_and_verifies(algorithm, monkeypatch):
    """The two groups' all-reduces as trees (auto: a 1 s latency makes the tree cheaper at
    these sizes), beside collectives that keep their default; every byte verified."""
    ran: list[tuple[str, str | None]] = []
    run = Communicator.run

    async def spy(self, kind, send, count, out=None, algorithm=None):
        ran.append((kind, algorithm))
        return await run(self, kind, send, count, out, algorithm)

    monkeypatch.setattr(Communicator, "run", spy)
    cost = Fabric(latency_s=1.0, bytes_per_s=1e9)
    records = run_job(two_groups_on_the_same_ranks(), algorithm=algorithm, cost=cost,
                      **REORDERED)
    assert [r.error for r in records if not r.verified] == []
    assert len(records) == 4 * 2 * 5
    assert sorted(set(ran)) == [("all_gather", None), ("all_reduce", "tree"),
                                ("all_to_all", None), ("reduce_scatter", None)]


def test_dependencies_are_respected():
    records = run_job(two_groups_on_the_same_ranks(), **REORDERED)
    job = two_groups_on_the_same_ranks()
    for rank in range(4):
        for it in range(2):
            recs = by(records, rank, it)
            for node in job.graphs[rank].nodes:
                for dep in node.deps:
                    assert recs[node.id].start >= recs[dep].end


def test_several_groups_and_pipeline_messages():
    """8 ranks as 2 (dp) x 2 (tp) x 2 (pp): TP collectives per stage, activations sent forward
    and gradients backward between stages, a DP all-reduce at the end; every byte verified."""
    def rank_of(d: int, t: int, p: int) -> int:
        return d * 4 + p * 2 + t

    groups = {}
    for d in range(2):
        for p in range(2):
            groups[f"tp{d}{p}"] = tuple(rank_of(d, t, p) for t in range(2))
    for t in range(2):
        for p in range(2):
            groups[f"dp{t}{p}"] = tuple(rank_of(d, t, p) for d in range(2))
    graphs = []
    for r in range(8):
        d, p, t = r // 4, r // 2 % 2, r % 2
        tp, dp = f"tp{d}{p}", f"dp{t}{p}"
        other = rank_of(d, t, 1 - p)
        nodes = [Node(1, "compute", duration=0.001)]
        if p == 0:
            nodes += [Node(2, "collective", collective="all_gather", group=tp, bytes=400,
                           data_deps=(1,)),
                      Node(3, "send", bytes=4 * 333, peer=other, group="pp", data_deps=(2,)),
                      Node(4, "recv", bytes=4 * 77, peer=other, group="pp"),
                      Node(5, "collective", collective="reduce_scatter", group=tp, bytes=400,
                           data_deps=(4,))]
        else:
            nodes += [Node(2, "recv", bytes=4 * 333, peer=other, group="pp"),
                      Node(3, "collective", collective="all_gather", group=tp, bytes=400,
                           data_deps=(2,)),
                      Node(4, "send", bytes=4 * 77, peer=other, group="pp", data_deps=(3,)),
                      Node(5, "collective", collective="reduce_scatter", group=tp, bytes=400,
                           data_deps=(3,))]
        nodes.append(Node(6, "collective", collective="all_reduce", group=dp, bytes=4 * 1234,
                          data_deps=(5,)))
        graphs.append(Graph(r, tuple(nodes)))
    job = Job(8, groups, tuple(graphs))
    records = run_job(job, iterations=3, **REORDERED)
    assert len(records) == 8 * 3 * 6
    assert [r.error for r in records if not r.verified] == []
    assert {r.kind for r in records} == {"compute", "collective", "send", "recv"}


def test_a_corrupted_byte_is_caught():
    """Rank 1's reduce-scatter block lands corrupted at rank 0, whose sum then reaches rank 1
    in the all-gather: both see it."""
    nodes = [Node(1, "collective", collective="all_reduce", group="a", bytes=64)]
    records = run_job(same_graph(2, nodes, {"a": (0, 1)}), iterations=1,
                      flip=Flip(sender=1, receiver=0, write=0, byte=5))
    assert [r.rank for r in records if not r.verified] == [0, 1]


def test_a_corrupted_message_is_caught():
    job = Job(2, {}, (Graph(0, (Node(1, "send", bytes=40, peer=1),)),
                      Graph(1, (Node(1, "recv", bytes=40, peer=0),))))
    records = run_job(job, iterations=1, flip=Flip(sender=0, receiver=1, write=0, byte=3))
    wrong = [r for r in records if not r.verified]
    assert [(r.rank, r.kind) for r in wrong] == [(1, "recv")]
    assert "element 0" in wrong[0].error


def test_a_sender_ahead_of_its_receiver_waits():
    """Three messages on one channel, the receiver busy computing before each receive: a
    sender that did not wait for the receiver would overwrite the slot before it is read."""
    sends = tuple(Node(k, "send", bytes=4 * 50, peer=1) for k in range(3))
    recvs = []
    for k in range(3):
        recvs += [Node(10 + k, "compute", duration=0.005, data_deps=(20 + k - 1,) if k else ()),
                  Node(20 + k, "recv", bytes=4 * 50, peer=0, data_deps=(10 + k,))]
    records = run_job(Job(2, {}, (Graph(0, sends), Graph(1, tuple(recvs)))), iterations=2)
    assert len(records) == 2 * (3 + 6)
    assert [r.error for r in records if not r.verified] == []


def test_independent_compute_runs_concurrently_and_scaled():
    """Two independent 40 ms computes then a 20 ms one after both: the critical path is 60 ms
    (x scale); a serial executor would take 100 ms."""
    nodes = [Node(1, "compute", duration=0.04), Node(2, "compute", duration=0.04),
             Node(3, "compute", duration=0.02, data_deps=(1, 2))]
    for scale, path in ((1.0, 0.06), (2.0, 0.12)):
        records = run_job(same_graph(1, nodes, {}), iterations=1, scale=scale)
        span = max(r.end for r in records) - min(r.start for r in records)
        assert path <= span < path + 0.015


def test_compute_durations_reach_the_sleep_scaled():
    slept: list[float] = []
    now, clock, advance = fake_time()

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        await advance(seconds)

    nodes = [Node(1, "compute", duration=0.5), Node(2, "compute", duration=0.25)]
    run_job(same_graph(1, nodes, {}), iterations=1, scale=4.0, clock=clock, sleep=sleep)
    assert sorted(slept) == [1.0, 2.0]


def test_layout_windows_do_not_overlap():
    """Each rank's windows (groups it is in, then receive slots) tile its region."""
    job = two_groups_on_the_same_ranks()
    plan = job.plan(0)
    layout = Layout.of(plan)
    # group a, 4 ranks, 4000 elements: 2 halves x (2 x 4 - 1) blocks x 1000 = 14000
    assert layout.group_base[("a", 2)] == 0
    assert layout.group_base[("b", 2)] == 14000
    assert layout.size[2] == 28000


@pytest.mark.parametrize("transport", ["mrc", "rocev2"])
def test_step_over_the_transports_with_loss(transport):
    """The two-group step over the sans-IO transports on a lossy simulated network."""
    job = two_groups_on_the_same_ranks().validate()
    fabric = SimFabric(4, mrc_pair if transport == "mrc" else roce_pair, seed=2,
                       path=lossy(dead_ev=1 if transport == "mrc" else None))

    async def rank(r: int) -> list[NodeRecord]:
        ex = StepExecutor(fabric.endpoint(r), job.plan(r), seed=5, clock=lambda: fabric.now)
        return [rec for it in range(2) for rec in await ex.run_iteration(it)]

    async def main():
        return await fabric.run(rank(r) for r in range(4))

    records = [rec for per in asyncio.run(main()) for rec in per]
    assert len(records) == 4 * 2 * 5
    assert [r.error for r in records if not r.verified] == []
    qps = [qp for peers in fabric.qps.values() for qp in peers.values()]
    assert sum(qp.counters.retransmits for qp in qps) > 0
    assert isinstance(qps[0], MrcQP) == (transport == "mrc")


@pytest.mark.parametrize(("start", "work", "windows", "wall"), [
    (0.0, 0.5, [(1.0, 2.0, 2.0)], 0.5),  # done before the window opens
    (0.0, 1.5, [(1.0, 2.0, 2.0)], 2.0),  # 1 s before, its last 0.5 s of work at half speed
    (0.0, 2.0, [(1.0, 2.0, 2.0)], 2.5),  # 1 s, the window's 1 s does 0.5 s, 0.5 s after
    (1.5, 1.0, [(1.0, 2.0, 2.0)], 1.25),  # starts inside: 0.5 s does 0.25 s, then 0.75 s
    (0.0, 2.0, [(1.0, None, 3.0)], 4.0),  # a window to the end: 1 s, then 1 s of work x 3
    (0.0, 3.0, [(2.0, 3.0, 2.0), (0.5, 1.0, 4.0)], 3.875),  # 0.5 + 0.5 (1/8 done) + 1 +
    # 1 (0.5 done) + the 0.875 s left
])
def test_straggler_windows_stretch_compute(start, work, windows, wall):
    assert stretched(start, work, windows) == pytest.approx(wall)


def fake_time() -> tuple[list[float], Callable[[], float], Callable[[float], Awaitable[None]]]:
    now = [0.0]

    async def sleep(seconds: float) -> None:
        now[0] += seconds

    return now, lambda: now[0], sleep


class LateTimers:
    """Virtual time whose timers fire `late` s after their deadline, as a busy event loop's
    do: time moves to the next wake-up once every task waits on a timer (the loopback fabric
    needs no timers, only turns of the loop)."""

    TURNS = 200  # loop turns without a wake-up that count as everyone waiting

    def __init__(self, late: float, now: float = 0.0) -> None:
        self.late, self.now = late, now
        self._timers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()  # equal deadlines wake in the order they were set

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        future = asyncio.get_running_loop().create_future()
        heapq.heappush(self._timers, (self.now + seconds + self.late, next(self._order),
                                      future))
        await future

    async def run(self, *coros: Awaitable[object]) -> list[object]:
        main = asyncio.ensure_future(asyncio.gather(*coros))
        while not main.done():
            for _ in range(self.TURNS):
                await asyncio.sleep(0)
            if main.done():
                break
            assert self._timers, "every task waits, and on no timer: a deadlock"
            at, _, future = heapq.heappop(self._timers)
            self.now = max(self.now, at)
            future.set_result(None)
        return main.result()


def late_run(job: Job, late: float, scale: float = 1.0, now: float = 0.0,
             stragglers: tuple = ()) -> dict[int, dict[int, NodeRecord]]:
    """Iteration 0 of `job` on timers `late` s late; per rank, its records by node id."""
    job.validate()
    timers, net = LateTimers(late, now), LoopbackFabric(job.world)
    executors = [StepExecutor(net.endpoint(r), job.plan(r), seed=1, clock=timers.clock,
                              sleep=timers.sleep, compute_scale=scale, stragglers=stragglers)
                 for r in range(job.world)]
    for ex in executors:
        ex.origin = now
    per_rank = asyncio.run(timers.run(*(ex.run_iteration(0) for ex in executors)))
    return {ex.rank: {r.node: r for r in recs}
            for ex, recs in zip(executors, cast(list[list[NodeRecord]], per_rank), strict=True)}


DURATIONS = (0.10, 0.03, 0.25, 0.07, 0.15, 0.05, 0.20, 0.12, 0.09, 0.04)


@pytest.mark.parametrize("scale", [1.0, 2.5])
def test_lateness_does_not_add_up_along_a_compute_chain(scale):
    """Ten chained computes on timers 20 ms late: the chain ends one lateness after the sum of
    its (scaled) durations, as a GPU stream would; sleeping each duration from the late
    wake-up would end ten latenesses after it."""
    late = 0.02
    nodes = [Node(k, "compute", duration=d, data_deps=(k - 1,) if k else ())
             for k, d in enumerate(DURATIONS)]
    recs = late_run(Job(1, {}, (Graph(0, tuple(nodes)),)), late, scale)[0]
    assert recs[len(DURATIONS) - 1].end == pytest.approx(sum(DURATIONS) * scale + late)
    assert [r.start for r in recs.values()] == sorted(r.start for r in recs.values())


def test_a_join_of_computes_ends_after_its_latest_dependency_planned():
    """Two branches (0.1 s then 0.3 s; 0.2 s) joined by a 0.1 s compute: it ends at
    max(0.4, 0.2) + 0.1 plus one lateness."""
    late = 0.03
    nodes = [Node(1, "compute", duration=0.1), Node(2, "compute", duration=0.3, data_deps=(1,)),
             Node(3, "compute", duration=0.2),
             Node(4, "compute", duration=0.1, data_deps=(2, 3))]
    recs = late_run(Job(1, {}, (Graph(0, tuple(nodes)),)), late)[0]
    assert recs[4].end == pytest.approx(0.5 + late)


def test_a_compute_after_communication_starts_from_its_completion():
    """Rank 0 computes 1 s, sends, computes 0.5 s; rank 1 receives, computes 0.5 s. The
    message arrives when the late timer lets the first compute end (1 s + lateness), and both
    0.5 s computes count from then: 1.5 s + two latenesses. Carrying the planned end across
    the send would end them one lateness early, before the data they wait for could exist."""
    late = 0.04
    job = Job(2, {}, (
        Graph(0, (Node(1, "compute", duration=1.0),
                  Node(2, "send", bytes=16, peer=1, data_deps=(1,)),
                  Node(3, "compute", duration=0.5, data_deps=(2,)))),
        Graph(1, (Node(1, "recv", bytes=16, peer=0),
                  Node(2, "compute", duration=0.5, data_deps=(1,))))))
    recs = late_run(job, late)
    assert recs[0][2].end == pytest.approx(1.0 + late)
    assert recs[1][1].end == pytest.approx(1.0 + late)
    assert recs[0][3].end == pytest.approx(1.5 + 2 * late)
    assert recs[1][2].end == pytest.approx(1.5 + 2 * late)
    assert all(r.verified for per in recs.values() for r in per.values())


@pytest.mark.parametrize("late", [0.0, 0.05])
def test_a_straggler_slows_the_compute_inside_its_window(late):
    """Three chained 1 s computes, a x3 straggler from 1 s to 2 s after the origin (10 s on the
    clock): the second does 1/3 s of work in the window and 2/3 s after it, ending at 2 2/3 s;
    the third runs at full speed. Late timers shift each end by their lateness only: the
    windows apply to the planned starts."""
    nodes = [Node(1, "compute", duration=1.0), Node(2, "compute", duration=1.0, data_deps=(1,)),
             Node(3, "compute", duration=1.0, data_deps=(2,))]
    recs = late_run(same_graph(2, nodes, {}), late, now=10.0,
                    stragglers=((1.0, 2.0, 3.0),))[1]
    ends = [recs[k].end - 10.0 for k in (1, 2, 3)]
    assert ends == pytest.approx([1.0 + late, 2 + 2 / 3 + late, 3 + 2 / 3 + late])


def test_jitter_is_seeded_per_rank_bounded_and_of_mean_one():
    job = same_graph(2, [Node(k, "compute", duration=1.0) for k in range(500)], {}).validate()

    def times(rank: int, seed: int) -> list[float]:
        ex = StepExecutor(LoopbackFabric(2).endpoint(rank), job.plan(rank), seed=seed,
                          clock=time.time, jitter=0.2)
        return [ex.compute_time(n, it, 0.0) for n in job.graphs[rank].nodes for it in range(4)]

    a, again, other_rank = times(0, 5), times(0, 5), times(1, 5)
    assert a == again and a != other_rank != times(1, 6)
    assert min(a) >= 0.8 and max(a) <= 1.2
    # 2000 draws, uniform in 1 +- 0.2: the mean's std is 0.2 / sqrt(3 x 2000) = 0.0026
    assert sum(a) / len(a) == pytest.approx(1.0, abs=0.01)
    assert max(a) - min(a) > 0.35, "the draws span the range"


def _plans(graphs: dict[int, tuple[Node, ...]], groups: dict[str, tuple[int, ...]],
           channels: dict[tuple[int, int], int]) -> list[RankPlan]:
    """Plans made by hand, each rank's graph valid on its own: the cross-rank checks of
    Job.validate, which would refuse these graphs, are what a deadlock slips past."""
    caps = dict.fromkeys(groups, 4)
    return [RankPlan(len(graphs), groups, caps, channels, Graph(r, graphs[r]))
            for r in sorted(graphs)]


def _stall(plans: list[RankPlan], seconds: float = 0.3) -> list[StepExecutor]:
    """Run iteration 0 on every rank until `seconds` pass; the executors, to ask."""
    net = LoopbackFabric(len(plans))
    executors = [StepExecutor(net.endpoint(p.graph.rank), p, seed=1, clock=time.time)
                 for p in plans]

    async def main() -> None:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.gather(*(ex.run_iteration(0) for ex in executors)),
                                   seconds)
    asyncio.run(main())
    return executors


def test_a_receive_no_rank_sends_to_names_its_node_and_the_sender():
    """Rank 0 receives the one message rank 1 sends, computes, then waits for a second that
    never comes: only that receive is named, not the one that completed."""
    plans = _plans({0: (Node(0, "recv", "recv act", bytes=16, peer=1),
                        Node(1, "compute", "fwd", duration=0.01, data_deps=(0,)),
                        Node(2, "recv", "recv grad", bytes=16, peer=1, data_deps=(1,))),
                    1: (Node(0, "send", "send act", bytes=16, peer=0),)}, {}, {(1, 0): 4})
    ex0, ex1 = _stall(plans)
    (wait,) = ex0.waiting()
    assert (wait["rank"], wait["iteration"], wait["node"], wait["name"], wait["kind"],
            wait["on"]) == (0, 0, 2, "recv grad", "recv", [1])
    assert ex1.waiting() == []  # its send completed: it waits in nothing


def test_a_collective_a_member_never_joins_names_the_other_members():
    """Ranks 0 and 1 all-reduce on group g = (0, 1, 2); rank 2 lists no collective."""
    ar = Node(0, "collective", "dp bucket0", collective="all_reduce", group="g", bytes=16)
    plans = _plans({0: (ar,), 1: (ar,), 2: (Node(0, "compute", duration=0.01),)},
                   {"g": (0, 1, 2)}, {})
    executors = _stall(plans)
    assert ([[(w["node"], w["group"], w["on"]) for w in ex.waiting()] for ex in executors] ==
            [[(0, "g", [1, 2])], [(0, "g", [0, 2])], []])
