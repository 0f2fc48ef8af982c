"""Which algorithm a collective runs, its communication pattern, and the cost model `auto` uses.

Pure functions, no IO: the collectives (collectives.py) run the patterns, the run layer resolves
`auto` with the fabric's latency and rate.

- **ring** (all-reduce, all-gather, reduce-scatter): the ring of collectives.py.
- **tree** (all-reduce): NCCL's double binary tree (src/graph/trees.cc). Tree 0 is a binary
  tree rooted at rank 0 in which, for a power-of-two rank count, every odd rank is a leaf; tree
  1 is its mirror (rank r -> n-1-r) when n is even and its shift by one rank when n is odd, so
  most ranks are interior in one tree and a leaf in the other. Each tree carries half the data:
  reduced up to its root and broadcast back down, pipelined in chunks (`tree_chunk_bytes`).
- **direct** (all-to-all): every rank writes to every peer at once, as a grouped call of
  ncclSend/ncclRecv to all peers issues them.
- **pairwise** (all-to-all): n-1 rounds; in round s rank r writes to r+s and waits for r-s
  before its next round (MPI's pairwise exchange, in the order of peers NCCL's peer-to-peer
  scheduler gives a grouped all-to-all, which lets several rounds overlap). Every receiver has
  exactly one sender per round, so no port sees an (n-1)-to-1 incast.

The cost model (`times`) is the alpha-beta model NCCL's tuning follows: a collective costs its
sequential message latencies plus the bytes its busiest NIC port sends, at the link rate.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal, get_args

Algorithm = Literal["ring", "tree", "direct", "pairwise"]
Choice = Literal["ring", "tree", "direct", "pairwise", "auto"]
CHOICES: tuple[Choice, ...] = get_args(Choice)

# The algorithms each collective has, its default first (what a workload without `algorithm`
# runs, and what it ran before the choice existed).
AVAILABLE: dict[str, tuple[Algorithm, ...]] = {
    "all_reduce": ("ring", "tree"),
    "all_gather": ("ring",),
    "reduce_scatter": ("ring",),
    "all_to_all": ("direct", "pairwise"),
}

# NCCL's Simple protocol moves a buffer slot of NCCL_BUFFSIZE / NCCL_STEPS = 4 MiB / 8 at a time;
# for trees enqueue.cc halves the chunk until each channel has about depth x 8 chunks, but not
# below 128 KiB, then depth x 4 down to 64 KiB, then depth down to 32 KiB.
_CHUNK_START = 512 * 1024
_CHUNK_RULES = ((8, 128 * 1024), (4, 64 * 1024), (1, 32 * 1024))


class AlgorithmError(ValueError):
    """An algorithm a collective does not have."""


def check(kind: str, choice: str) -> None:
    """Refuse an algorithm the collective does not have, naming the ones it has."""
    if kind not in AVAILABLE:
        raise AlgorithmError(f"unknown collective {kind!r}; known: {', '.join(AVAILABLE)}")
    if choice != "auto" and choice not in AVAILABLE[kind]:
        raise AlgorithmError(
            f"{kind} has no {choice!r} algorithm; it has "
            f"{', '.join(AVAILABLE[kind])} (or auto, which picks among them)")


def default(kind: str) -> Algorithm:
    check(kind, "auto")
    return AVAILABLE[kind][0]


@dataclass(frozen=True)
class TreeNode:
    """One rank's place in one tree: its parent (None at the root) and children (0 to 2)."""

    parent: int | None
    children: tuple[int, ...]


def binary_tree(world: int, rank: int) -> TreeNode:
    """NCCL's btree rooted at 0: a rank's lowest set bit b says its level; its parent is
    (rank ^ b) | 2b, or rank ^ b when that is out of range; its children are rank - b/2 and the
    first of rank + b/2, rank + b/4, ... that exists. Rank 0 has the single child 2^k / 2, for
    the smallest 2^k >= world."""
    if not 0 <= rank < world:
        raise ValueError(f"rank {rank} is outside 0..{world - 1}")
    bit = 1
    while bit < world and not bit & rank:
        bit <<= 1
    if rank == 0:
        return TreeNode(None, (bit >> 1,) if world > 1 else ())
    parent = (rank ^ bit) | (bit << 1)
    if parent >= world:
        parent = rank ^ bit
    low = bit >> 1
    children: list[int] = []
    if low:
        children.append(rank - low)
        while low and rank + low >= world:
            low >>= 1
        if low:
            children.append(rank + low)
    return TreeNode(parent, tuple(children))


def double_tree(world: int, rank: int) -> tuple[TreeNode, TreeNode]:
    """This rank's node in NCCL's two trees: the btree, and its mirror (even world) or its
    shift by one rank (odd world)."""
    first = binary_tree(world, rank)
    if world % 2:
        def move(r: int) -> int:
            return (r + 1) % world
        other = binary_tree(world, (rank - 1) % world)
    else:
        def move(r: int) -> int:
            return world - 1 - r
        other = binary_tree(world, world - 1 - rank)
    second = TreeNode(None if other.parent is None else move(other.parent),
                      tuple(move(c) for c in other.children))
    return first, second


@functools.lru_cache(maxsize=64)
def tree_depth(world: int) -> int:
    """Edges on the longest root-to-leaf path; the second tree is the first relabelled (mirror
    or shift), so both have this depth."""
    deepest = 0
    for rank in range(world):
        hops, node = 0, binary_tree(world, rank)
        while node.parent is not None:
            hops, node = hops + 1, binary_tree(world, node.parent)
        deepest = max(deepest, hops)
    return deepest


def tree_chunk_bytes(tree_bytes: int, depth: int) -> int:
    """The pipeline's chunk for `tree_bytes` carried by one tree of `depth` levels (NCCL's rule,
    see _CHUNK_RULES): small messages get small chunks, so the pipeline fills."""
    chunk = _CHUNK_START
    for per_level, floor in _CHUNK_RULES:
        while tree_bytes < max(depth, 1) * per_level * chunk and chunk > floor:
            chunk //= 2
    return chunk


def pairwise_rounds(world: int, rank: int) -> list[tuple[int, int]]:
    """(peer written to, peer waited for) in each of the world - 1 rounds."""
    return [((rank + s) % world, (rank - s) % world) for s in range(1, world)]


@dataclass(frozen=True)
class Fabric:
    """What the cost model knows of the fabric: a message's one-way latency between two hosts
    (propagation, switching and one packet's serialization per hop) and a host port's rate."""

    latency_s: float
    bytes_per_s: float

    def __post_init__(self) -> None:
        if self.latency_s < 0 or self.bytes_per_s <= 0:
            raise ValueError(f"a fabric needs latency >= 0 and rate > 0, not {self}")


def latency_steps(kind: str, algorithm: Algorithm, world: int) -> int:
    """Messages one after another on an iteration's longest chain, each paying a latency."""
    n = world
    if n <= 1:
        return 0
    if algorithm == "tree":
        return 2 * tree_depth(n)
    if algorithm == "direct":
        return 1
    return (2 if kind == "all_reduce" else 1) * (n - 1)  # ring; pairwise: n - 1 rounds


def port_bytes(kind: str, algorithm: Algorithm, nbytes: float, world: int) -> float:
    """Bytes the busiest rank sends in one call of `kind` over `nbytes` (the whole array)."""
    n = world
    if n <= 1:
        return 0.0
    if algorithm == "tree":  # interior in one tree (its half up once, down twice), a leaf in
        return 2 * nbytes    # the other (its half up once)
    return (2 if kind == "all_reduce" else 1) * (n - 1) / n * nbytes


def times(kind: str, nbytes: int, world: int, fabric: Fabric) -> dict[Algorithm, float]:
    """Modelled seconds of one call of `kind` over `nbytes` (the whole array) for each algorithm
    the collective has.

    ring all-reduce: 2(n-1) steps, each a latency and a block of S/n at the rate.
    tree all-reduce: the busiest rank (interior in one tree, a leaf in the other) sends the
    half it reduces up once and down twice and the other half up once: 2S at the rate, plus the
    pipeline's fill, 2 x depth chunks each a latency and a chunk's time.
    all-gather, reduce-scatter: n-1 ring steps of S/n.
    direct all-to-all: one latency and the (n-1)/n of S that leaves each rank; pairwise: n-1
    latencies and the same bytes.
    """
    check(kind, "auto")
    lat, rate = fabric.latency_s, fabric.bytes_per_s
    out: dict[Algorithm, float] = {}
    for algorithm in AVAILABLE[kind]:
        steps = latency_steps(kind, algorithm, world)
        fill = 0.0
        if algorithm == "tree" and world > 1:  # each level waits for a chunk, up and down
            fill = steps * min(tree_chunk_bytes(nbytes // 2, tree_depth(world)), nbytes / 2)
        out[algorithm] = steps * lat + (port_bytes(kind, algorithm, nbytes, world) + fill) / rate
    return out


def choose(kind: str, choice: str, nbytes: int, world: int, fabric: Fabric) -> Algorithm:
    """The algorithm to run: `choice` itself, or for `auto` the cheapest by `times` (the
    collective's default on a tie)."""
    check(kind, choice)
    if choice != "auto":
        return choice  # type: ignore[return-value]  # checked against AVAILABLE above
    modelled = times(kind, nbytes, world, fabric)
    return min(AVAILABLE[kind], key=lambda a: (modelled[a], AVAILABLE[kind].index(a)))
