"""The algorithms' patterns (NCCL's double binary tree, the pairwise rounds) and the cost model
that `auto` picks by."""
from __future__ import annotations

import pytest

from hostagent.workloads import algorithms as alg


@pytest.mark.parametrize("world", [1, 2, 3, 4, 5, 7, 8, 12, 13, 14, 16, 31, 64, 100])
def test_both_trees_span_every_rank_once(world: int) -> None:
    for tree in (0, 1):
        nodes = [alg.double_tree(world, r)[tree] for r in range(world)]
        roots = [r for r, n in enumerate(nodes) if n.parent is None]
        assert len(roots) == 1
        for rank, node in enumerate(nodes):
            assert len(node.children) <= 2
            for child in node.children:
                assert nodes[child].parent == rank  # a parent and its child agree
            seen = {rank}
            while nodes[rank].parent is not None:  # every rank reaches the root, no cycle
                rank = nodes[rank].parent
                assert rank not in seen
                seen.add(rank)
            assert rank == roots[0]


@pytest.mark.parametrize("world", [2, 3, 4, 13, 14, 16])
def test_roots_are_ncclgetdtreeroots(world: int) -> None:
    """NCCL: the first tree's root is 0; the second's is 1 for an odd count, else n - 1."""
    roots = [next(r for r in range(world) if alg.double_tree(world, r)[t].parent is None)
             for t in (0, 1)]
    assert roots == [0, 1 if world % 2 else world - 1]


def test_btree_of_fourteen_ranks_is_nccls_illustration() -> None:
    """trees.cc draws it: 0-8; 8: 4, 12; 4: 2, 6; 12: 10, 13; 10: 9, 11; 2: 1, 3; 6: 5, 7."""
    want = {0: (8,), 8: (4, 12), 4: (2, 6), 12: (10, 13), 10: (9, 11), 2: (1, 3), 6: (5, 7)}
    for rank in range(14):
        assert alg.binary_tree(14, rank).children == want.get(rank, ())


def test_a_power_of_two_splits_interior_ranks_between_the_trees() -> None:
    """The point of the double tree: with 16 ranks no rank is interior in both, so no NIC
    carries two trees' fan-in."""
    interior = [{r for r in range(16) if alg.double_tree(16, r)[t].children} for t in (0, 1)]
    assert not interior[0] & interior[1]
    assert interior[0] | interior[1] == set(range(16))


@pytest.mark.parametrize(("world", "depth"), [(1, 0), (2, 1), (3, 2), (4, 2), (8, 3), (16, 4),
                                              (17, 5), (64, 6)])
def test_depth(world: int, depth: int) -> None:
    assert alg.tree_depth(world) == depth


def test_pairwise_rounds_pair_every_sender_with_one_receiver() -> None:
    world = 6
    rounds = [alg.pairwise_rounds(world, r) for r in range(world)]
    for s in range(world - 1):
        to = [rounds[r][s][0] for r in range(world)]
        assert sorted(to) == list(range(world))  # each rank receives from exactly one
        for r in range(world):
            assert rounds[to[r]][s][1] == r  # and waits for the one that writes to it
    assert {p for p, _ in rounds[2]} == {0, 1, 3, 4, 5}


def test_chunks_shrink_for_small_messages_within_nccls_bounds() -> None:
    assert alg.tree_chunk_bytes(1 << 30, 6) == 512 * 1024
    assert alg.tree_chunk_bytes(4096, 6) == 32 * 1024
    mid = alg.tree_chunk_bytes(6 * 8 * 256 * 1024, 6)
    assert mid == 256 * 1024


def test_auto_picks_tree_where_latency_dominates_and_ring_where_it_does_not() -> None:
    slow = alg.Fabric(latency_s=10e-6, bytes_per_s=12.5e9)
    assert alg.choose("all_reduce", "auto", 64 * 1024, 64, slow) == "tree"
    no_latency = alg.Fabric(latency_s=0.0, bytes_per_s=12.5e9)
    assert alg.choose("all_reduce", "auto", 64 << 20, 64, no_latency) == "ring"
    assert alg.choose("all_to_all", "auto", 1 << 20, 8, slow) == "direct"
    assert alg.choose("all_reduce", "tree", 1 << 30, 2, no_latency) == "tree"  # as asked


def test_ring_time_is_its_steps() -> None:
    fabric = alg.Fabric(latency_s=1e-6, bytes_per_s=1e9)
    t = alg.times("all_reduce", 8000, 4, fabric)["ring"]
    assert t == pytest.approx(6 * (1e-6 + 2000 / 1e9))


@pytest.mark.parametrize(("kind", "choice"), [("all_gather", "tree"), ("all_to_all", "ring"),
                                              ("all_reduce", "pairwise"), ("bcast", "ring")])
def test_an_algorithm_the_collective_lacks_is_refused_by_name(kind: str, choice: str) -> None:
    with pytest.raises(alg.AlgorithmError, match=kind):
        alg.check(kind, choice)


def test_defaults_are_what_ran_before_the_choice() -> None:
    assert [alg.default(k) for k in ("all_reduce", "all_gather", "reduce_scatter",
                                     "all_to_all")] == ["ring", "ring", "ring", "direct"]
