"""Metrics on small hand-computed frames: every number a report shows."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from analysis import metrics as M
from hostagent.workloads import nccl
from hostagent.workloads.iterations import IterationRecord
from testbed.run.results import facts
from testbed.scenario import parse


def _iterations(ccts: list[float], world: int = 2, kind: str = "all_reduce",
                size: int = 1_000_000) -> pd.DataFrame:
    """Rank r of iteration i starts at 10 i + r/100 and the last rank ends cct later."""
    rows = []
    for i, c in enumerate(ccts):
        for r in range(world):
            start = 10.0 * i + r / 100
            rows.append({"host": f"h{r}", "rank": r, "transport": "mrc", "kind": kind,
                         "iteration": i, "warmup": i == 0, "start": start,
                         "end": 10.0 * i + c if r == world - 1 else start + c / 2,
                         "bytes": size, "verified": True, "error": None})
    return pd.DataFrame(rows)


def test_percentiles_with_sample_counts_and_notes():
    ps = M.percentiles(range(1, 11))  # 1..10
    assert [p.value for p in ps] == pytest.approx([5.5, 9.91, 9.991])
    assert [p.n for p in ps] == [10, 10, 10]
    assert [p.needed for p in ps] == [2, 100, 1000]
    assert ps[0].note == ""
    assert "p99 from 10 samples (needs >= 100)" in ps[1].note
    ps = M.percentiles(range(1000))
    assert ps[1].note == "" and "needs >= 1000" not in ps[2].note and ps[2].note == ""


def test_percentiles_without_samples():
    (p,) = M.percentiles([math.nan], qs=[50.0])
    assert p.n == 0 and math.isnan(p.value) and "no samples" in p.note


def test_cct_is_last_end_minus_first_start_like_nccl():
    it = _iterations([1.0, 2.0, 4.0])
    c = M.cct(it, t0=0.0)
    assert c["cct"].tolist() == pytest.approx([1.0, 2.0, 4.0])
    assert c["warmup"].tolist() == [True, False, False]
    records = IterationRecord.of_rows(it.to_dict("records"))
    assert c["cct"].tolist() == pytest.approx(list(nccl.cct(records).values()))


@pytest.mark.parametrize("kind,factor", [("all_reduce", 2 * 3 / 4), ("all_gather", 3 / 4),
                                         ("reduce_scatter", 3 / 4), ("all_to_all", 3 / 4)])
def test_busbw_factors(kind: str, factor: float):
    c = M.bandwidth(M.cct(_iterations([1.0, 2.0], world=4, kind=kind, size=8_000_000), 0), 4)
    assert c["algbw"].tolist() == pytest.approx([0.008, 0.004])  # GB/s
    assert c["busbw"].tolist() == pytest.approx([0.008 * factor, 0.004 * factor])


def test_nccl_rows_use_nccl_tests_time_of_timed_iterations():
    (row,) = M.nccl_rows(_iterations([9.0, 1.0, 3.0]))  # warmup 9 s left out
    # the loop starts at 10.0: rank 0 spends 0.5 + 1.5 s in it, rank 1 0.01 s late and
    # 0.99 + 2.99 s: (2.0 + 3.99) / 2 ranks / 2 iterations
    assert row.time_us == pytest.approx(1.4975e6)
    assert row.busbw == pytest.approx(1_000_000 / 1.4975 / 1e9 * 2 * 1 / 2)


def test_rank_busbw_is_each_ranks_own_loop_time_around_the_tables_number():
    """Ranks 0 and 1 spend 1.0 and 1.995 s per timed iteration (see the test above): the
    figure's dots, with the table's busbw at their mean time between them."""
    it = _iterations([9.0, 1.0, 3.0])
    assert M.rank_busbw(it) == pytest.approx([1_000_000 / 1.0 / 1e9, 1_000_000 / 1.995 / 1e9])
    (row,) = M.nccl_rows(it)
    assert min(M.rank_busbw(it)) < row.busbw < max(M.rank_busbw(it))


def test_ideal_busbw_all_planes_for_mrc_one_per_qp_for_rocev2():
    """RoCEv2 runs one QP per plane by default (a NIC port each): its ideal is every plane;
    with fewer QPs than planes, only the planes its QPs use."""
    for text, mrc, rocev2 in (("name: a", 2, 2), ("name: b\nfabric: {planes: 4}", 4, 4),
                              ("name: c\nqp: {qps_per_peer: {rocev2: 1}}", 2, 1),
                              ("name: c\nqp: {qps_per_peer: {mrc: 1, rocev2: 2}}", 2, 2)):
        sc = parse(text, "t")
        rate = sc.fabric.host_link.rate / 8e9
        assert sc.ideal_busbw("mrc") == (pytest.approx(mrc * rate), mrc)
        assert sc.ideal_busbw("rocev2") == (pytest.approx(rocev2 * rate), rocev2)



def test_cumulative_bytes_spreads_each_write_over_its_lifetime():
    # 100 B over [0, 1], 50 B over [0.5, 1.5], 10 B at once at 2
    at = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0])
    got = M.cumulative_bytes([0, 0.5, 2], [1, 1.5, 2], [100, 50, 10], at)
    assert got.tolist() == pytest.approx([0, 50, 125, 150, 160, 160])


def test_goodput_per_bin_and_per_host():
    d = pd.DataFrame({"host": ["a", "b"], "start": [0.0, 0.0], "end": [1.0, 0.5],
                      "size": [100.0, 40.0]})
    g = M.goodput(d, 0.5, 1.0, by="host")
    assert g.index.tolist() == [0.0, 0.5]
    assert g["a"].tolist() == pytest.approx([100, 100])  # 50 B per 0.5 s
    assert g["b"].tolist() == pytest.approx([80, 0])
    last = M.goodput(d, 0.4, 1.0)  # bins 0-0.4, 0.4-0.8, 0.8-1.0 (the last one shorter)
    assert last["total"].tolist() == pytest.approx([180, 120, 100])


def test_deliveries_count_only_iterations_the_receiver_verified():
    it = _iterations([1.0, 1.0])
    it.loc[(it["rank"] == 1) & (it["iteration"] == 1), "verified"] = False
    msgs = pd.DataFrame({"host": ["h0", "h0", "h1"], "rank": [0, 0, 1], "peer": [1, 1, 0],
                         "iteration": [0, 1, 1], "size": [10, 20, 30],
                         "start": [0.0, 10.0, 10.0], "end": [0.5, 10.5, 10.5]})
    d = M.deliveries(msgs, it, t0=0.0)
    assert d["size"].tolist() == [10, 30]
    assert d["host"].tolist() == ["h1", "h0"]


def _dip(values: list[float]) -> pd.Series:
    return pd.Series(values, index=pd.Index(np.arange(len(values)) * 0.5, name="time"))


def test_recovery_time_and_bytes_lost_on_a_synthetic_dip():
    # 100 B/s for 2 s, an event at 2.0 s, 20 B/s then 60 B/s, back at 100 from 3.0 s
    s = _dip([100, 100, 100, 100, 20, 60, 100, 100, 100])
    r = M.recovery(s, start=2.0, bin_s=0.5, until=4.5, fraction=0.9, pre_window=1.0)
    assert r.pre_rate == 100 and r.threshold == 90 and r.dipped
    assert r.recovery_s == pytest.approx(1.0)
    assert r.bytes_lost == pytest.approx((80 + 40) * 0.5)
    assert r.note == ""


def test_recovery_without_a_dip_is_zero():
    r = M.recovery(_dip([100] * 8), start=2.0, bin_s=0.5, until=4.0)
    assert not r.dipped and r.recovery_s == 0 and r.bytes_lost == 0


def test_recovery_that_never_comes_back_and_short_pre_window():
    s = _dip([100, 10, 10, 10])
    r = M.recovery(s, start=0.5, bin_s=0.5, until=2.0, pre_window=1.0)
    assert r.recovery_s is None and r.dipped
    assert r.bytes_lost == pytest.approx(3 * 90 * 0.5)
    assert "0.50 s only" in r.note and "not back to 90% by 2.00 s" in r.note


def test_recovery_without_goodput_before():
    r = M.recovery(_dip([0, 0, 100]), start=1.0, bin_s=0.5, until=1.5)
    assert r.recovery_s is None and "nothing to recover to" in r.note


def test_recoveries_judge_each_event_until_the_next_and_time_after_its_end():
    s = _dip([100, 100, 100, 100, 20, 100, 100, 100, 0, 0])
    events = pd.DataFrame({"source": ["fault", "fault"], "kind": ["x", "y"],
                           "label": ["x", "y"], "start": [2.0, 4.0], "end": [2.4, math.nan]})
    r = M.recoveries(s, events, 0.5, t_end=5.0)
    assert r["recovery_s"].tolist()[0] == pytest.approx(0.5)
    assert r["after_end_s"].tolist()[0] == pytest.approx(0.1)
    assert math.isnan(r["recovery_s"].iloc[1]) and math.isnan(r["after_end_s"].iloc[1])


def test_trailing_mean_over_about_one_iteration():
    s = _dip([0, 100, 0, 100])
    assert M.trailing_mean(s, 1.0, 0.5).tolist() == [0, 50, 50, 50]


def test_disturbances_from_events_and_background():
    sc = parse("name: t\nbackground: [{pattern: incast, at: 1, duration: 2, receiver: h0}]",
               "t")
    ev = pd.DataFrame({"event": [0, 0, 0, 0], "kind": ["link_down"] * 4,
                       "target": ["p0 leaf 1-spine 0"] * 4,
                       "condition": ["down", "routed", "down", "routed"],
                       "on": [True, True, False, False], "applied": [100.5, 101.5, 102.5, 103.5]})
    d = M.disturbances(ev, facts(sc, "mrc").background, t0=100.0)
    assert d[["source", "start", "end"]].values.tolist() == [["fault", 0.5, 2.5],
                                                              ["background", 1.0, 3.0]]
    assert M.reroutes(ev, 100.0).tolist() == [1.5, 3.5]


def test_ev_rates_are_shares_of_the_host_link_per_interval():
    """Two samples 0.5 s apart, 100 packets of 1000 bits on one EV: 200 kbit/s, a fifth of a
    1 Mbit/s link; labels name sender, receiver, plane and spine (or a local path)."""
    load = pd.DataFrame({
        "host": ["h0"] * 4, "peer": [1, 1, 2, 2], "qpn": [64, 64, 128, 128],
        "ev": [0, 0, 3, 3], "plane": [0, 0, 1, 1], "spine": [float("nan")] * 2 + [1.0] * 2,
        "time": [100.0, 100.5, 100.0, 100.5], "sent": [0, 100, 10, 10]})
    rates = M.ev_rates(load, 100.0, 1000, 1e6, {1: "h1", 2: "h2"})
    assert rates.set_index("label")["util"].to_dict() == pytest.approx(
        {"h0→h1 p0 local": 0.2, "h0→h2 p1s1": 0.0})
    assert rates["time"].tolist() == [0.5, 0.5]
    assert M.ev_rates(load.iloc[:0], 0, 1, 1, {}).empty


def _links(per_link: dict[str, int]) -> pd.DataFrame:
    """Two samples per port, both ends of each link, `bytes` sent by the lower end."""
    rows = []
    for link, sent in per_link.items():
        lower, upper = link.split("-")
        for node, total in ((lower, sent), (upper, 0)):
            for t, b in ((0.0, 0), (1.0, total)):
                rows.append({"node": node, "ifname": f"{node}-{link}", "link": link,
                             "time": t, "tx_bytes": b, "tx_packets": 0, "tx_drop": 0,
                             "queue_drops": 0})
    return pd.DataFrame(rows)


def test_used_links_are_those_that_carried_the_run():
    used = M.used_links(_links({"h0-p0l0": 10_000_000, "p0l0-p0s1": 5_000_000,
                                "h0-p1l0": 0, "p1l0-p1s0": 50_000}))
    assert used == {"h0-p0l0", "p0l0-p0s1"}  # 50 kB is below 1% of 10 MB


def test_faults_applied_together_are_one_disturbance():
    """Blackholes on both leaves of a spine, applied 4 ms apart, then a reboot: the first
    two are one disturbance, judged until the reboot, whose dip and links are theirs; a lone
    second blackhole would have been judged over 4 ms and never seen the dip."""
    s = _dip([100, 100, 100, 100, 20, 60, 100, 100, 100, 100])
    events = pd.DataFrame({"source": ["fault"] * 3,
                           "kind": ["blackhole", "blackhole", "router_reboot"],
                           "label": ["blackhole p0 leaf 0-spine 0", "blackhole p0 leaf 1-spine 0",
                                     "router_reboot p0s0"],
                           "start": [2.0, 2.004, 4.0], "end": [3.5, 3.502, 4.5],
                           "links": [("p0l0-p0s0",), ("p0l1-p0s0",), ("p0l0-p0s0",)]})
    r = M.recoveries(s, events, 0.5, t_end=5.0)
    assert r["label"].tolist() == ["blackhole p0 leaf 0-spine 0 and 1 more at once",
                                   "router_reboot p0s0"]
    first = r.iloc[0]
    assert (first["start"], first["end"]) == (2.0, 3.502)
    assert first["links"] == ("p0l0-p0s0", "p0l1-p0s0")
    assert first["recovery_s"] == pytest.approx(1.0) and first["dipped"]


def test_a_dip_during_a_fault_on_unused_links_is_not_blamed_on_it():
    """Overlapping faults: a plane-1 fault the run never used, and a plane-0 one it did. The
    run dipped; the summary must say the plane-1 fault was off its paths, that the two
    overlap, and that an iteration took twice as long."""
    from analysis.summary import _how
    s = _dip([100, 100, 100, 100, 20, 20, 100, 100, 100, 100])
    events = pd.DataFrame({"source": ["fault", "fault"], "kind": ["plane_down", "flap"],
                           "label": ["plane_down plane 1", "flap h0 port of plane 0"],
                           "start": [2.0, 2.2], "end": [3.0, 2.8],
                           "links": [("h0-p1l0", "p1l0-p1s0"), ("h0-p0l0",)]})
    ccts = pd.DataFrame({"start": [0.0, 1.0, 2.0, 4.0], "end": [1.0, 2.0, 4.0, 5.0],
                         "cct": [1.0, 1.0, 2.0, 1.0], "warmup": [False] * 4})
    r = M.recoveries(s, events, 0.5, t_end=5.0, used=frozenset({"h0-p0l0", "p0l0-p0s1"}),
                     ccts=ccts)
    assert r["on_paths"].tolist() == [0, 1]
    assert r["overlaps"].tolist() == [["flap h0 port of plane 0"], ["plane_down plane 1"]]
    assert r["slowdown"].tolist() == [2.0, 2.0]
    plane1 = _how(r.iloc[0])
    assert "not on its paths: it carried none of the 2 links" in plane1
    assert "the dip is not this fault's" in plane1
    assert "an iteration during it took 2.0x the others' median" in plane1
    assert "on 1 of the 1 links it used" in _how(r.iloc[1])


def test_a_link_up_closes_its_link_down_as_one_disturbance():
    ev = pd.DataFrame({"event": [0, 1], "kind": ["link_down", "link_up"],
                       "target": ["h0 port of plane 0"] * 2, "condition": ["down", "down"],
                       "on": [True, False], "applied": [100.5, 102.0], "holder": [0, 0],
                       "links": [("h0-p0l0",), ("h0-p0l0",)]})
    d = M.disturbances(ev, (), t0=100.0)
    assert d[["label", "start", "end"]].values.tolist() == [
        ["link_down h0 port of plane 0", 0.5, 2.0]]


def test_dilation_scales_times_by_the_real_over_the_emulated_rate():
    """400 Gbit/s over 10 Mbit/s: 40,000x; a 2 s iteration is 50 us at the real rate."""
    from types import SimpleNamespace

    from analysis import summary
    f = facts(parse("name: d\nfabric: {host_link: {rate: 10Mbit}, real_rate: 400Gbit}\n", "t"),
              "mrc")
    assert f.dilation() == 40_000
    assert facts(parse("name: d\n", "t"), "mrc").dilation() is None
    it = _iterations([9.0, 1.0, 3.0], world=1)  # timed: 1 s and 3 s, 2 s each on average
    view = SimpleNamespace(run=SimpleNamespace(facts=f, iterations=it), label="mrc",
                           percentiles=lambda: M.percentiles(np.array([1.0, 3.0])))
    text = summary.dilation([view])
    assert "in the real frame (emulated times / 40,000)" in text
    assert "time 50 us (emulated 2 s)" in text
    assert "CCT p50 50 us (emulated 2 s)" in text
    no_real = SimpleNamespace(run=SimpleNamespace(facts=facts(parse("name: d\n", "t"), "mrc")))
    assert summary.dilation([no_real]) == ""


def test_similarity_is_printed_once_for_runs_of_one_scenario():
    """Two transports' runs of one scenario carry the same record: one block, not two."""
    from types import SimpleNamespace

    from analysis import summary
    from testbed.run.similarity import similarity
    record = similarity(parse("name: s\nfabric: {real_rate: 100Gbit, hop_latency: 1us}\n", "t"))
    views = [SimpleNamespace(run=SimpleNamespace(meta=SimpleNamespace(similarity=record)))
             for _ in range(2)]
    text = summary.similarity(views)
    assert text.count("# similarity: D = 1,000") == 1
    assert text.count("# similarity: per path: BDP") == 1
    assert summary.similarity([SimpleNamespace(run=SimpleNamespace(
        meta=SimpleNamespace(similarity=None)))]) == ""


def test_write_times_are_given_in_the_real_frame_beside_the_emulated():
    """At 40,000x a 2 s write took 50 us on the real fabric; without real_rate, ms as run."""
    from types import SimpleNamespace

    from analysis import summary
    m = pd.DataFrame({"start": [0.0, 0.0, 0.0], "end": [1.0, 2.0, 3.0], "warmup": False})
    real = facts(parse("name: d\nfabric: {host_link: {rate: 10Mbit}, real_rate: 400Gbit}\n",
                       "t"), "mrc")
    view = SimpleNamespace(run=SimpleNamespace(messages=m, facts=real), label="mrc")
    assert "p50 50 us (emulated 2 s)" in summary.writes([view])
    view.run.facts = facts(parse("name: d\n", "t"), "mrc")
    assert "p50 2000.0 ms" in summary.writes([view])


def _paths(rows: list[tuple[str, int, int, int, float, int]]) -> pd.DataFrame:
    """(host, peer rank, plane, spine or -1 for none, ev, sent) rows of a paths table."""
    return pd.DataFrame([{"host": h, "peer": p, "plane": pl, "ev": ev,
                          "spine": float("nan") if sp < 0 else float(sp), "sent": sent}
                         for h, p, pl, sp, ev, sent in rows])


# h0, h1 on leaf a; h2, h3 on leaf b (both planes); the ring's hops h0->h2 and h1->h3 go a->b
LEAVES = {(h, pl): ("a" if h in ("h0", "h1") else "b") for h in ("h0", "h1", "h2", "h3")
          for pl in (0, 1)}
RANKS = {0: "h0", 1: "h1", 2: "h2", 3: "h3"}


def test_two_single_path_flows_on_one_spine_link_halve_the_bound():
    """Plane 0: both a->b hops hashed to spine 0 share its links, each at half the rate;
    plane 1: spines 0 and 1, no collision. Every step waits for the slowest: 1/2."""
    paths = _paths([("h0", 2, 0, 0, 0, 100), ("h1", 3, 0, 0, 0, 100),
                    ("h0", 2, 1, 0, 0, 100), ("h1", 3, 1, 1, 0, 100)])
    assert M.collision_bound(paths, LEAVES, RANKS) == 0.5
    apart = _paths([("h0", 2, 0, 0, 0, 100), ("h1", 3, 0, 1, 0, 100)])
    assert M.collision_bound(apart, LEAVES, RANKS) == 1.0


def test_sprayed_flows_are_bounded_by_their_imbalance_only():
    """Each hop sprays over 4 spines: a link carries 2 x 25 of a flow's 100 packets, no
    bottleneck; a hop that crosses no spine is no collision either."""
    even = _paths([(h, p, 0, s, s, 25) for h, p in (("h0", 2), ("h1", 3)) for s in range(4)])
    assert M.collision_bound(even, LEAVES, RANKS) == 1.0
    same_leaf = _paths([("h0", 1, 0, -1, 0, 100)])
    assert M.collision_bound(same_leaf, LEAVES, RANKS) is None


def test_a_host_port_names_its_leaf():
    links = pd.DataFrame({"node": ["h0", "h0", "p0l0"], "plane": [0, 1, 0],
                          "link": ["h0-p0l0", "h0-p1l0", "h0-p0l0"],
                          "kind": ["host", "host", "host"]})
    assert M.host_leaves(links) == {("h0", 0): "p0l0", ("h0", 1): "p1l0"}


def test_a_fault_overlapping_many_names_the_first_few_and_counts_the_rest():
    from analysis.summary import OVERLAPS_NAMED, _some
    names = [f"loss h{k} port of plane 0" for k in range(OVERLAPS_NAMED + 28)]
    assert _some(names[:OVERLAPS_NAMED]) == ", ".join(names[:OVERLAPS_NAMED])
    assert _some(names) == f"{', '.join(names[:OVERLAPS_NAMED])} and 28 more"
