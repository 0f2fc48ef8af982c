"""The run's wall time, estimated before anything is built, and the refusals: every number by
hand from the scenario's own values."""
from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from testbed import cli
from testbed.errors import ScenarioError
from testbed.fabric import frame
from testbed.lifecycle.progress import Progress
from testbed.run import runner, wall_time
from testbed.scenario import parse

# D = 100 Gbit/s / 25 Mbit/s = 4,000; four hosts, h0 h1 on leaf 0, h2 h3 on leaf 1
SCENARIO = """name: rf
fabric: {planes: 2, leaves_per_plane: 2, spines_per_plane: 2, hosts_per_leaf: 2,
         host_link: {rate: 25Mbit}, fabric_link: {rate: 50Mbit}, mtu: 4200,
         real_rate: 100Gbit, hop_latency: 1us, nic_latency: 500ns}
switch: {ecn: false, trim: false}
qp: {mss: 4096, compress_above_rtts: 2}
workload: {size: 1MiB, iterations: 5, warmup: 1, compute_gap: 1ms}
faults:
  - {at: 1ms, kind: link_down, target: {plane: 0, leaf: 0, spine: 0}, duration: 2ms}
"""
D = 100e9 / 25e6
ONE_WAY = 4 * 1e-6 * D + 2 * 0.5e-6 * D  # across a spine: 4 links and both NICs
BYTES = 2**20 * 2 * 3 / 4  # a ring all-reduce over 4 ranks sends 2 (n - 1) / n of the array
ITERATION = BYTES * 8 / (2 * 25e6) + 2 * 3 * ONE_WAY  # 2 planes; 2 (n - 1) ring steps
WORKLOAD = 6 * ITERATION + 5 * 1e-3 * D  # 5 + 1 warmup iterations, a gap between each two
TOTAL = 2 * max(WORKLOAD, (1e-3 + 2e-3) * D)  # per transport, workload or faults; mrc, rocev2


def test_the_estimate_by_hand():
    found = wall_time.estimate(parse(SCENARIO, "t"))
    assert found.dilation == D
    assert [t.workload for (t,) in found.runs] == pytest.approx([WORKLOAD, WORKLOAD])
    assert found.faults == pytest.approx(12.0) and found.background == 0
    assert found.total == pytest.approx(TOTAL)


def test_a_tree_counts_its_levels_and_a_pairwise_all_to_all_its_rounds():
    """4 ranks: a tree of depth 2 waits 2 x 2 latencies and its busiest rank sends the array
    twice; a pairwise all-to-all waits 3 rounds, sending 3/4 of the array."""
    tree = wall_time.estimate(parse(SCENARIO.replace("size: 1MiB", "size: 1MiB, algorithm: tree"),
                                    "t")).runs[0][0]
    assert (tree.steps, tree.bytes) == (4, 2 * 2**20)
    pairwise = wall_time.estimate(parse(SCENARIO.replace(
        "size: 1MiB", "size: 1MiB, collective: all_to_all, algorithm: pairwise"), "t"))
    assert (pairwise.runs[0][0].steps, pairwise.runs[0][0].bytes) == (3, 2**20 * 3 / 4)


def test_a_step_graph_counts_its_compute_every_iteration():
    text = (Path(__file__).resolve().parents[3] / "scenarios" / "training-quickstart.yaml"
            ).read_text()
    sc = parse(text.replace("transport: [mrc, rocev2]", "transport: [mrc]"), "t")
    ((t,),) = wall_time.estimate(sc).runs
    assert t.computes == 4  # 3 iterations and a warmup, each a whole step
    # every rank runs layers / pp = 2 layers x 2 micro-batches of forward and backward
    assert t.compute == pytest.approx(2 * 2 * (0.005 + 0.010))


def test_validate_prints_the_frame_paths_and_wall_time(tmp_path: Path, capsys):
    f = tmp_path / "rf.yaml"
    f.write_text(SCENARIO)
    assert cli.main(["validate", str(f)]) == 0
    out = capsys.readouterr().out
    packet, ack = (4096 + 40 + 62) * 8, (40 + 62) * 8  # payload, header, UDP/IPv6/Ethernet
    serial_same = 2 * (packet + ack) / 25e6
    serial_across = serial_same + 2 * (packet + ack) / 50e6
    same_rtt = serial_same + 2 * (2 * 4e-3 + 2 * 2e-3)
    across_rtt = serial_across + 2 * ONE_WAY
    assert "frame: real, D = 4,000 (fabric.real_rate 100 Gbit/s / host links 25 Mbit/s)" in out
    assert "latency 4 ms (1 us real) a link, 2 ms (500 ns real) a NIC" in out
    assert (f"path same leaf: 2 links, one way 12 ms (3 us real), round trip "
            f"{same_rtt * 1e3:.3g} ms ({same_rtt / D * 1e6:.3g} us real), BDP "
            f"{same_rtt * 25e6 / packet:.1f} packets") in out
    assert (f"path across a spine: 4 links, one way 20 ms (5 us real), round trip "
            f"{across_rtt * 1e3:.3g} ms ({across_rtt / D * 1e6:.3g} us real), BDP "
            f"{across_rtt * 25e6 / packet:.1f} packets") in out
    assert f"= {WORKLOAD:.3g} s" in out and "faults end at 12 s" in out
    assert f"wall time >= {TOTAL:.3g} s" in out and "limit 30 min (max_wall_time)" in out


def test_a_run_past_its_bound_is_refused_with_the_arithmetic(tmp_path: Path, capsys):
    f = tmp_path / "rf.yaml"
    limit = int(TOTAL) - 1
    f.write_text(SCENARIO + f"max_wall_time: {limit}s\n")
    assert cli.main(["validate", str(f)]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # not "ok", nothing previewed
    assert (f"the run would take at least {TOTAL:.3g} s of wall time, more than "
            f"max_wall_time ({limit} s)") in err
    assert f"= {WORKLOAD:.3g} s" in err and "fix: raise max_wall_time" in err
    f.write_text(SCENARIO + f"max_wall_time: {limit + 2}s\n")
    assert cli.main(["validate", str(f)]) == 0


def test_run_refuses_before_building(monkeypatch):
    """The same refusal from `run`, at the rate that will run, before a plan is made."""
    sc = parse(SCENARIO + "max_wall_time: 10s\n", "t")
    monkeypatch.setattr(runner, "preflight", lambda progress, held: {"end_sids": "seg6local"})
    built = []
    monkeypatch.setattr(runner, "make_plan", lambda s: built.append(s))
    options = runner.RunOptions(Path("/nonexistent"), False, 0.0, False, ())
    with pytest.raises(ScenarioError, match="more than max_wall_time"):
        runner.run(sc, SCENARIO, options, Progress(quiet=True))
    assert built == []


@pytest.mark.parametrize("fabric, period, refused", [
    ("{real_rate: 200Mbit, host_link: {rate: 100Mbit}}", "100us", True),  # 200 us emulated
    ("{real_rate: 200Mbit, host_link: {rate: 100Mbit}}", "500us", False),  # 1 ms emulated
    ("{planes: 2}", "0.0005", True),  # emulated as written
])
def test_a_flap_faster_than_the_emulation_applies_is_refused(fabric: str, period: str,
                                                            refused: bool):
    sc = parse(f"name: fl\nfabric: {fabric}\nfaults: [{{at: 0, kind: flap, target: "
               f"{{host: h0, plane: 0}}, period: {period}, count: 2}}]\n", "t")
    with (pytest.raises(ScenarioError, match="faults.0: a flap period of") if refused
          else contextlib.nullcontext()):
        frame.check(sc, "t")


def test_with_rate_auto_the_dilation_follows_from_the_rate_chosen(tmp_path: Path, capsys,
                                                                  monkeypatch):
    from testbed.emulation import calibration
    from testbed.emulation import pilot_readings as pilot
    monkeypatch.setattr(calibration, "CACHE_DIR", tmp_path / "cache")
    f = tmp_path / "auto.yaml"
    f.write_text("name: auto\nfabric: {host_link: {rate: auto}, fabric_link: {rate: auto}, "
                 "mtu: 4200, real_rate: 100Gbit, hop_latency: 1us}\n"
                 "qp: {mss: 4096, compress_above_rtts: 2}\n")
    assert cli.main(["validate", str(f)]) == 0
    assert "the dilation follows from the rate `run` chooses" in capsys.readouterr().out
    calibration.save(calibration.from_measurement(1.0, 0.15, 10_000, 5.0, 3.0))
    sc = parse(f.read_text(), "t")
    pilot.save(pilot.PilotResult(rate=200_000, fits=True, share=0.75, shape=pilot.shape(sc),
                                 readings=[pilot.Reading(200_000, "mrc", 0.3, 4.0)]))
    assert cli.main(["validate", str(f)]) == 0
    out = capsys.readouterr().out
    # 100 Gbit/s over the 200 kbit/s the pilot chose: D = 500,000, a 1 us hop 0.5 s
    assert "frame: real, D = 500,000" in out and "latency 500 ms (1 us real) a link" in out


def test_validate_warns_of_an_ack_timeout_under_the_round_trip(tmp_path: Path, capsys):
    f = tmp_path / "rf.yaml"
    # the round trip across a spine is 44.1 ms emulated at 1 us a hop, 11 us real; a 10 us
    # timeout (40 ms emulated) is under it, MRC's default 262 us far above
    f.write_text(SCENARIO.replace("compress_above_rtts: 2", "timeout: 10us"))
    assert cli.main(["validate", str(f)]) == 0
    out = capsys.readouterr().out
    assert ("warning: the mrc ACK timeout (10 us (40 ms emulated)) is not above the round "
            "trip across a spine (11 us (44.1 ms emulated))") in out
    f.write_text(SCENARIO)
    assert cli.main(["validate", str(f)]) == 0
    assert "warning" not in capsys.readouterr().out


def test_a_fabric_without_workload_is_not_refused_for_the_workload(monkeypatch):
    """--verify-only runs no workload: its wall time is not the workload's."""
    sc = parse(SCENARIO + "max_wall_time: 10s\n", "t")
    monkeypatch.setattr(runner, "preflight", lambda progress, held: {"end_sids": "seg6local"})

    class Built(Exception):
        pass

    def make_plan(s):
        raise Built
    monkeypatch.setattr(runner, "make_plan", make_plan)
    options = runner.RunOptions(Path("/nonexistent"), True, 0.0, False, ())
    with pytest.raises(Built):
        runner.run(sc, SCENARIO, options, Progress(quiet=True))
