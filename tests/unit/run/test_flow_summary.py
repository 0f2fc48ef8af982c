"""The summary of a flows workload, on write times worked out by hand: a flow's goodput is its
bytes over its first write's start to its last write's end, and its writes' completion times
are each write's posting to its acknowledgement (the message table's rows)."""
from __future__ import annotations

import pytest

from testbed.errors import ScenarioError
from testbed.run.flow_summary import flow_lines
from testbed.scenario import parse

TEXT = """fabric: {planes: 1, leaves_per_plane: 2, hosts_per_leaf: 2, spines_per_plane: 2,
         host_link: {rate: 10Mbit}, fabric_link: {rate: 10Mbit}}
transport: [mrc]
workload: {iterations: 1, warmup: 0, flows: {pattern: incast, message: 125KB, messages: 2}}
"""


def write(rank: int, start: float, end: float, warmup: bool = False) -> dict:
    return {"rank": rank, "peer": 0, "warmup": warmup, "size": 125_000, "start": start,
            "end": end}


def test_goodput_and_completion_times_by_hand():
    sc = parse(TEXT, "t.yaml", "t")
    messages = [write(1, 0.0, 0.2), write(1, 0.2, 0.5), write(2, 0.1, 0.5),
                write(2, 0.5, 0.9), write(3, 0.0, 1.0, warmup=True)]
    lines = flow_lines(messages, sc, "mrc").splitlines()
    # h1: 2 x 1 Mbit in 0.5 s = 4 Mbit/s; writes took 200 and 300 ms
    assert lines[0] == ("# flow h1 -> h0: 2 writes of 122 KiB, goodput 4 Mbit/s, write "
                        "completion p50 300.0 ms, p99 300.0 ms (n=2)")
    # h2: 2 Mbit in 0.8 s = 2.5 Mbit/s; the warm-up write of h3 is left out
    assert lines[1].startswith("# flow h2 -> h0: 2 writes of 122 KiB, goodput 2.5 Mbit/s")
    assert len(lines) == 3
    # together 4 Mbit in 0.9 s = 4.44 Mbit/s, of the receiver's 10 Mbit/s
    assert lines[2] == ("# Flows together       : 4.44 Mbit/s into 1 receiver, 44% of what "
                        "their ports take (10 Mbit/s each)")


@pytest.mark.parametrize(("flows", "message"), [
    ("{pattern: pairs}", "3 ranks do not pair up"),
    ("{pattern: incast, message: 1001}", "not a whole number of float32"),
    ("{pattern: ring}", "pattern"),
    ("{pattern: incast, messages: 0}", "messages"),
])
def test_flows_a_workload_cannot_take(flows, message):
    text = TEXT.replace("flows: {pattern: incast, message: 125KB, messages: 2}",
                        f"flows: {flows}, ranks: [h0, h1, h2]")
    with pytest.raises(ScenarioError, match=message):
        parse(text, "t.yaml", "t")


def test_flows_are_one_step_source_and_run_no_collective():
    with pytest.raises(ScenarioError, match="training and flows are two step sources"):
        parse(TEXT.replace("flows:", "training: {dp: 4}, flows:"), "t.yaml", "t")
    with pytest.raises(ScenarioError, match="flows run no collective"):
        parse(TEXT.replace("flows:", "algorithm: ring, flows:"), "t.yaml", "t")
