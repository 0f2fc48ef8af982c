"""Built-in training steps: the graph's shape counted by hand, and a run on the loopback."""
from __future__ import annotations

from collections import Counter

import pytest

from hostagent.workloads.graph import GraphError
from hostagent.workloads.training import TrainingSpec, training_job

from .test_steps import run_job

SPEC = TrainingSpec(dp=2, tp=2, pp=2, layers=4, micro_batches=2, layer_bytes=1 << 20,
                    activation_bytes=4096, bucket_bytes=25 << 20)


def kinds(graph) -> Counter:
    return Counter(n.collective or n.kind for n in graph.nodes)


def test_node_counts_of_a_dp_tp_pp_step():
    """Per rank: 2 micro-batches x 2 layers x (fwd + bwd) = 8 computes, each wrapped by a TP
    all-gather and reduce-scatter (16), one DP bucket (1 MiB / tp = 512 KiB per layer, two
    layers, below 25 MiB: one bucket), and one message per micro-batch each way."""
    job = training_job(SPEC)
    assert job.world == 8
    for graph in job.graphs:
        assert kinds(graph) == {"compute": 8, "all_gather": 8, "reduce_scatter": 8,
                                "all_reduce": 1, "send": 2, "recv": 2}
        (bucket,) = [n for n in graph.nodes if n.collective == "all_reduce"]
        assert bucket.bytes == 2 * (1 << 19)


def test_buckets_close_at_bucket_bytes():
    job = training_job(TrainingSpec(**{**SPEC.__dict__, "bucket_bytes": 1 << 19}))
    buckets = [n for n in job.graphs[0].nodes if n.collective == "all_reduce"]
    assert [b.bytes for b in buckets] == [1 << 19, 1 << 19]
    # bucket 0 (the stage's last layer) starts after that layer's last backward, before the
    # first layer's backward compute: it overlaps it
    ids = {n.id: n for n in job.graphs[0].nodes}
    assert ids[buckets[0].data_deps[0]].name == "bwd mb1 L1"
    assert ids[buckets[1].data_deps[0]].name == "bwd mb1 L0"


def test_groups_and_placement():
    """rank = (stage x dp + d) x tp + t: rank 5 is t=1, d=0, stage 1."""
    hosts = [f"h{k}" for k in range(8)]
    job = training_job(SPEC, hosts)
    assert job.placement == tuple(hosts)
    assert job.meta["coords"][5] == {"dp": 0, "tp": 1, "pp": 1, "ep": 0}
    assert job.groups["tp0.1"] == (4, 5)
    assert job.groups["dp1.1"] == (5, 7)
    sends = {n.peer for n in job.graphs[5].nodes if n.kind == "send"}
    assert sends == {1}  # the same (d, t) on stage 0


@pytest.mark.parametrize(("schedule", "order"), [
    ("1f1b", ["f0", "f1", "b0", "f2", "b1", "b2"]),
    ("gpipe", ["f0", "f1", "f2", "b0", "b1", "b2"]),
])
def test_schedules_on_the_first_stage(schedule, order):
    job = training_job(TrainingSpec(pp=2, layers=2, micro_batches=3, schedule=schedule))
    computes = [n.name.split()[:2] for n in job.graphs[0].nodes if n.kind == "compute"]
    assert [p[0][0] + p[1][2:] for p in computes] == order


def test_moe_layers_add_all_to_all():
    job = training_job(TrainingSpec(dp=4, ep=2, layers=4, moe_every=2, micro_batches=1))
    # layers 1 and 3 are MoE: dispatch + combine, forward and backward
    assert kinds(job.graphs[0])["all_to_all"] == 2 * 2 * 2
    assert job.groups["ep1.0.0"] == (2, 3)


def test_bad_specs():
    with pytest.raises(GraphError, match="layers 5 is not a multiple of pp 2"):
        training_job(TrainingSpec(pp=2, layers=5))
    with pytest.raises(GraphError, match="ep 3 does not divide dp 4"):
        training_job(TrainingSpec(dp=4, ep=3))
    with pytest.raises(GraphError, match="8 ranks, but 2 hosts"):
        training_job(SPEC, ["a", "b"])


def test_a_dp_tp_pp_ep_step_runs_verified():
    spec = TrainingSpec(dp=2, tp=2, pp=2, ep=2, moe_every=2, layers=4, micro_batches=2,
                        layer_bytes=4 * 3000, activation_bytes=4 * 101, expert_bytes=4 * 55,
                        bucket_bytes=4 * 1000, forward=0.0005, backward=0.001)
    job = training_job(spec)
    records = run_job(job, iterations=2, reorder=True, chunk=13, seed=1)
    assert len(records) == 2 * sum(len(g.nodes) for g in job.graphs)
    assert [r.error for r in records if not r.verified] == []


def test_dp_buckets_overlap_the_backward():
    spec = TrainingSpec(dp=2, layers=4, micro_batches=1, layer_bytes=4 * 100,
                        bucket_bytes=4 * 100, forward=0.002, backward=0.02)
    records = run_job(training_job(spec), iterations=1)
    rank0 = [r for r in records if r.rank == 0]
    first_bucket = next(r for r in rank0 if r.name == "dp bucket0")
    last_compute = max(r.end for r in rank0 if r.kind == "compute")
    assert first_bucket.end < last_compute - 0.02
