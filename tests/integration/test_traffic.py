"""Real bytes over the fabric: collectives verified on every rank, over MRC and RoCEv2."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from testbed import scenario as scenario_mod
from testbed.emulation.verify import verify
from testbed.lifecycle.progress import Progress
from testbed.run.traffic import run_agents

from .helpers import build, run_cli, run_scenario

SMALL = """name: {name}
fabric: {{host_link: {{rate: 25Mbit}}, fabric_link: {{rate: 25Mbit}}}}
workload: {{collective: {kind}, size: 256KiB, iterations: 2, warmup: 1}}
"""


@pytest.mark.parametrize("kind", ["all_reduce", "all_gather", "reduce_scatter", "all_to_all"])
def test_collective_verified_on_both_transports(kind: str, tmp_path: Path, results_dir: Path):
    runs = run_scenario(SMALL.format(name=kind.replace("_", "-"), kind=kind), tmp_path,
                        results_dir)
    assert [r.name.rsplit("-", 1)[1] for r in runs] == ["mrc", "rocev2"]
    for run in runs:
        meta = json.loads((run / "meta.json").read_text())
        assert meta["status"] == "complete" and meta["transport"] in run.name
        it = pd.read_parquet(run / "iterations.parquet")
        assert len(it) == 4 * 3 and it.verified.all() and it.error.isna().all()
        msgs = pd.read_parquet(run / "messages.parquet")
        assert (msgs["end"] >= msgs["start"]).all() and msgs["size"].sum() > 0
        summary = (run / "summary.txt").read_text()
        assert f"# {kind} over {meta['transport']} ({meta['variant']}), 4 ranks" in summary
        links = pd.read_parquet(run / "links.parquet")
        assert links.groupby(["node", "ifname"]).ngroups == 32, "every port of 16 links"
        if meta["transport"] == "mrc":  # each EV's load over time ends below its final count
            load = pd.read_parquet(run / "ev_load.parquet")
            last = load.sort_values("time").groupby(["host", "qpn", "ev"])["sent"].last()
            final = pd.read_parquet(run / "paths.parquet").set_index(["host", "qpn", "ev"])
            assert last.sum() > 0 and (last <= final["sent"].reindex(last.index)).all()
        for _, port in links.groupby(["node", "ifname"]):
            assert port.sort_values("time").tx_bytes.is_monotonic_increasing
        sent = msgs[msgs["rank"] == 0]["size"].sum()
        h0 = links[links.node == "h0"].groupby("ifname").tx_bytes.agg(lambda b: b.max() - b.min())
        assert h0.sum() >= sent, "h0's ports carried at least the payload rank 0 wrote"
        assert meta["telemetry"]["error"] is None and meta["telemetry"]["samples"] > 5
        assert "# Wrong results        : 0" in summary
    mrc = pd.read_parquet(runs[0] / "messages.parquet")
    cross_leaf = mrc[mrc["rank"].isin([0, 1]) & mrc["peer"].isin([2, 3]) & (mrc["size"] > 16384)]
    # MRC sprays over both planes' spines; a message may skip an EV while it is held off for
    # congestion (ECN marks, more of them on a loaded machine: one QP has held an EV off for
    # 10 of its 18 messages), so messages use more than three EVs on average, and every QP
    # all four over its messages; a one-path transport would use one, one plane two
    assert cross_leaf.evs_used.apply(len).mean() > 3, cross_leaf.evs_used
    used = cross_leaf.groupby(["rank", "peer"]).evs_used.agg(lambda e: len(set().union(*e)))
    assert (used == 4).all(), used
    roce = pd.read_parquet(runs[1] / "messages.parquet")
    assert roce.evs_used.apply(lambda e: list(e) == [0]).all(), (
        "RoCEv2 has one path (index 0), chosen by the fabric's ECMP hash")


def test_mrc_completes_with_a_spine_link_down(tmp_path: Path):
    """p0l1-p0s0 down before the run: EV (plane 0, spine 0) between the two leaves is dead;
    MRC condemns it and finishes on the other three. A healthy EV may be condemned for a
    moment (a packet late behind another plane's queue reads as lost to RACK on a loaded
    machine) and must then be cleared by its probes: only the dead EV ends the run bad."""
    text = SMALL.format(name="linkdown", kind="all_reduce") + "transport: [mrc]\n"
    network = build(text, tmp_path)
    try:
        assert verify(network, Progress(quiet=True)).ok
        network.set_link("p0l1", "p0s0", up=False)
        sc = scenario_mod.parse(text, "test")
        outcomes = run_agents(network, sc, "mrc", tmp_path / "agents")
        assert all(o.result["status"] == "ok" for o in outcomes), [o.result for o in outcomes]
        bad = set()
        for o in outcomes:
            report = json.loads((tmp_path / "agents" / o.host / "paths.json").read_text())
            bad |= {(o.rank, e["peer"], e["ev"]) for e in report["evs"]
                    if e["state"] != "GOOD"}
        assert bad, "the dead EV was never condemned"
        crossing = {(r, p) for r in range(4) for p in range(4) if (r < 2) != (p < 2)}
        assert all(ev == 0 and (r, p) in crossing for r, p, ev in bad), bad
    finally:
        network.close()


def test_denied_paths_are_never_used(tmp_path: Path, results_dir: Path):
    (run,) = run_scenario(SMALL.format(name="denied", kind="all_reduce")
                          + "transport: [mrc]\nmrc: {denied: [{plane: 0, spine: 1}]}\n",
                          tmp_path, results_dir)
    msgs = pd.read_parquet(run / "messages.parquet")
    cross = msgs[(msgs["rank"] < 2) != (msgs["peer"] < 2)]
    used = set().union(*cross.evs_used.apply(set))
    assert used == {0, 2, 3}, "EV 1 is plane 0, spine 1: denied"
    paths = pd.read_parquet(run / "paths.parquet")
    crossing = paths[(paths["rank"] < 2) != (paths["peer"] < 2)]
    assert (crossing[crossing.ev == 1].state == "DENIED").all()
    assert (crossing[crossing.ev == 1].sent == 0).all()


def test_rocev2_with_several_qps_per_peer(tmp_path: Path, results_dir: Path):
    """The MRC paper's 1/8/16-QP RoCEv2 comparison: 4 QPs per peer, spread over both planes,
    each with its own entropy; every write split across them, still verified."""
    (run,) = run_scenario(SMALL.format(name="roce4", kind="all_reduce")
                          + "transport: [rocev2]\nqp: {qps_per_peer: {rocev2: 4}}\n",
                          tmp_path, results_dir)
    qps = pd.read_parquet(run / "qps.parquet")
    assert qps.groupby(["rank", "peer"]).size().eq(4).all()
    busy = qps[qps.data_sent > 0]
    assert busy.groupby(["rank", "peer"]).size().eq(4).all(), "every QP carried a part"
    assert "(2 planes x 25 Mbit/s)" in (run / "summary.txt").read_text()
    assert pd.read_parquet(run / "iterations.parquet").verified.all()


def test_rocev2_entropies_land_on_different_spines(tmp_path: Path, results_dir: Path):
    """Each RoCEv2 QP's UDP source port (drawn from the seed) is hashed by the leaves (their
    ECMP seed from the scenario seed too): 4 QPs per peer over 4 spines land on several
    spines, paths.parquet names each QP's spine, and the spines' own port counters agree:
    exactly the spines paths.parquet names carried the traffic. Another seed (other ports,
    other hash seeds at the leaves) puts the QPs elsewhere; the same seed, in the same place
    (checked by hand: 48 of 48 QPs on the same spine over two builds)."""
    text = ("name: entropy\nfabric: {spines_per_plane: 4, host_link: {rate: 25Mbit}, "
            "fabric_link: {rate: 25Mbit}}\n"
            "workload: {collective: all_to_all, size: 256KiB, iterations: 1, warmup: 0}\n"
            "transport: [rocev2]\nqp: {qps_per_peer: {rocev2: 4}}\n")
    (run,) = run_scenario(text, tmp_path, results_dir)
    paths = pd.read_parquet(run / "paths.parquet")
    crossing = paths[paths["spine"].notna() & (paths["sent"] > 0)]
    assert len(crossing) == 4 * 2 * 4, "h0,h1 <-> h2,h3: 8 ordered pairs x 4 QPs"
    assert crossing["sport"].nunique() == len(crossing)
    assert crossing.groupby("plane")["spine"].nunique().min() >= 2, crossing
    links = pd.read_parquet(run / "links.parquet")
    carried = links.groupby(["node", "ifname"])["tx_bytes"].agg(lambda b: b.max() - b.min())
    by_spine = carried.groupby(level="node").sum()
    used = {f"p{int(p)}s{int(s)}" for p, s in zip(crossing["plane"], crossing["spine"])}
    busy = {node for node, b in by_spine.items() if re.fullmatch(r"p\d+s\d+", node)
            and b > 12_000}  # a QP carries 16 KiB; an unused spine, the probes (< 4 KB)
    assert busy == used, (busy, used)
    (tmp_path / "seed2").mkdir()
    (other,) = run_scenario(text.replace("name: entropy", "name: entropy2\nseed: 2"),
                            tmp_path / "seed2", tmp_path / "seed2" / "results")
    spines = paths.set_index(["host", "qpn"])["spine"]
    other_spines = pd.read_parquet(other / "paths.parquet").set_index(["host", "qpn"])["spine"]
    assert not spines.fillna(-1).equals(other_spines.fillna(-1)), "another seed, other spines"


def test_gso_batching_sends_the_same_verified_bytes(tmp_path: Path, results_dir: Path):
    for run in run_scenario(SMALL.format(name="gso", kind="all_reduce") + "qp: {gso: true}\n",
                            tmp_path, results_dir):
        assert pd.read_parquet(run / "iterations.parquet").verified.all()


def test_capture_of_a_spine_port_shows_usid_traffic(tmp_path: Path, results_dir: Path):
    text = SMALL.format(name="cap", kind="all_reduce") + "transport: [mrc]\n"
    (run,) = run_scenario(text, tmp_path, results_dir, "--capture", "p0s0-eth1")
    pcap = run / "capture-p0s0-eth1.pcap"
    text = subprocess.run(["tcpdump", "-nr", str(pcap)], capture_output=True, text=True).stdout
    # spine p0s0 toward leaf p0l1: its own uSID already shifted out, the leaf's next
    assert re.search(r"> fcbb:bb00:d001:10[23]::\.4791: UDP", text), text[:2000]
    bad = run_cli("run", str(tmp_path / "scenario.yaml"), "--capture", "nope-eth9",
                  results=results_dir)
    assert bad.returncode == 2 and "--capture nope-eth9: no such port" in bad.stderr
