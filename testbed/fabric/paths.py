"""The EV table: for every ordered host pair, every path MRC can spray on.

A path is (plane, spine), and a packet is steered onto it by its IPv6 destination:
`<block p>:<uN spine>:<uN dst leaf>:<uN dst>::`, each router shifting its own uSID out. Hosts
on the same leaf have one path per plane, `<block p>:<uN leaf>:<uN dst>::`. Static and
stateless in the fabric, as in production MRC. A QP's entropy values (EVs) map onto these
paths, one each by default or several (`entropy_values`).
"""
from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from ipaddress import IPv6Address

from testbed.fabric.plan import FabricPlan, usid_address


@dataclass(frozen=True)
class EV:
    src: str
    dst: str
    plane: int
    spine: int | None  # None: same leaf, no spine on the path
    address: IPv6Address  # the uSID destination that steers a packet onto this path
    hops: tuple[str, ...]  # node names, src first

    @property
    def label(self) -> str:
        return f"p{self.plane}" + (f"s{self.spine}" if self.spine is not None else "-local")

    def directed_links(self) -> list[tuple[str, str]]:
        return list(zip(self.hops, self.hops[1:], strict=False))

    def sid_routers(self) -> tuple[str, ...]:
        """The routers whose End SID this EV's packets execute (all but the source leaf)."""
        return self.hops[1:-1] if self.spine is None else self.hops[2:-1]


def ev(plan: FabricPlan, src: str, dst: str, plane: int, spine: int | None) -> EV:
    src_leaf, dst_leaf = plan.leaf_of(src, plane), plan.leaf_of(dst, plane)
    n = plan.nodes
    if spine is None:
        if src_leaf != dst_leaf:
            raise ValueError(f"{src} and {dst} are not on the same leaf")
        return EV(src, dst, plane, None,
                  usid_address(plane, (n[dst_leaf].usid, n[dst].usid)), (src, src_leaf, dst))
    spine_name = plan.spines[plane][spine]
    return EV(src, dst, plane, spine,
              usid_address(plane, (n[spine_name].usid, n[dst_leaf].usid, n[dst].usid)),
              (src, src_leaf, spine_name, dst_leaf, dst))


def evs(plan: FabricPlan, src: str, dst: str) -> list[EV]:
    """Every path from src to dst, plane-major (index = plane x spines + spine)."""
    same_leaf = plan.leaf_index(src) == plan.leaf_index(dst)
    spines = [None] if same_leaf else range(plan.scenario.fabric.spines_per_plane)
    return [ev(plan, src, dst, p, s) for p in range(plan.planes) for s in spines]


def entropy_values(plan: FabricPlan, src: str, dst: str, per_path: int = 1) -> list[EV]:
    """A QP's EV table toward dst: EV i takes path i mod P (P paths, `evs` order), so every
    path has `per_path` EVs and each turn through the table crosses every path once.

    Why more EVs than paths: in a NIC an EV is a hash input, and production NICs keep far
    more of them than a pair has paths, so toward a host of the same leaf (one path a plane)
    several EVs share each plane's path. Condemning one then takes a share of the path away,
    not the whole plane."""
    table = evs(plan, src, dst)
    return [table[i % len(table)] for i in range(len(table) * per_path)]


def pairs(plan: FabricPlan) -> Iterator[tuple[str, str]]:
    return ((a, b) for a in plan.hosts for b in plan.hosts if a != b)


def all_evs(plan: FabricPlan) -> Iterator[EV]:
    for src, dst in pairs(plan):
        yield from evs(plan, src, dst)


def ev_count(plan: FabricPlan) -> int:
    f = plan.scenario.fabric
    h, per = f.host_count, f.hosts_per_leaf
    same = sum(k * (k - 1) for k in (min(per, h - j * per) for j in range(f.leaves_per_plane)))
    return f.planes * (same + (h * (h - 1) - same) * f.spines_per_plane)


def fabric_directed_links(plan: FabricPlan) -> set[tuple[str, str]]:
    out = set()
    for link in plan.links:
        out.add((link.lower.node, link.upper.node))
        out.add((link.upper.node, link.lower.node))
    return out


def covering_sample(plan: FabricPlan, seed: int) -> list[EV]:
    """A small set of EVs that crosses every link in both directions and every End SID.

    Why not all EVs: their number grows as hosts^2 x planes x spines. This sample grows as
    hosts x planes x spines: from every host, on every plane and spine, one EV to a host on
    another leaf chosen at random (seeded), then one EV per link direction still uncovered,
    and one same-leaf EV per leaf and plane so the local uSID kind is proven too.
    """
    rng = random.Random(seed)
    f = plan.scenario.fabric
    chosen: dict[tuple[object, ...], EV] = {}

    def take(e: EV) -> None:
        chosen[(e.src, e.dst, e.plane, e.spine)] = e

    for src in plan.hosts:
        others = [h for h in plan.hosts if plan.leaf_index(h) != plan.leaf_index(src)]
        for p in range(f.planes):
            if others:
                for s in range(f.spines_per_plane):
                    take(ev(plan, src, rng.choice(others), p, s))
    for p in range(f.planes):
        for leaf in plan.leaves[p]:
            local = plan.hosts_of_leaf(leaf)
            if len(local) >= 2:
                a, b = rng.sample(local, 2)
                take(ev(plan, a, b, p, None))
    covered = {link for e in chosen.values() for link in e.directed_links()}
    for a, b in sorted(fabric_directed_links(plan) - covered):
        e = _ev_through(plan, a, b)
        take(e)
        covered.update(e.directed_links())
    return list(chosen.values())


def _ev_through(plan: FabricPlan, a: str, b: str) -> EV:
    """Some EV whose path includes the directed link a -> b."""
    na, nb = plan.nodes[a], plan.nodes[b]
    p = na.plane if na.plane is not None else nb.plane
    assert p is not None  # one end of every link is a router, which has a plane
    for e in _evs_in_plane(plan, p):
        if (a, b) in e.directed_links():
            return e
    raise ValueError(f"no EV crosses {a} -> {b}")


def _evs_in_plane(plan: FabricPlan, plane: int) -> Iterator[EV]:
    for src, dst in pairs(plan):
        if plan.leaf_index(src) == plan.leaf_index(dst):
            yield ev(plan, src, dst, plane, None)
        else:
            for s in range(plan.scenario.fabric.spines_per_plane):
                yield ev(plan, src, dst, plane, s)
