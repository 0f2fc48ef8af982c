"""RDMA-style flows as a step graph: who writes to whom (worked out by hand), one message in
flight per flow (a channel's nodes in order), and the ranks a pattern cannot take."""
from __future__ import annotations

import pytest

from hostagent.workloads.flows import flows_job, pairs_of
from hostagent.workloads.graph import GraphError


def test_an_incast_writes_every_rank_to_rank_0():
    assert pairs_of("incast", 4) == [(1, 0), (2, 0), (3, 0)]


def test_pairs_write_the_first_half_to_the_second():
    assert pairs_of("pairs", 6) == [(0, 3), (1, 4), (2, 5)]


@pytest.mark.parametrize(("pattern", "world", "message"), [
    ("pairs", 5, "do not pair up"), ("incast", 1, "at least 2 ranks")])
def test_ranks_a_pattern_cannot_take(pattern, world, message):
    with pytest.raises(GraphError, match=message):
        pairs_of(pattern, world)


def test_each_message_is_a_send_and_its_receive_in_channel_order():
    job = flows_job("incast", 4096, 3, 3, ["h0", "h1", "h2"])
    receiver, sender = job.graphs[0], job.graphs[2]
    assert [(n.kind, n.peer, n.bytes) for n in sender.nodes] == [("send", 0, 4096)] * 3
    assert [(n.kind, n.peer) for n in receiver.nodes] == [("recv", 1)] * 3 + [("recv", 2)] * 3
    assert job.channels() == {(1, 0): 1024, (2, 0): 1024}
    # a flow's k-th message waits for its (k-1)-th: one in flight, back to back
    assert sender.predecessors() == {0: (), 1: (0,), 2: (1,)}
    # two flows into one receiver are two channels: neither waits for the other
    assert receiver.predecessors()[3] == ()
