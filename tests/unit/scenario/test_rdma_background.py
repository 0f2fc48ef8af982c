"""`background` patterns of `kind: rdma`: each a job of flows on hosts of its own beside the
workload's job, sized by hand, and the patterns that cannot run so, one error each."""
from __future__ import annotations

import pytest

from testbed.errors import ScenarioError
from testbed.scenario import parse

FABRIC = ("fabric: {planes: 2, leaves_per_plane: 4, hosts_per_leaf: 2, spines_per_plane: 2,\n"
          "         host_link: {rate: 10Mbit}, fabric_link: {rate: 10Mbit}}\n")
INCAST = ("background:\n  - {pattern: incast, at: 0.5, duration: 2, kind: rdma, receiver: h0,"
          " senders: [h5, h6, h7], message: 250KB}\n")


def test_an_rdma_incast_is_a_job_beside_the_workloads():
    sc = parse(FABRIC + "workload: {size: 64KiB, ranks: [h1, h2]}\n" + INCAST, "t.yaml", "t")
    workload, incast = sc.jobs
    assert (workload.name, workload.hosts, workload.workload.size) == ("workload",
                                                                     ["h1", "h2"], 65536)
    assert (incast.name, incast.hosts, incast.start) == ("background-0",
                                                         ["h0", "h5", "h6", "h7"], 0.5)
    # h0's 2 planes x 10 Mbit/s for 2 s = 5 MB, over 3 flows = 1.67 MB each: 7 writes of 250 KB
    flows = incast.workload.flows
    assert (flows.pattern, flows.message, flows.messages) == ("incast", 250_000, 7)
    assert sc.background == []


def test_the_workload_of_every_host_leaves_the_flows_theirs():
    text = (FABRIC + "workload: {size: 64KiB}\nbackground:\n  - {pattern: elephant, at: 0, "
            "duration: 1, kind: rdma, src: h6, dst: h7}\n  - {pattern: incast, at: 0, "
            "duration: 1, kind: tcp, receiver: h0}\n")
    sc = parse(text, "t.yaml", "t")
    assert sc.jobs[0].hosts == ["h0", "h1", "h2", "h3", "h4", "h5"]
    assert sc.jobs[1].hosts == ["h6", "h7"] and sc.jobs[1].workload.flows.pattern == "pairs"
    # 20 Mbit/s for 1 s = 2.5 MB in 256 KiB writes: 10 of them
    assert sc.jobs[1].workload.flows.messages == 10
    assert [b.kind for b in sc.background] == ["tcp"]  # an iperf3 pattern stays one


@pytest.mark.parametrize(("text", "message"), [
    (FABRIC + "workload: {ranks: [h0, h1]}\n" + INCAST, r"\['h0'\] are ranks of the workload"),
    (FABRIC + INCAST.replace(" senders: [h5, h6, h7],", ""), "names its receiver and its senders"),
    (FABRIC + "background:\n  - {pattern: permutation, duration: 1, kind: rdma}\n",
     "an RDMA permutation would run on the workload's hosts"),
    (FABRIC + INCAST.replace("message: 250KB", "plane: 1"), "does not take plane"),
    (FABRIC + INCAST.replace("message: 250KB", "rate: 1Mbit"), "does not take rate"),
    (FABRIC + "jobs: [{name: a, hosts: [h1, h2]}]\n" + INCAST, "kind rdma beside jobs"),
    (FABRIC.replace("rate: 10Mbit}, fabric", "rate: auto}, fabric") + INCAST,
     "fabric.host_link.rate is auto"),
    (FABRIC + INCAST + "  - {pattern: elephant, duration: 1, kind: rdma, src: h5, dst: h4}\n",
     r"\['h5'\] already send or receive"),
    (FABRIC + "background: [{pattern: elephant, duration: 1, src: h1, dst: h2, "
     "message: 1KiB}]\n", "message is an RDMA pattern's"),
])
def test_each_pattern_that_cannot_run_as_rdma_flows_is_one_error(text, message):
    with pytest.raises(ScenarioError, match=message) as caught:
        parse(text, "t.yaml", "t")
    assert "1 problem" in str(caught.value)
