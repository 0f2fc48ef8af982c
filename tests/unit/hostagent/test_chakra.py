"""Chakra traces: read traces made by Chakra's own tools and by our writer; bad input gets one
error naming the file, the node and the field. The fixtures in data/chakra come from
mlcommons/chakra's tools (data/chakra/README.md says how they were made)."""
from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from hostagent.workloads import chakra
from hostagent.workloads.chakra import TraceError, encode_node, read_job
from hostagent.workloads.training import TrainingSpec, training_job

from .test_steps import run_job

DATA = Path(__file__).parent / "data" / "chakra"
HOSTS = ["h0", "h1", "h2", "h3"]


def test_reads_the_text_converters_data_parallel_trace():
    """dp.txt: 3 layers (fwd 2000 us; bwd input-grad and weight-grad 3000 us each; weight-grad
    all-reduce of 65536, 65536 and 32768 B), 2 passes: per pass 3 fwd + 3 wg + 2 ig compute
    (the first layer has no input-gradient) and 3 all-reduces, last layer first."""
    job = read_job(DATA / "dp", HOSTS)
    assert job.world == 4 and job.groups == {"all": (0, 1, 2, 3)}
    assert job.placement == tuple(HOSTS)
    for graph in job.graphs:
        compute = [n for n in graph.nodes if n.kind == "compute"]
        colls = [n for n in graph.nodes if n.kind == "collective"]
        assert len(graph.nodes) == 2 * (8 + 3)
        assert sum(n.duration for n in compute) == pytest.approx(2 * (3 * 0.002 + 5 * 0.003))
        assert [n.bytes for n in colls] == [32768, 65536, 65536] * 2
        assert {n.collective for n in colls} == {"all_reduce"}
        # a layer's all-reduce waits on its weight-gradient; the next input-gradient does not
        # wait on the all-reduce: communication overlaps compute
        by_name = {n.name: n for n in graph.nodes[:11]}
        wg, ar = by_name["COMP_NODE_layer2_BWD_WG"], by_name["COMM_COLL_NODE_layer2_ALLREDUCE"]
        assert ar.data_deps == (wg.id,)
        assert by_name["COMP_NODE_layer2_BWD_IG"].data_deps == (wg.id,)


def test_the_text_converters_trace_replays_verified():
    records = run_job(read_job(DATA / "dp", HOSTS), iterations=1, scale=0.01)
    assert len(records) == 4 * 22
    assert [r.error for r in records if not r.verified] == []


PYTORCH = DATA / "pytorch.0.et"  # data/chakra/README.md: what it is, what Chakra reads in it


def test_reads_chakras_pytorch_trace_dropping_its_absent_ctrl_deps():
    """Chakra's protobuf reader finds 3 ctrl_deps on absent nodes in the fixture, (216, 3),
    (217, 3), (430, 429), and every data_dep present: the ctrl_deps go, the data_deps stay."""
    job = read_job(PYTORCH, ["h"])
    assert job.meta["ctrl_deps_dropped"] == [3]
    nodes = job.graphs[0].nodes
    assert [(n.id, n.kind, n.data_deps, n.ctrl_deps) for n in nodes] == [
        (216, "compute", (), ()), (217, "compute", (216,), ()), (430, "compute", (216,), ())]
    # the host ops (is_cpu_op) are zero-length steps by default; the kernel 430 runs 4 us
    assert [n.duration for n in nodes] == [0.0, 0.0, 4e-6]


def test_chakras_pytorch_trace_replays_on_every_rank():
    job = read_job(PYTORCH, HOSTS, replicate=True)
    assert job.meta["ctrl_deps_dropped"] == [3] * 4
    records = run_job(job, iterations=1, scale=0.01)
    assert len(records) == 4 * 3
    assert [r.error for r in records if not r.verified] == []


def test_chakras_pytorch_trace_with_a_data_dep_on_the_node_its_converter_left_out(tmp_path):
    """Node 3 (the one 216 and 217 name in ctrl_deps) named in a data_dep instead."""
    head = gzip.decompress(PYTORCH.read_bytes())
    (tmp_path / "p.0.et").write_bytes(head + chakra.delimited(comp(999, data_deps=(3,))))
    with pytest.raises(TraceError, match=r"p\.0\.et: node 999 \(k999\): field data_deps "
                                         r"names node 3, which this file does not have"):
        read_job(tmp_path / "p", ["h"])


def test_a_corrupt_copy_of_chakras_pytorch_trace(tmp_path):
    """Cut inside node 430's message, and as a gzip stream cut short: one error each, naming
    the file."""
    head = gzip.decompress(PYTORCH.read_bytes())
    (tmp_path / "p.0.et").write_bytes(head[:-100])
    with pytest.raises(TraceError, match=r"p\.0\.et: message at byte \d+: truncated"):
        read_job(tmp_path / "p", ["h"])
    (tmp_path / "p.0.et").write_bytes(PYTORCH.read_bytes()[:-20])
    with pytest.raises(TraceError, match=r"p\.0\.et: cannot read: Compressed file ended"):
        read_job(tmp_path / "p", ["h"])


def test_decodes_every_scalar_attribute_of_the_generators_metadata_node():
    """The values chakra's generator.py writes in one_metadata_node_all_types."""
    version, nodes = chakra.decode(chakra.read_file(DATA / "one_metadata_node_all_types.0.et"),
                                   "f")
    assert version == "1.0.0" and len(nodes) == 1
    a = nodes[0].attrs
    assert a["double"] == 1.2345 and a["float"] == pytest.approx(1.2345, rel=1e-7)
    assert (a["int32"], a["int64"], a["uint32"], a["uint64"]) == (12345, 9876543210, 12345,
                                                                  9876543210)
    assert (a["sint32"], a["sint64"], a["sfixed32"], a["sfixed64"]) == (-12345, -9876543210,
                                                                        -12345, -9876543210)
    assert (a["fixed32"], a["fixed64"]) == (12345, 9876543210)
    assert (a["bool"], a["string"], a["bytes"]) == (True, "12345", b"12345")


def test_generator_collectives_barrier_and_memory_nodes():
    """Generated with --default_comm_size 65536: an all-to-all of 65536 B; a barrier is a
    4-byte all-reduce; a memory load has no network meaning (a zero-length step)."""
    (a2a,) = read_job(DATA / "ALL_TO_ALL", HOSTS).graphs[2].nodes
    assert (a2a.kind, a2a.collective, a2a.bytes, a2a.group) == ("collective", "all_to_all",
                                                                 65536, "all")
    (barrier,) = read_job(DATA / "BARRIER", HOSTS).graphs[0].nodes
    assert (barrier.collective, barrier.bytes) == ("all_reduce", 4)
    (load,) = read_job(DATA / "one_remote_mem_load_node", HOSTS).graphs[0].nodes
    assert (load.kind, load.duration) == ("compute", 0.0)


def test_gzip_traces_read_alike(tmp_path):
    for r in range(4):
        (tmp_path / f"dp.{r}.et").write_bytes(gzip.compress((DATA / f"dp.{r}.et").read_bytes()))
    assert read_job(tmp_path / "dp", HOSTS).graphs == read_job(DATA / "dp", HOSTS).graphs


def test_one_rank_replayed_on_every_rank_needs_the_option():
    with pytest.raises(TraceError, match="the trace has 1 ranks, the workload 4"):
        read_job(DATA / "one_metadata_node_all_types.0.et", HOSTS)
    job = read_job(DATA / "dp.0.et", HOSTS, replicate=True)
    assert job.world == 4 and all(g.nodes == job.graphs[0].nodes for g in job.graphs)


def spec() -> TrainingSpec:
    return TrainingSpec(dp=2, tp=1, pp=2, layers=4, layer_bytes=4096, activation_bytes=1024,
                        micro_batches=2, forward=0.003, backward=0.004, bucket_bytes=4096)


def test_our_writer_round_trips_a_training_step(tmp_path):
    job = training_job(spec(), HOSTS)
    files = chakra.write_job(job, tmp_path / "step")
    assert [f.name for f in files] == [f"step.{r}.et" for r in range(4)] + ["step.groups.json"]
    back = read_job(tmp_path / "step", HOSTS, groups=tmp_path / "step.groups.json")
    assert back.groups == job.groups
    assert back.graphs == job.graphs


def test_cpu_ops_are_skipped_or_timed(tmp_path):
    node = encode_node(1, "host op", chakra.COMP_NODE, duration_micros=2500,
                       attrs={"is_cpu_op": True})
    trace(tmp_path, [node])
    assert read_job(tmp_path / "t", ["h"]).graphs[0].nodes[0].duration == 0.0
    assert (read_job(tmp_path / "t", ["h"], cpu_ops="compute").graphs[0].nodes[0].duration
            == 0.0025)


# ---- bad input ----
def trace(tmp: Path, *ranks: list[bytes], name: str = "t") -> Path:
    for r, nodes in enumerate(ranks):
        (tmp / f"{name}.{r}.et").write_bytes(
            chakra.delimited(b"\x0a\x050.0.4") + b"".join(chakra.delimited(n) for n in nodes))
    return tmp / name


def coll(nid: int, size: int = 64, comm_type: int = 0, pg: str | None = None, **kw) -> bytes:
    attrs: dict = {"comm_type": comm_type, "comm_size": size}
    if pg:
        attrs["pg_name"] = pg
    return encode_node(nid, f"c{nid}", chakra.COMM_COLL_NODE, attrs=attrs, **kw)


def comp(nid: int, **kw) -> bytes:
    return encode_node(nid, f"k{nid}", chakra.COMP_NODE, duration_micros=10, **kw)


def test_truncated_message_names_the_file_and_byte(tmp_path):
    path = trace(tmp_path, [comp(1), comp(2)])
    file = tmp_path / "t.0.et"
    file.write_bytes(file.read_bytes()[:-1])
    with pytest.raises(TraceError, match=r"t\.0\.et: message at byte \d+: truncated"):
        read_job(path, ["h"])


def test_corrupt_varint_and_oversized_length(tmp_path):
    file = tmp_path / "t.0.et"
    file.write_bytes(chakra.delimited(b"") + chakra.delimited(b"\x08" + b"\xff" * 11))
    with pytest.raises(TraceError, match=r"t\.0\.et: message at byte 1 \(node #0\): corrupt "
                                         r"varint"):
        read_job(tmp_path / "t", ["h"])
    file.write_bytes(chakra.delimited(b"") + chakra._uvarint(2**31) + b"\x00" * 8)
    with pytest.raises(TraceError, match=r"length 2147483648 B is above the limit"):
        read_job(tmp_path / "t", ["h"])
    file.write_bytes(chakra.delimited(b"") + b"\x81\x80\x80\x80\x80\x00" + b"\x00")
    with pytest.raises(TraceError, match=r"message at byte 1: corrupt length"):
        read_job(tmp_path / "t", ["h"])


def test_node_count_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(chakra, "MAX_NODES", 3)
    with pytest.raises(TraceError, match=r"t\.0\.et: more than the limit of 3 nodes"):
        read_job(trace(tmp_path, [comp(i) for i in range(4)]), ["h"])


def test_absent_ctrl_deps_are_dropped_and_counted_per_rank(tmp_path):
    """Three ctrl_deps on absent nodes in rank 0 (two of one node, beside a present one that
    stays), none in rank 1."""
    path = trace(tmp_path, [comp(1), comp(2, ctrl_deps=(7, 1, 9)), comp(3, ctrl_deps=(8,))],
                 [comp(1), comp(2, ctrl_deps=(1,))])
    job = read_job(path, ["a", "b"])
    assert job.meta["ctrl_deps_dropped"] == [3, 0]
    assert [n.ctrl_deps for n in job.graphs[0].nodes] == [(), (1,), ()]
    assert [n.ctrl_deps for n in job.graphs[1].nodes] == [(), (1,)]


def test_a_data_dep_on_an_absent_node_names_file_node_and_fix(tmp_path):
    path = trace(tmp_path, [comp(1), comp(2, data_deps=(1, 7))])
    with pytest.raises(TraceError, match=r"t\.0\.et: node 2 \(k2\): field data_deps names "
                                         r"node 7, which this file does not have; Chakra's "
                                         r"feeder would never issue this node .*: convert the "
                                         r"trace again, or remove 7 from the node's data_deps"):
        read_job(path, ["h"])


def test_dependency_cycle(tmp_path):
    path = trace(tmp_path, [comp(1, data_deps=(2,)), comp(2, data_deps=(1,))])
    with pytest.raises(TraceError, match=r"rank 0: dependency cycle through nodes"):
        read_job(path, ["h"])


def test_group_with_unknown_ranks(tmp_path):
    path = trace(tmp_path, [coll(1, pg="0")], [coll(1, pg="0")])
    groups = tmp_path / "g.json"
    groups.write_text(json.dumps({"0": [0, 1, 2]}))
    with pytest.raises(TraceError, match=r"g\.json: group '0' names ranks \[2\]"):
        read_job(path, ["a", "b"], groups=groups)
    groups.write_text(json.dumps({"1": [0, 1]}))
    with pytest.raises(TraceError, match=r"g\.json: no group '0'.*field pg_name"):
        read_job(path, ["a", "b"], groups=groups)


def test_mismatched_collectives_across_ranks(tmp_path):
    path = trace(tmp_path, [coll(1, size=64)], [coll(5, size=128)])
    with pytest.raises(TraceError, match=r"group 'all', collective #0: rank 0, node 1 .* is "
                                         r"all_reduce of 64 B but rank 1, node 5"):
        read_job(path, ["a", "b"])


def test_collective_without_a_counterpart_and_bad_size(tmp_path):
    with pytest.raises(TraceError, match=r"node 1 \(c1\): field comm_type BROADCAST"):
        read_job(trace(tmp_path, [coll(1, comm_type=5)]), ["h"])
    with pytest.raises(TraceError, match=r"node 1 \(c1\): field comm_size is -4"):
        read_job(trace(tmp_path, [coll(1, size=-4)]), ["h"])
    with pytest.raises(TraceError, match=r"node 1 \(c1\): field comm_size is 2147483648"):
        read_job(trace(tmp_path, [coll(1, size=2**31)]), ["h"])


def test_send_without_a_peer_from_chakras_generator():
    with pytest.raises(TraceError, match=r"one_comm_send_node\.0\.et: node \d+ "
                                         r"\(COMM_SEND_NODE\): field comm_dst is missing"):
        read_job(DATA / "one_comm_send_node.0.et", HOSTS, replicate=True)


def test_mismatched_tags(tmp_path):
    def p2p(nid: int, kind: int, tag: int) -> bytes:
        return encode_node(nid, "m", kind, attrs={"comm_src": 0, "comm_dst": 1,
                                                  "comm_size": 64, "comm_tag": tag})
    path = trace(tmp_path, [p2p(1, chakra.COMM_SEND_NODE, 3)], [p2p(1, chakra.COMM_RECV_NODE, 4)])
    with pytest.raises(TraceError, match=r"channel 0 -> 1, message #0: .*t\.0\.et sends field "
                                         r"comm_tag 3, .*t\.1\.et receives comm_tag 4"):
        read_job(path, ["a", "b"])


def test_ranks_without_a_file(tmp_path):
    trace(tmp_path, [comp(1)], [comp(1)], [comp(1)])
    (tmp_path / "t.1.et").unlink()
    with pytest.raises(TraceError, match=r"ranks \[1\] have no file"):
        read_job(tmp_path / "t", ["a", "b", "c"])


def test_unpacked_deps_and_a_field_past_its_message(tmp_path):
    """Deps written one field each (proto2's unpacked encoding) read as a list; a string
    field whose length runs past its message is corrupt, not read from the next one."""
    unpacked = encode_node(3, "k3", chakra.COMP_NODE) + b"\x28\x01\x28\x02"  # data_deps 1, 2
    path = trace(tmp_path, [comp(1), comp(2), unpacked])
    assert read_job(path, ["h"]).graphs[0].nodes[2].data_deps == (1, 2)
    path = trace(tmp_path, [b"\x08\x01\x12\x09abc", comp(2)])  # name claims 9 B, 3 are there
    with pytest.raises(TraceError, match=r"node #0\): field 2 claims 9 B, 3 B are left"):
        read_job(path, ["h"])


def test_a_fifo_never_blocks_the_reader(tmp_path):
    trace(tmp_path, [comp(1)], [comp(1)])
    os.mkfifo(tmp_path / "t.2.et")
    assert read_job(tmp_path / "t", ["a", "b"]).world == 2  # the FIFO is no rank's file
    os.mkfifo(tmp_path / "g.json")
    with pytest.raises(TraceError, match=r"g\.json: not a regular file"):
        read_job(tmp_path / "t", ["a", "b"], groups=tmp_path / "g.json")
