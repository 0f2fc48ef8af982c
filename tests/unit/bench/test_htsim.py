"""htsim's inputs as bench/htsim_files.py writes them, read back the way htsim's own parsers
(connection_matrix.cpp, fat_tree_topology.cpp) read them, and its output as
bench/htsim_output.py reads it, on lines a real htsim run printed (uet-htsim 40ccb05)."""
from __future__ import annotations

import pytest

from bench.htsim_files import (
    HtsimError,
    all_to_all,
    ideal_cct,
    inputs,
    matrix,
    ring,
    write_flows,
)
from bench.htsim_output import completions, event
from testbed.scenario.schema import parse

FABRIC = """
name: t
fabric:
  planes: 1
  leaves_per_plane: {leaves}
  spines_per_plane: {spines}
  hosts_per_leaf: {hpl}
  host_link: {{rate: 25Mbit, buffer: 100KB, ecn_threshold: 20KB}}
  fabric_link: {{rate: 25Mbit, buffer: 100KB, ecn_threshold: 20KB}}
  mtu: 4200
qp: {{mss: 4096}}
workload: {{collective: all_reduce, size: 1MiB}}
"""


def read_matrix(text: str) -> tuple[int, dict[int, dict], dict[int, str]]:
    """Nodes, flows by id and trigger types, checked as ConnectionMatrix::load checks them."""
    head: dict[str, int] = {}
    flows: dict[int, dict] = {}
    triggers: dict[int, str] = {}
    for line in text.splitlines():
        tok = line.split()
        if tok[0] in ("Nodes", "Connections", "Triggers"):
            head[tok[0]] = int(tok[1])
        elif "->" in tok[0]:
            src, dst = map(int, tok[0].split("->"))
            f = {"src": src, "dst": dst}
            i = 1
            while i < len(tok):
                f[tok[i]] = int(tok[i + 1])
                i += 2
            assert f["id"] != 0
            assert ("start" in f) != ("trigger" in f), line  # exactly one start method
            flows[f["id"]] = f
        else:
            assert tok[:2] == ["trigger", "id"] and tok[3] == "oneshot", line
            triggers[int(tok[2])] = tok[3]
    assert head["Connections"] == len(flows) and head["Triggers"] == len(triggers)
    used = {f["trigger"] for f in flows.values() if "trigger" in f}
    assert used <= set(triggers), "a flow waits for an undeclared trigger"
    return head["Nodes"], flows, triggers


def test_a_ring_all_reduce_reads_back_as_its_steps():
    world, size = 4, 1 << 20
    nodes, flows, _ = read_matrix(matrix(8, ring("all_reduce", [0, 2, 4, 6], size)))
    assert nodes == 8
    assert len(flows) == 2 * (world - 1) * world  # every rank, every step
    fired_by = {f["send_done_trigger"]: f for f in flows.values() if "send_done_trigger" in f}
    starters = [f for f in flows.values() if "start" in f]
    assert {(f["src"], f["dst"]) for f in starters} == {(0, 2), (2, 4), (4, 6), (6, 0)}
    for f in flows.values():
        if "trigger" in f:  # a rank forwards what its left neighbour's write brought it
            assert fired_by[f["trigger"]]["dst"] == f["src"]
    for rank in (0, 2, 4, 6):  # each rank sends 2 (W-1) / W of the array
        assert sum(f["size"] for f in flows.values() if f["src"] == rank) == (
            2 * (world - 1) * size // world)


def test_a_flow_that_would_start_two_flows_is_refused():
    flows = ring("all_gather", [0, 1, 2], 1200)
    broken = [*flows, flows[-1].__class__(99, 0, 1, 4, after=flows[0].id)]
    with pytest.raises(HtsimError, match="starts two flows"):
        matrix(3, broken)


def test_pairs_and_all_to_all_start_at_once():
    """One write a flow: every flow starts at 0 (no trigger); pairs send rank r to r + n/2."""
    pairs = write_flows("pairs", list(range(8)), 1000, 1)
    assert [(f.src, f.dst) for f in pairs] == [(0, 4), (1, 5), (2, 6), (3, 7)]
    _, flows, triggers = read_matrix(matrix(8, pairs))
    assert not triggers and all(f["start"] == 0 for f in flows.values())
    incast = write_flows("incast", list(range(8)), 1000, 1)
    assert ideal_cct(incast, 8000.0) == 7.0  # 7 kB into one port at 8 kbit/s
    assert len(all_to_all(list(range(4)), 4096)) == 12


def read_topology(text: str) -> dict[str, dict[str, int]]:
    """The file's header and tiers, as FatTreeTopologyCfg::read_cfg reads them."""
    out: dict[str, dict[str, int]] = {"head": {}}
    tier = "head"
    for line in text.splitlines():
        tok = line.lower().split()
        if not tok:
            continue
        if tok[0] == "tier":
            tier = tok[1]
            out[tier] = {}
        else:
            out[tier][tok[0]] = int(tok[1])
    return out


def test_a_fabric_the_automatic_tree_cannot_build_becomes_a_topology_file():
    sc = parse(FABRIC.format(leaves=2, spines=2, hpl=2), "t")
    inp = inputs(sc)
    assert inp.roce is None and inp.topology_file is not None
    t = read_topology(inp.topology_file)
    n, tor, spine = t["head"]["nodes"], t["0"], t["1"]
    assert n == 4 and t["head"]["podsize"] == 4
    # fat_tree_topology.cpp set_custom_params: ToR uplinks make every leaf-spine link
    uplinks = n * tor["downlink_speed_gbps"] // (spine["downlink_speed_gbps"]
                                                 * tor["oversubscribed"])
    assert uplinks == 2 * 2
    assert tor["radix_down"] // tor["radix_up"] == tor["oversubscribed"]
    assert uplinks // spine["radix_down"] == tor["radix_up"]  # spines
    assert tor["downlink_speed_gbps"] == 25  # 25 Mbit/s, time-dilated 1000 times
    assert tor["downlink_latency_ns"] >= 1  # htsim refuses 0


def test_the_automatic_tree_serves_both_binaries_with_the_same_fabric():
    inp = inputs(parse(FABRIC.format(leaves=4, spines=2, hpl=2), "t"))
    assert inp.topology_file is None and inp.roce is not None
    for args in (inp.uec, inp.roce):
        opts = dict(zip(args[::2], args[1::2], strict=False))
        assert opts["-tiers"] == "2" and opts["-nodes"] == "8"
        assert opts["-linkspeed"] == "25000"  # Mbit/s in htsim's frame
        assert opts["-mtu"] == "4184"  # 4096 B of payload + IPv6, UDP, transport headers
        assert opts["-q"] == str(100_000 // 4184)
    assert inp.uec[inp.uec.index("-ecn") + 1:][:2] == [str(round(20_000 / 4184))] * 2


def test_more_than_one_plane_is_refused_with_the_fix():
    text = FABRIC.format(leaves=4, spines=2, hpl=2).replace("planes: 1", "planes: 2")
    with pytest.raises(HtsimError, match="set fabric.planes: 1"):
        inputs(parse(text, "t"))


# Lines htsim printed (uet-htsim 40ccb05, bench/htsim.py on scenarios/htsim/ring-8.yaml).
UEC_START = "Flow Uec_2_3 flowId 3 uecSrc 2 starting at 0"
UEC_END = ("Flow Uec_2_3 flowId 3 uecSrc 2 finished at 55.1194 total messages 1 total packets 32"
           " RTS 0 total bytes 131840 in_flight now 0 fair_inc 0 prop_inc 3913 fast_inc 472 "
           "eta_inc 420 multi_dec -0 quick_dec -0 nack_dec -0")
ROCE_START = "startflow Roce_0_1 at 0"
ROCE_END = "Flow Roce_0_1 128 finished at 45.5142 total bytes 32"


def test_htsims_flow_lines_are_read():
    start, end = event(UEC_START), event(UEC_END)
    assert start is not None and end is not None
    assert (end.name, end.flow_id, end.finished, end.us) == ("Uec_2_3", 3, True, 55.1194)
    assert not start.finished
    roce = event(ROCE_END)
    assert roce is not None and (roce.name, roce.flow_id, roce.us) == ("Roce_0_1", None, 45.5142)
    assert event("Trigger 2 fired, 1 targets") is None


def test_flows_of_one_pair_without_ids_pair_first_in_first_out():
    lines = [ROCE_START, "startflow Roce_0_1 at 10", ROCE_END,
             "Flow Roce_0_1 130 finished at 60 total bytes 32", UEC_START, UEC_END]
    done = completions(e for e in map(event, lines) if e is not None)
    assert [(c.name, c.fct_us) for c in done] == [("Roce_0_1", 45.5142), ("Roce_0_1", 50.0),
                                                 ("Uec_2_3", 55.1194)]


REAL = FABRIC.replace("  mtu: 4200\n", "  mtu: 4200\n  real_rate: 100Gbit\n  hop_latency: 1us\n")


def options(args: list[str]) -> dict[str, str]:
    return {a: b for a, b in zip(args, args[1:], strict=False) if a.startswith("-")}


def test_a_real_frame_fabric_runs_in_htsim_at_its_real_rate_and_latency():
    inp = inputs(parse(REAL.format(leaves=4, spines=2, hpl=2), "t"))
    assert inp.dilation == 100e9 / 25e6
    assert inp.roce is not None
    for args in (inp.uec, inp.roce):
        opts = options(args)
        assert opts["-linkspeed"] == "100000"  # 100 Gbit/s in Mbit/s, not the emulated 25
        assert opts["-hop_latency"] == "1"  # us: the real hop, not 1 us x D


def test_a_real_frame_topology_file_takes_the_real_rate_and_latency():
    t = read_topology(inputs(parse(REAL.format(leaves=2, spines=2, hpl=2), "t")).topology_file
                      or "")
    assert t["0"]["downlink_speed_gbps"] == t["1"]["downlink_speed_gbps"] == 100
    assert t["0"]["downlink_latency_ns"] == t["1"]["downlink_latency_ns"] == 1000


def degraded(links: list[tuple[int, int]], extra: str = "") -> str:
    faults = "".join(f"  - {{at: 0us, kind: degrade, target: {{plane: 0, leaf: {leaf}, "
                     f"spine: {spine}}}, fraction: 0.25{extra}}}\n" for leaf, spine in links)
    return REAL.format(leaves=4, spines=2, hpl=2) + "faults:\n" + faults


def test_a_spine_degraded_on_every_leaf_for_the_whole_run_is_htsims_failed():
    inp = inputs(parse(degraded([(leaf, 0) for leaf in range(4)]), "t"))
    assert inp.roce is not None
    for args in (inp.uec, inp.roce):
        assert options(args)["-failed"] == "1"  # spine 0's links, as htsim degrades them
    assert "-failed" not in inputs(parse(REAL.format(leaves=4, spines=2, hpl=2), "t")).uec


@pytest.mark.parametrize("text", [
    degraded([(0, 0)]),  # one link: htsim degrades a spine's links to every leaf
    degraded([(leaf, 1) for leaf in range(4)]),  # spine 1 alone: htsim's -failed takes 0 first
    degraded([(leaf, 0) for leaf in range(4)], ", duration: 100us"),  # not the whole run
    degraded([(leaf, 0) for leaf in range(4)]).replace("fraction: 0.25", "fraction: 0.5"),
])
def test_a_fault_htsim_cannot_build_is_refused(text):
    with pytest.raises(HtsimError, match="-failed"):
        inputs(parse(text, "t"))


def test_the_arrival_cct_takes_back_each_acknowledgements_return_along_the_chain():
    """A ring on 4 hosts of 2 leaves, 1 us hops: h0->h1 is on one leaf (an ACK comes back
    over 2 links, 2 us), h1->h2 crosses the spines (4 links, 4 us). The step-1 flow h1->h2
    waited for h0->h1 of step 0; it ends at 30 us, so at arrival it would have ended
    30 - 4 (its own ACK) - 2 (its predecessor's) = 24 us; every other flow ends at 10."""
    from bench.htsim_files import arrival_cct_us
    inp = inputs(parse(REAL.format(leaves=2, spines=2, hpl=2), "t"))
    assert inp.hop_us == 1 and inp.per_leaf == 2
    ends = {f.id: 10.0 for f in inp.flows}
    last = next(f for f in inp.flows if f.id == 4 + 2)  # step 1, rank 1: h1 -> h2
    before = next(f for f in inp.flows if f.id == last.after)
    assert (last.src, last.dst, before.src, before.dst) == (1, 2, 0, 1)
    ends[last.id] = 30.0
    assert arrival_cct_us(inp.flows, ends, inp.return_us) == pytest.approx(24.0)


def test_completions_are_matched_to_their_flows_by_pair_in_order():
    """Each pair's flows in id order against its completions in start order: a flow of step
    k started at 10k us and ended at 10(k+1) (1 MiB all-reduce, 6 steps: CCT 60 us)."""
    from bench.htsim import htsim_measure, matched
    from bench.htsim_output import Completion
    inp = inputs(parse(REAL.format(leaves=2, spines=2, hpl=2), "t"))
    step = {f.id: (f.id - 1) // 4 for f in inp.flows}
    done = [Completion(f"Uec_{f.src}_{f.dst}", 10.0 * step[f.id], 10.0 * (step[f.id] + 1))
            for f in reversed(inp.flows)]
    pairs = matched(inp, "Uec", done)
    assert all(c.start_us == 10.0 * step[f.id] for f, c in pairs)
    m = htsim_measure(pairs, inp, ideal_s=30e-6, rate=100e9)
    assert m.cct == pytest.approx(2.0)
    # a last-step flow's chain crosses 6 flows, alternating 2 and 4 us returns: 18 us back
    assert m.cct_arrival == pytest.approx((60.0 - 18.0) / 30.0)


FLOWS = REAL.format(leaves=4, spines=2, hpl=2).replace(
    "workload: {collective: all_reduce, size: 1MiB}",
    "workload: {flows: {pattern: incast, message: 64KiB, messages: 3}}")


def test_an_incast_of_write_flows_chains_each_senders_writes():
    """7 senders to h0, 3 writes of 64 KiB each: 21 flows, each sender's writes one after
    another (a write starts when the one before it is acknowledged), the first at once."""
    inp = inputs(parse(FLOWS, "t"))
    nodes, flows, triggers = read_matrix(inp.matrix)
    assert nodes == 8 and len(flows) == 21 and len(triggers) == 14
    assert {f["dst"] for f in flows.values()} == {0}
    assert all(f["size"] == 64 * 1024 for f in flows.values())
    fired_by = {f["send_done_trigger"]: f for f in flows.values() if "send_done_trigger" in f}
    for src in range(1, 8):
        mine = [f for f in flows.values() if f["src"] == src]
        assert [("start" in f) for f in mine] == [True, False, False]
        for f in mine[1:]:  # each waits for its own sender's write before it
            assert fired_by[f["trigger"]]["src"] == src
    assert ideal_cct(inp.flows, 25e6) == pytest.approx(21 * 64 * 1024 * 8 / 25e6)


def test_write_flows_start_on_acknowledgement_so_no_arrival_cct():
    """The testbed's next write waits for a clear-to-send, as htsim's trigger waits for the
    acknowledgement: htsim's own CCT is the match, with no arrival estimate."""
    from bench.htsim import htsim_measure, matched
    from bench.htsim_output import Completion
    inp = inputs(parse(FLOWS, "t"))
    assert not inp.at_arrival and inputs(parse(REAL.format(leaves=4, spines=2, hpl=2),
                                               "t")).at_arrival
    done = [Completion(f"Uec_{f.src}_{f.dst}", 10.0 * k, 10.0 * (k + 1))
            for k, f in enumerate(inp.flows)]
    m = htsim_measure(matched(inp, "Uec", done), inp, ideal_s=100e-6, rate=100e9)
    assert m.cct_arrival is None and m.cct == pytest.approx(2.1)


def test_a_run_of_jobs_is_refused_for_htsim():
    text = FLOWS.replace("workload: {flows: {pattern: incast, message: 64KiB, messages: 3}}", """
jobs:
  - {name: a, hosts: [h0, h1, h2, h3], workload: {collective: all_reduce, size: 1MiB}}
  - {name: b, hosts: [h4, h5, h6, h7], workload: {collective: all_reduce, size: 1MiB}}""")
    with pytest.raises(HtsimError, match="jobs"):
        inputs(parse(text, "t"))


def test_a_flows_iteration_is_timed_at_its_receiver():
    """Rank 0 receives; rank 1, done early, starts iteration 1 at 2.1 s and waits for the
    receiver, which starts it at 2.7 s and ends it at 5.2 s: 2.5 s, not the 3.1 s from the
    earliest sender's start. Warm-up iteration 0 is kept, marked."""
    import pandas as pd

    from bench.htsim import receivers_spans
    it = pd.DataFrame([
        {"rank": 0, "iteration": 0, "warmup": True, "start": 0.0, "end": 2.7},
        {"rank": 1, "iteration": 0, "warmup": True, "start": 0.0, "end": 2.1},
        {"rank": 0, "iteration": 1, "warmup": False, "start": 2.7, "end": 5.2},
        {"rank": 1, "iteration": 1, "warmup": False, "start": 2.1, "end": 5.1},
    ])
    messages = pd.DataFrame([{"rank": 1, "peer": 0}])
    spans = receivers_spans(it, messages)
    assert spans["cct"].to_dict() == {0: pytest.approx(2.7), 1: pytest.approx(2.5)}
    assert spans["warmup"].to_dict() == {0: True, 1: False}
    # pairs: 2 -> 0 and 3 -> 1, no receiver in common; flow 3 -> 1 takes 2 s an iteration,
    # flow 2 -> 0 1 s, and they drift apart: iteration 1 is rank 1's 2-4, rank 0's 1-2, whose
    # CCT is the slower flow's 2 s (not 4 - 1 = 3 s, the drift counted)
    it = pd.DataFrame([{"rank": r, "iteration": i, "warmup": i == 0, "start": i * d,
                        "end": (i + 1) * d} for r, d in ((0, 1.0), (1, 2.0)) for i in range(3)])
    spans = receivers_spans(it, pd.DataFrame([{"rank": 2, "peer": 0}, {"rank": 3, "peer": 1}]))
    assert spans["cct"].to_dict() == {0: 2.0, 1: 2.0, 2: 2.0}


def test_a_collectives_iteration_leaves_out_its_early_ranks_wait():
    """Rank 0 ends iteration 0 at 2.0, rank 1 at 2.6; rank 0 starts iteration 1 at once and
    both end it at 5.0: 2.4 s from rank 1's end (not 3.0 from rank 0's start)."""
    import pandas as pd

    from bench.htsim import collective_spans
    it = pd.DataFrame([
        {"rank": r, "iteration": i, "warmup": i == 0, "start": s, "end": e, "kind": "all_reduce",
         "bytes": 8, "verified": True}
        for r, i, s, e in ((0, 0, 0.0, 2.0), (1, 0, 0.0, 2.6), (0, 1, 2.0, 5.0),
                           (1, 1, 2.6, 5.0))])
    spans = collective_spans(it)
    assert spans["cct"].to_dict() == {0: pytest.approx(2.6), 1: pytest.approx(2.4)}


def test_a_variant_that_cannot_be_named_stops_the_scenario_before_any_run(tmp_path):
    """A scenario name too long for a variant's run name is the scenario's error row, raised
    before htsim or the testbed runs anything (no binaries are given: none may be called)."""
    from bench import fair
    from bench.htsim import scenario_rows
    file = tmp_path / "long.yaml"
    file.write_text(REAL.format(leaves=4, spines=2, hpl=2).replace("name: t",
                                                                    "name: " + "x" * 33))
    sit = fair.Sitting([1], ["mrc", "rocev2-lossless-noecn"], [fair.THIS],
                       [("mrc", fair.THIS), ("rocev2-lossless-noecn", fair.THIS)], tmp_path)
    with pytest.raises(ValueError, match="longer than"):
        scenario_rows(file, sit, {}, [], [], dcqcn=False)
    assert not (tmp_path / "long").exists()


def test_the_first_iteration_row_sets_the_testbeds_warm_up_against_htsims_fresh_flows():
    """htsim's ring at arrival took 1.38 x ideal (its CCT 1.66); the testbed's timed
    iterations 1.25, its first (warm-up) 1.40: the first-iteration row compares 1.40 with
    htsim's 1.38 (at arrival), the plain CCT row 1.25 with 1.66. Without a warm-up, no row."""
    from bench.htsim import Measure, variant_rows
    h = [Measure(1.66, 1.67, 1.92, cct_arrival=1.38)]
    t = [Measure(1.25, 1.50, 1.75, cct_first=1.40)]
    rows = {r[3]: r for r in variant_rows("ring", "mrc", h, t, 1)}
    assert rows["CCT"][4:7] == ["1.66/1.66/1.66", "1.25/1.25/1.25", "0.75"]
    assert rows["CCT, htsim at arrival"][4:7] == ["1.38/1.38/1.38", "1.25/1.25/1.25", "0.91"]
    assert rows["CCT, testbed's first iteration"][4:7] == ["1.38/1.38/1.38", "1.40/1.40/1.40",
                                                           "1.01"]
    flat = {r[3] for r in variant_rows("a2a", "mrc", [Measure(1.18, 8.0, 8.2)],
                                       [Measure(1.6, 8.0, 10.7)], 1)}
    assert flat == {"CCT", "flow p50", "flow p99"}
