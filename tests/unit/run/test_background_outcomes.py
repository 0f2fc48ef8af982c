"""Background flows count as run only when iperf3 says so: a client that
could not connect, or never started, is not traffic, and the shaded windows are what ran."""
from __future__ import annotations

import json
from pathlib import Path

from runcontract import BackgroundWindow
from testbed.emulation.background import BackgroundTraffic
from testbed.scenario.background import Flow

REFUSED = ("unable to connect to server - server may have stopped running or use a different "
           "port, firewall issue, etc.: Connection refused")


def test_only_flows_iperf3_reports_as_run_count(tmp_path: Path):
    flows = [Flow(0, "h0", "h1", 0, "tcp", None, 1.0, 2.0, 0),
             Flow(1, "h2", "h1", 0, "tcp", None, 1.0, 2.0, 0),
             Flow(2, "h3", "h0", 0, "udp", 10**6, 5.0, 1.0, 1),
             Flow(3, "h1", "h3", 0, "udp", 10**6, 9.0, 1.0, 2)]
    bg = BackgroundTraffic(None, flows, tmp_path)
    t0 = 100.0
    bg.started = {0: 101.02, 1: 101.05, 2: 105.01}  # flow 3 never started
    (tmp_path / "flow0-client.json").write_text(json.dumps(
        {"start": {}, "end": {"sum_sent": {"seconds": 2.0, "bytes": 5_000_000}}}))
    (tmp_path / "flow1-client.json").write_text(json.dumps(
        {"start": {}, "intervals": [], "end": {}, "error": REFUSED}))
    (tmp_path / "flow2-client.json").write_text('{"start": {')  # killed mid-write
    bg.stop()
    assert [o["ran"] for o in bg.outcomes] == [True, False, False, False]
    assert bg.outcomes[0]["bytes"] == 5_000_000
    assert "Connection refused" in bg.outcomes[1]["error"]
    assert bg.outcomes[3]["error"].startswith("not started")
    summary = bg.summary()
    assert (summary["flows"], summary["started"], summary["ran"]) == (4, 3, 1)
    assert len(summary["failed"]) == 3
    scheduled = [BackgroundWindow("incast", "tcp", 0, 1.0, 3.0),
                 BackgroundWindow("elephant", "udp", 0, 5.0, 6.0),
                 BackgroundWindow("elephant", "udp", 0, 9.0, 10.0)]
    assert bg.windows(t0, scheduled) == [BackgroundWindow("incast", "tcp", 0, 1.02, 3.02)]
    on_disk = json.loads((tmp_path / "flows.json").read_text())
    assert [f["ran"] for f in on_disk] == [True, False, False, False]


def test_stopped_before_the_timeline_started(tmp_path: Path):
    """A run interrupted before the workload's start: stop() still says what did not run
    (found by the random interrupt test: flows.json into a folder never made)."""
    out = tmp_path / "background"
    bg = BackgroundTraffic(None, [Flow(0, "h0", "h1", 0, "tcp", None, 1.0, 2.0, 0)], out)
    bg.stop()
    assert json.loads((out / "flows.json").read_text())[0]["ran"] is False


def test_a_client_ended_with_the_workload_ran_for_what_it_sent(tmp_path: Path):
    """iperf3 ended by SIGTERM (the workload ended first) writes what it sent with an
    `interrupt` error: the flow ran, for that long, cut short; a server's end is no traffic."""
    flows = [Flow(0, "h0", "h1", 0, "tcp", None, 1.0, 4.0, 0),
             Flow(1, "h2", "h1", 0, "tcp", None, 1.0, 4.0, 0)]
    bg = BackgroundTraffic(None, flows, tmp_path)
    bg.started = {0: 101.0, 1: 101.0}
    (tmp_path / "flow0-client.json").write_text(json.dumps(
        {"end": {"sum_sent": {"seconds": 1.2, "bytes": 3_000_000}},
         "error": "interrupt - the client has terminated"}))
    (tmp_path / "flow1-client.json").write_text(json.dumps(
        {"end": {}, "error": "the server has terminated"}))
    bg.stop()
    first, second = bg.outcomes
    assert (first["ran"], first["seconds"], first["cut_short"]) == (True, 1.2, True)
    assert second["ran"] is False and "server has terminated" in second["error"]
    scheduled = [BackgroundWindow("incast", "tcp", 0, 1.0, 5.0)]
    assert bg.windows(100.0, scheduled) == [BackgroundWindow("incast", "tcp", 0, 1.0, 2.2)]
