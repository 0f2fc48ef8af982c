"""`workload.algorithm` resolved for a run: the fabric the cost model sees, worked out by hand,
and the choice the agents and the results get."""
from __future__ import annotations

import pytest

from testbed import cli, scenario
from testbed.run.algorithm import cost_fabric, resolve

# D = 10,000: a 1 us hop is 10 ms emulated, a 0.5 us NIC 5 ms; 2 planes of 10 Mbit/s
REAL = ("fabric: {host_link: {rate: 10Mbit}, fabric_link: {rate: 10Mbit}, mtu: 4200, "
        "real_rate: 100Gbit, hop_latency: 1us, nic_latency: 0.5us}\nqp: {mss: 4096}\n")
PACKET = (4096 + 40 + 62) * 8 / 10e6  # a full packet's store-and-forward on one link, s


def parse(workload: str, fabric: str = REAL) -> scenario.Scenario:
    return scenario.parse(f"name: t\n{fabric}workload: {workload}\n", "t")


def test_the_model_sees_a_path_across_a_spine_and_every_plane_at_line_rate():
    fabric = cost_fabric(parse("{collective: all_reduce}"))
    assert fabric.latency_s == pytest.approx(4 * 0.010 + 2 * 0.005 + 3 * PACKET)
    assert fabric.bytes_per_s == pytest.approx(2 * 10e6 / 8)


def test_auto_is_chosen_before_the_agents_start_and_recorded_with_the_model():
    small = resolve(parse("{collective: all_reduce, size: 16KiB, algorithm: auto}"))
    assert small.algorithm == "tree"  # 10 ring latencies against a tree's 4 (4 hosts, depth 2)
    assert small.recorded == "tree"
    assert small.modelled is not None and small.modelled["tree"] < small.modelled["ring"]
    flat = resolve(parse("{collective: all_reduce, size: 64MiB, algorithm: auto}",
                         fabric="fabric: {}\n"))
    assert flat.algorithm == "ring"  # no hop latency: the ring's fewer bytes win


def test_without_a_setting_the_default_runs_and_nothing_is_recorded():
    got = resolve(parse("{collective: all_to_all}"))
    assert (got.algorithm, got.recorded, got.modelled) == ("direct", None, None)


def test_a_step_graph_keeps_its_setting_for_the_agents_to_apply_per_node():
    got = resolve(parse("{training: {dp: 4}, algorithm: auto}"))
    assert (got.algorithm, got.recorded) == (None, "auto")


def test_validate_says_what_auto_will_run(tmp_path, capsys):
    path = tmp_path / "auto.yaml"
    text = REAL.replace("qp: {mss: 4096}", "qp: {mss: 4096, compress_above_rtts: 50}")
    path.write_text(f"name: t\n{text}workload: {{size: 16KiB, algorithm: auto}}\n")
    assert cli.main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "  algorithm: tree (auto; modelled: ring " in out


def test_validate_refuses_an_algorithm_the_collective_lacks(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("name: t\nworkload: {collective: reduce_scatter, algorithm: tree}\n")
    assert cli.main(["validate", str(path)]) == 2
    assert "reduce_scatter has no 'tree' algorithm; it has ring" in capsys.readouterr().err
