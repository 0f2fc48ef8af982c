"""Step graphs: each kind of bad graph is refused with its rank, node id and field named."""
from __future__ import annotations

import pytest

from hostagent.workloads.graph import Graph, GraphError, Job, Node, RankPlan


def coll(nid: int, group: str = "all", nbytes: int = 64, kind: str = "all_reduce",
         deps: tuple[int, ...] = ()) -> Node:
    return Node(nid, "collective", collective=kind, group=group, bytes=nbytes, data_deps=deps)


def job(*per_rank: list[Node], groups: dict | None = None) -> Job:
    world = len(per_rank)
    return Job(world, groups if groups is not None else {"all": tuple(range(world))},
               tuple(Graph(r, tuple(nodes)) for r, nodes in enumerate(per_rank)))


def test_a_valid_job_round_trips_through_its_plan():
    nodes = [Node(1, "compute", duration=0.01), coll(2, deps=(1,)),
             Node(3, "compute", duration=0.02, ctrl_deps=(2,))]
    j = job(nodes, nodes).validate()
    plan = j.plan(1)
    assert RankPlan.from_dict(plan.to_dict()) == plan
    assert plan.capacities == {"all": 16}
    assert [n.id for n in plan.graph.order()] == [1, 2, 3]


def test_missing_dependency_names_the_node():
    with pytest.raises(GraphError, match=r"rank 0, node 5: depends on node 9"):
        job([Node(5, "compute", data_deps=(9,))]).validate()


def test_cycle_names_its_nodes():
    nodes = [Node(1, "compute", data_deps=(3,)), Node(2, "compute", data_deps=(1,)),
             Node(3, "compute", ctrl_deps=(2,)), Node(4, "compute")]
    with pytest.raises(GraphError, match=r"cycle through nodes (\d) -> (\d) -> (\d) -> \1"):
        job(nodes).validate()
    with pytest.raises(GraphError) as err:
        job(nodes).validate()
    assert "4" not in str(err.value).split("nodes")[1].split("(")[0]


def test_stream_order_against_the_dependencies_is_a_cycle():
    """Collective 1 is listed first on the group but waits for collective 2: it would never
    run, since a group runs its collectives in list order."""
    nodes = [coll(1, deps=(2,)), coll(2)]
    with pytest.raises(GraphError, match="cycle through nodes"):
        job(nodes, nodes).validate()


@pytest.mark.parametrize(("node", "field"), [
    (Node(1, "compute", duration=-1.0), "duration"),
    (coll(1, group="nope"), "group 'nope' is not a known group"),
    (coll(1, nbytes=6), "bytes 6"),
    (coll(1, kind="broadcast"), "collective 'broadcast'"),
    (Node(1, "send", bytes=4, peer=0), "peer 0 is not another rank"),
    (Node(1, "recv", bytes=4, peer=7), "peer 7"),
    (Node(1, "wait"), "kind 'wait'"),
])
def test_bad_node_fields(node, field):
    with pytest.raises(GraphError, match=f"rank 0, node 1: {field}"):
        job([node], [], groups={"all": (0, 1)}).validate()


def test_duplicate_id():
    with pytest.raises(GraphError, match="node 1: id 1 is used twice"):
        job([Node(1, "compute"), Node(1, "compute")]).validate()


def test_group_must_hold_the_rank():
    with pytest.raises(GraphError, match=r"rank 1, node 1: group 'g' \[0\] does not hold rank 1"):
        job([], [coll(1, group="g")], groups={"g": (0,)}).validate()


def test_group_with_unknown_ranks():
    with pytest.raises(GraphError, match=r"group 'g': ranks \[0, 5\].*\[5\] are not"):
        job([], [], groups={"g": (0, 5)}).validate()


def test_mismatched_collectives_across_ranks():
    with pytest.raises(GraphError, match=r"group 'all', collective #1: rank 0, node 2 is "
                                         r"all_reduce of 64 B but rank 1, node 2 is all_reduce "
                                         r"of 128 B"):
        job([coll(1), coll(2)], [coll(1), coll(2, nbytes=128)]).validate()
    with pytest.raises(GraphError, match="rank 0 lists 2 collectives, rank 1 lists 1"):
        job([coll(1), coll(2)], [coll(1)]).validate()


def test_mismatched_channel():
    send = Node(1, "send", bytes=8, peer=1)
    with pytest.raises(GraphError, match=r"channel 0 -> 1, message #0: rank 0, node 1 sends "
                                         r"8 B, rank 1, node 1 receives 4 B"):
        job([send], [Node(1, "recv", bytes=4, peer=0)]).validate()
    with pytest.raises(GraphError, match="channel 0 -> 1: rank 0 sends 1 messages, rank 1 "
                                         "receives 0"):
        job([send], []).validate()
