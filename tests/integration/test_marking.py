"""No marks without congestion: a router port fed at its own line rate queues nothing, whatever
the clumps in which the emulation hands it packets, so ECN marks only where flows meet."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from .helpers import run_scenario

LINE_BPS = 10 * 10**6

SCENARIO = """name: {name}
fabric:
  planes: {planes}
  leaves_per_plane: 2
  spines_per_plane: {spines}
  hosts_per_leaf: {hosts_per_leaf}
  host_link: {{rate: 10Mbit, buffer: 40KB{ecn}}}
  fabric_link: {{rate: 10Mbit, buffer: 40KB{ecn}}}
  mtu: 4200
transport: [mrc, rocev2]
qp: {{mss: 4096}}
workload: {{collective: all_reduce, size: 2MiB, iterations: 3, warmup: 1}}
"""


def router_ports(run: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per router port (where the eBPF program runs): its last counters, and its highest
    transmit rate over one sampling interval (bit/s)."""
    links = pd.read_parquet(run / "links.parquet").sort_values("time")
    links = links[links["vq_bytes"].notna()]
    by_port = links.groupby(["node", "ifname"])
    rate = (by_port["tx_bytes"].diff() * 8 / by_port["time"].diff()).groupby(
        [links["node"], links["ifname"]]).max()
    return by_port.last(), rate


def test_one_flow_at_line_rate_is_never_marked_even_at_one_mtu(tmp_path: Path):
    """2 hosts on 4 planes with one spine each: every router port on a path (leaf up, spine
    down, leaf down) carries one flow at line rate and the other direction's ACKs. With ECN
    at a step of one MTU (4200 B) no packet is marked, trimmed or dropped."""
    text = SCENARIO.format(name="line", planes=4, spines=1, hosts_per_leaf=1,
                           ecn=", ecn_threshold: 4200B")
    runs = run_scenario(text, tmp_path, tmp_path / "results")
    for run in runs:
        last, rate = router_ports(run)
        assert len(last) == 4 * 6, "a plane: 2 leaves with 2 ports, a spine with 2"
        assert (rate > 0.9 * LINE_BPS).all(), f"{run.name}: a port below line rate: {rate}"
        counters = last[["ecn_marked", "trimmed", "bpf_dropped"]]
        assert (counters == 0).all().all(), f"{run.name}:\n{counters}"


@pytest.mark.parametrize("transport", ["mrc", "rocev2"])
def test_a_healthy_fabric_without_collisions_marks_under_a_thousandth(tmp_path: Path,
                                                                      transport: str):
    """The quickstart's fabric (2 planes, 2 leaves and 2 spines a plane, 4 hosts) at 10 Mbit/s
    with 40 KB buffers and the default ECN profile: a ring all-reduce puts one flow's data on
    each port (MRC spreads its own over both spines), so under 0.1% of the data packets may be
    marked (counting a packet once per port that marks it). Not none: a host's downlink also
    carries the ACKs of the flow it sends, from another port, and so runs at line rate from
    two inputs, where a queue of a few packets comes and goes as at a switch."""
    text = SCENARIO.format(name="healthy", planes=2, spines=2, hosts_per_leaf=2, ecn="")
    run, = run_scenario(text.replace("[mrc, rocev2]", f"[{transport}]"), tmp_path,
                        tmp_path / "results")
    last, _ = router_ports(run)
    sent = pd.read_parquet(run / "qps.parquet")["data_sent"].sum()
    assert sent > 2000
    assert last["ecn_marked"].sum() < 0.001 * sent, last["ecn_marked"]
