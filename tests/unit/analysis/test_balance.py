"""Load balance, EV state time, counters and link utilisation on small hand-made frames."""
from __future__ import annotations

import pandas as pd
import pytest

from analysis import metrics as M
from testbed.run.results import facts
from testbed.scenario import parse


def test_balance_even_and_skewed():
    even = M.balance([5, 5, 5, 5])
    assert (even.max_over_mean, even.min_over_mean, even.cov) == (1, 1, 0)
    skew = M.balance([1, 3])
    assert skew.mean == 2 and skew.max_over_mean == 1.5 and skew.min_over_mean == 0.5
    assert skew.cov == pytest.approx(0.5)


def test_ev_balance_per_qp_leaves_out_denied_and_idle_qps():
    paths = pd.DataFrame({"host": ["h0"] * 5, "peer": [1, 1, 1, 2, 2], "qpn": [1, 1, 1, 2, 2],
                          "ev": [0, 1, 2, 0, 1], "plane": [0, 1, 1, 0, 1],
                          "state": ["GOOD", "GOOD", "DENIED", "GOOD", "GOOD"],
                          "sent": [30, 10, 0, 0, 0]})
    b = M.ev_balance(paths)
    assert len(b) == 1 and b["n"].iloc[0] == 2 and b["max_over_mean"].iloc[0] == 1.5


def test_ev_segments_and_state_time():
    paths = pd.DataFrame({"host": ["h0", "h0"], "peer": [1, 1], "qpn": [1, 1], "ev": [0, 1],
                          "plane": [0, 1], "state": ["GOOD", "GOOD"]})
    changes = pd.DataFrame({"host": ["h0", "h0"], "peer": [1, 1], "qpn": [1, 1], "ev": [0, 0],
                            "time": [101.0, 103.0], "old": ["GOOD", "ASSUMED_BAD"],
                            "new": ["ASSUMED_BAD", "GOOD"], "reason": ["", ""]})
    seg = M.ev_segments(changes, paths, t0=100.0, t_end=5.0)
    ev0 = seg[seg["ev"] == 0]
    assert ev0[["state", "start", "end"]].values.tolist() == [
        ["GOOD", 0.0, 1.0], ["ASSUMED_BAD", 1.0, 3.0], ["GOOD", 3.0, 5.0]]
    t = M.state_time(seg)
    assert t.loc[("h0", 1, 1, 0), "ASSUMED_BAD"] == 2.0
    assert t.loc[("h0", 1, 1, 1), "GOOD"] == 5.0


def test_rocev2_has_no_ev_frames():
    assert M.ev_segments(pd.DataFrame(), pd.DataFrame(), 0, 1).empty
    assert M.ev_balance(pd.DataFrame()).empty


def test_qp_counters_sum_per_host():
    qps = pd.DataFrame({"host": ["h0", "h0", "h1"], "retransmits": [1, 2, 5],
                        "timeouts": [0, 1, 0]})
    c = M.qp_counters(qps)
    assert c.loc["h0"].tolist() == [3, 1] and list(c.columns) == ["retransmits", "timeouts"]


def _links(with_fabric_queue: bool) -> pd.DataFrame:
    """h0's port to p0l0 and the leaf's port back, sampled at 100.0, 100.5, 101.0."""
    rows = []
    for k, t in enumerate([100.0, 100.5, 101.0]):
        for node, ifname in (("h0", "h0-eth0"), ("p0l0", "p0l0-eth0")):
            row = {"time": t, "node": node, "ifname": ifname, "link": "h0-p0l0",
                   "kind": "host", "plane": 0, "tx_bytes": 625_000 * k * (node == "h0"),
                   "tx_packets": k, "tx_drop": k, "rx_bytes": 0,
                   "queue_drops": float(2 * k) if k != 1 else float("nan")}
            if with_fabric_queue:
                row |= {"ecn_marked": float("nan") if node == "h0" else 3.0 * k,
                        "trimmed": float("nan"), "bpf_dropped": float("nan"),
                        "vq_bytes": 0.0}
            rows.append(row)
    return pd.DataFrame(rows)


@pytest.mark.parametrize("with_fabric_queue", [False, True])
def test_port_rates_utilisation_and_drops(with_fabric_queue: bool):
    links = _links(with_fabric_queue)
    r = M.port_rates(links, t0=100.0, rates={"host": 20e6, "fabric": 20e6})
    h0 = r[r["node"] == "h0"]
    assert h0["time"].tolist() == [0.5, 1.0]
    assert h0["tx_bps"].tolist() == pytest.approx([10e6, 10e6])  # 625 kB per 0.5 s
    assert h0["util"].tolist() == pytest.approx([0.5, 0.5])
    assert h0["drops"].tolist() == [1, 1 + 4]  # the queue's 4 drops show when it is read
    totals = M.port_totals(links)
    assert totals.loc[("h0", "h0-eth0"), "tx_bytes"] == 1_250_000
    assert totals.loc[("h0", "h0-eth0"), "queue_drops"] == 4
    if with_fabric_queue:
        assert totals.loc[("p0l0", "p0l0-eth0"), "ecn_marked"] == 6
        assert totals.loc[("h0", "h0-eth0"), "ecn_marked"] == 0
    grid = M.utilisation_grid(r, 0.5, 1.0, "plane")
    assert grid.columns.tolist() == [0.0, 0.5] and grid.loc[0].tolist() == [0.25, 0.25]


def test_ports_direction_and_order():
    tiers = facts(parse("name: t", "t"), "mrc").node_tiers
    links = pd.DataFrame({"node": ["p0s0", "p0l0", "h0", "p0l0"],
                          "ifname": ["p0s0-eth0", "p0l0-eth2", "h0-eth0", "p0l0-eth0"],
                          "link": ["p0l0-p0s0", "p0l0-p0s0", "h0-p0l0", "h0-p0l0"],
                          "kind": ["fabric", "fabric", "host", "host"], "plane": [0] * 4})
    p = M.ports(links, tiers)
    assert p["label"].tolist() == ["h0→p0l0", "p0l0→h0", "p0l0→p0s0", "p0s0→p0l0"]
    assert p["direction"].tolist() == ["up", "down", "up", "down"]


def test_run_labels_name_what_differs():
    """Transports alone when they differ; scenario and transport in a sweep; the folder name
    when even those repeat."""
    from pathlib import Path

    from analysis.load import Run
    from analysis.report import labels
    from tests.unit.made_runs import run_meta

    def run(folder: str, scenario: str, transport: str) -> Run:
        return Run(Path(folder), run_meta(transport=transport),
                   facts(parse(f"name: {scenario}", "t"), transport), {})

    assert labels([run("a", "q", "mrc"), run("b", "q", "rocev2")]) == ["mrc", "rocev2"]
    assert labels([run("a", "loss-0", "mrc"), run("b", "loss-1pct", "mrc"),
                   run("c", "loss-1pct", "rocev2")]) == ["loss-0 mrc", "loss-1pct mrc",
                                                         "rocev2"]
    assert labels([run("x1", "q", "mrc"), run("x2", "q", "mrc")]) == ["x1", "x2"]
