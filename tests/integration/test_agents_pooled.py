"""The pooled agent mode (one process serving many hosts) against the per-host mode: each host's
sockets live in its own namespace, and a run gives the same results either way."""
from __future__ import annotations

import os
import socket
from pathlib import Path

import pandas as pd
import pytest

from hostagent.runtime import netns
from testbed import scenario as scenario_mod
from testbed.fabric.plan import make_plan
from testbed.run.collect import collect
from testbed.run.traffic import run_agents


def test_sockets_opened_in_a_hosts_namespace_stay_there(quickstart):
    h2 = f"/proc/{quickstart.pid('h2')}/ns/net"
    assert netns.call_in(h2, netns.current) == os.stat(h2).st_ino != netns.current()
    plain = str(quickstart.plan.plain_address("h2", 0))

    def bound() -> socket.socket:
        sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        sock.bind((plain, 0))  # an address only h2's namespace has
        return sock

    with pytest.raises(OSError):
        bound().close()  # not here
    sock = netns.call_in(h2, bound)
    try:  # the socket works from this thread, in h2's namespace: it reaches h2's own address
        sock.sendto(b"x", (plain, sock.getsockname()[1]))
        sock.settimeout(2)
        assert sock.recv(10) == b"x"
    finally:
        sock.close()
    assert netns.current() != os.stat(h2).st_ino, "the caller's thread did not move"


@pytest.mark.parametrize("transport", ["mrc", "rocev2"])
def test_pooled_and_per_host_modes_give_the_same_results(quickstart, tmp_path: Path,
                                                         transport: str):
    sc = scenario_mod.parse("name: quickstart\nworkload: {size: 256KiB, iterations: 2}\n"
                            "agents: {processes: 2}\n", "test")
    runs = {}
    for mode in ("per_host", "pooled"):
        out = tmp_path / mode
        outcomes = run_agents(quickstart, sc, transport, out / "agents", mode=mode)
        assert [o.result["status"] for o in outcomes] == ["ok"] * 4, [o.result for o in outcomes]
        collect(out / "agents", out, outcomes, make_plan(sc), transport)
        runs[mode] = {t: pd.read_parquet(out / f"{t}.parquet")
                      for t in ("iterations", "messages", "qps")}
        for o in outcomes:  # each host's own log: its own lines only, ending with its status
            lines = (out / "agents" / o.host / "agent.log").read_text().strip().splitlines()
            assert lines and all(f" {o.host} rank {o.rank}: " in ln for ln in lines), lines
            assert lines[-1].endswith(": ok")
    pids = {mode: len(list((tmp_path / mode / "agents").glob("pool-*.json")))
            for mode in runs}
    assert pids == {"per_host": 0, "pooled": 2}
    for mode, r in runs.items():
        assert r["iterations"].verified.all() and len(r["iterations"]) == 4 * 3, mode
    # the same writes (who wrote how much to whom, in each iteration), the same QPs, and every
    # byte placed where it was meant to be placed: the mode changed nothing a run reports
    key = ["rank", "iteration", "peer", "size"]
    a, b = (runs[m]["messages"][key].sort_values(key).reset_index(drop=True) for m in runs)
    pd.testing.assert_frame_equal(a, b)
    qa, qb = (runs[m]["qps"].sort_values(["rank", "qpn"]).reset_index(drop=True) for m in runs)
    assert list(qa.placed_bytes) == list(qb.placed_bytes)
    assert (list(qa[["rank", "peer", "qpn"]].itertuples(index=False)) ==
            list(qb[["rank", "peer", "qpn"]].itertuples(index=False)))
