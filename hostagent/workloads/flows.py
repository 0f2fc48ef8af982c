"""RDMA-style write flows as a step graph: senders writing messages to receivers back to back,
as ib_write_bw does between two NICs, over the job's transport (MRC or RoCEv2 QPs).

Patterns over a job's ranks, in rank order:
- `incast`: every rank but rank 0 writes to rank 0 (the MRC paper's N-to-1 incast);
- `pairs`: rank r writes to rank r + n/2, for r < n/2 (n/2 elephants, one to each receiver).

A message is a send node of its sender and a receive node of its receiver, of the same size.
A flow's messages follow one another on its channel (the executor runs a channel's nodes in
order, each send waiting for its receive's clear-to-send, as NCCL's point-to-point does), so
a flow has one message in flight and runs at what its path gives it; a message's time from its
send's start to its end is its completion time. `messages` are one iteration's; the next
iteration starts when a rank's nodes are all done (its receiver's too, through the
clear-to-send), so iterations bound how far flows drift apart. Every byte is verified at the
receiver as any message is.
"""
from __future__ import annotations

from typing import Literal

from hostagent.workloads.graph import Graph, GraphError, Job, Node

Pattern = Literal["incast", "pairs"]
PATTERNS: tuple[Pattern, ...] = ("incast", "pairs")


def pairs_of(pattern: Pattern, world: int) -> list[tuple[int, int]]:
    """(sender, receiver) of every flow. Raises GraphError where the ranks do not fit."""
    if world < 2:
        raise GraphError(f"flows need at least 2 ranks, not {world}")
    if pattern == "incast":
        return [(r, 0) for r in range(1, world)]
    if world % 2:
        raise GraphError(f"pairs: {world} ranks do not pair up; give an even number")
    half = world // 2
    return [(r, r + half) for r in range(half)]


def flows_job(pattern: Pattern, message: int, messages: int, world: int,
              hosts: list[str] | tuple[str, ...] = ()) -> Job:
    """Every rank's graph: its sends, then its receives, each flow's in order."""
    if messages < 1:
        raise GraphError(f"messages must be at least 1, not {messages}")
    if hosts and len(hosts) != world:
        raise GraphError(f"{world} ranks, but {len(hosts)} hosts")
    nodes: list[list[Node]] = [[] for _ in range(world)]
    for src, dst in pairs_of(pattern, world):
        for k in range(messages):
            nodes[src].append(Node(len(nodes[src]), "send", f"flow {src}->{dst} #{k}",
                                   bytes=message, peer=dst, group=f"flow{src}"))
            nodes[dst].append(Node(len(nodes[dst]), "recv", f"flow {src}->{dst} #{k}",
                                   bytes=message, peer=src, group=f"flow{src}"))
    graphs = tuple(Graph(r, tuple(nodes[r])) for r in range(world))
    return Job(world, {}, graphs, tuple(hosts), {"flows": pattern}).validate()
