"""Several jobs on one fabric: where each job's ranks are placed (pure).

A job names its hosts, or asks for a count of them by a placement rule; the rules take hosts no
earlier job holds, in the order the jobs are listed, so a file reads as an operator's scheduler
would allocate:

- `packed`: the first free hosts in host order, filling a leaf before the next (a job's ring
  stays under as few leaves as possible);
- `spread`: one free host from each leaf in turn, leaf 0, leaf 1, ... (a job on every leaf,
  every ring hop across a spine);
- `interleaved`: every other host from the first free one, skipping taken hosts (two
  interleaved jobs alternate on every leaf, sharing each leaf's uplinks).

Rank r of a job is its r-th host, in the order the hosts are given or placed.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from testbed.scenario import limits

Rule = Literal["packed", "spread", "interleaved"]


class Placement(BaseModel):
    """How many hosts a job gets, and by which rule."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    rule: Rule = Field(description="packed: fill leaves in order; spread: one host per leaf in "
                                   "turn; interleaved: every other host")
    count: int = Field(ge=2, le=limits.MAX_HOSTS, description="the job's ranks")


def place(rule: Rule, count: int, free: list[str], hosts_per_leaf: int,
          order: list[str]) -> list[str]:
    """`count` hosts of `free` by `rule`; `order` is every host of the fabric in host order
    (leaf by leaf, `hosts_per_leaf` each). Raises ValueError when they do not fit."""
    if count > len(free):
        raise ValueError(f"placement: {count} hosts asked, {len(free)} free "
                         f"({', '.join(free) or 'none'})")
    if rule == "packed":
        return free[:count]
    if rule == "spread":
        leaves = [[h for h in order[j:j + hosts_per_leaf] if h in free]
                  for j in range(0, len(order), hosts_per_leaf)]
        out: list[str] = []
        while len(out) < count:
            for leaf in leaves:
                if leaf and len(out) < count:
                    out.append(leaf.pop(0))
        return out
    start = order.index(free[0])
    taken = [h for h in order[start::2] if h in free]
    if len(taken) < count:
        raise ValueError(f"placement: interleaved from {free[0]}, every other host gives "
                         f"{len(taken)} free hosts ({', '.join(taken)}), {count} asked")
    return taken[:count]


def allocate(jobs: list[tuple[str, list[str] | None, Placement | None]],
             order: list[str], hosts_per_leaf: int) -> list[list[str]]:
    """Each job's hosts, in rank order: the hosts it names, or those its placement gives from
    the hosts no job names and no earlier job was given. Raises ValueError naming the job."""
    named = {h for _, hosts, _ in jobs for h in hosts or []}
    free = [h for h in order if h not in named]
    out = []
    for k, (name, hosts, placement) in enumerate(jobs):
        where = f"jobs.{k} ({name})"
        if hosts is not None:
            out.append(list(hosts))
            continue
        assert placement is not None
        try:
            chosen = place(placement.rule, placement.count, free, hosts_per_leaf, order)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}; fewer hosts, or a larger fabric") from None
        free = [h for h in free if h not in chosen]
        out.append(chosen)
    return out


def check(jobs: list[tuple[str, list[str] | None, Placement | None]],
          order: list[str]) -> None:
    """Names distinct, each job's hosts or placement (one of them), hosts that exist, at least
    2 ranks, no host in two jobs. Raises ValueError naming the job and the field."""
    names = [name for name, _, _ in jobs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"jobs: the name {twice[0]!r} is given to two jobs; each job's "
                         f"results are kept under its name")
    owner: dict[str, str] = {}
    for k, (name, hosts, placement) in enumerate(jobs):
        where = f"jobs.{k} ({name})"
        if (hosts is None) == (placement is None):
            raise ValueError(f"{where}: give hosts (a list) or placement (rule and count), "
                             f"one of them")
        if hosts is None:
            continue
        unknown = [h for h in hosts if h not in order]
        if unknown:
            raise ValueError(f"{where}.hosts: {unknown} are not hosts of this fabric (hosts "
                             f"are {order[0]}..{order[-1]})")
        if len(set(hosts)) != len(hosts) or len(hosts) < 2:
            raise ValueError(f"{where}.hosts: at least 2 distinct hosts (a job with fewer "
                             f"has no peer to talk to)")
        for h in hosts:
            if h in owner:
                raise ValueError(f"{where}.hosts: {h} is already a host of job "
                                 f"{owner[h]!r}; jobs share the fabric, not hosts")
            owner[h] = name

