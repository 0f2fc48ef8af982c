"""Times in scenario files: units, the latencies that require them, and the real frame's rule
that every time it states names its unit."""
from __future__ import annotations

import pytest

from testbed.errors import ScenarioError
from testbed.scenario import parse
from testbed.scenario.units import format_time, parse_time, parse_unit_time

LINK = "{plane: 0, leaf: 0, spine: 0}"


@pytest.mark.parametrize("text, seconds", [
    ("1us", 1e-6), ("2.5ms", 0.0025), ("500ns", 5e-7), ("3s", 3.0), ("3", 3.0),
    ("10min", 600.0), ("1.5h", 5400.0), ("4 US", 4e-6), (2, 2.0), (0.25, 0.25),
])
def test_a_time_is_read_in_seconds(text: object, seconds: float):
    assert parse_time(text) == seconds


@pytest.mark.parametrize("text", ["x", "1 parsec", "1e-6", "", True, None, [1]])
def test_a_time_that_is_not_one_is_refused(text: object):
    with pytest.raises(ValueError, match="a time like '1us'"):
        parse_time(text)


def test_a_time_that_needs_its_unit_takes_no_bare_number_but_zero():
    assert parse_unit_time("1us") == 1e-6 and parse_unit_time(0) == 0.0
    for bare in (1, 0.5, "2"):
        with pytest.raises(ValueError, match="its unit written out"):
            parse_unit_time(bare)


@pytest.mark.parametrize("seconds, text", [
    (4e-3, "4 ms"), (1e-6, "1 us"), (2.5, "2.5 s"), (1800, "30 min"), (7200, "2 h"), (0, "0 s"),
    (3e-9, "3 ns")])
def test_times_print_in_their_unit(seconds: float, text: str):
    assert format_time(seconds) == text


def test_scenario_times_take_units_and_bare_seconds_keep_their_meaning():
    sc = parse(f"name: t\nworkload: {{compute_gap: 20ms}}\nfaults:\n"
               f"  - {{at: 800ms, kind: link_down, target: {LINK}, duration: 2}}\n"
               f"background: [{{pattern: elephant, src: h0, dst: h3, at: 0.5, duration: 2s}}]\n",
               "t")
    assert sc.workload.compute_gap == 0.02
    assert (sc.faults[0].at, sc.faults[0].duration) == (0.8, 2.0)
    assert (sc.background[0].at, sc.background[0].duration) == (0.5, 2.0)


def test_latencies_take_units():
    sc = parse("name: t\nfabric: {hop_latency: 1us, nic_latency: 500ns}\n", "t")
    assert (sc.fabric.hop_latency, sc.fabric.nic_latency) == (1e-6, 5e-7)
    assert parse("name: t\n", "t").fabric.hop_latency == 0.0


@pytest.mark.parametrize("value, message", [
    ("1", "fabric.hop_latency: 1 is not allowed: a time like '1us', '2.5ms' or '3s' (units: ns, "
          "us, ms, s, min, h), its unit written out"),
    ("-1us", "fabric.hop_latency: '-1us' is not allowed: -1 us is outside 0 s..1 s"),
    ("2s", "fabric.hop_latency: '2s' is not allowed: 2 s is outside 0 s..1 s"),
])
def test_a_bad_latency_is_one_clear_error(value: str, message: str):
    with pytest.raises(ScenarioError) as info:
        parse(f"name: t\nfabric: {{hop_latency: {value}}}\n", "t.yaml")
    assert str(info.value) == f"t.yaml: invalid scenario (1 problem):\n  {message}"


def test_in_the_real_frame_every_stated_time_names_its_unit():
    text = ("name: t\nfabric: {real_rate: 100Gbit, hop_latency: 1us}\n"
            "workload: {compute_gap: 0.01}\nfaults:\n"
            f"  - {{at: 1, kind: link_down, target: {LINK}, duration: 2ms}}\n"
            f"  - {{at: 0, kind: loss, target: {LINK}, probability: 0.01, duration: 3}}\n")
    with pytest.raises(ScenarioError) as info:
        parse(text, "t.yaml")
    message = str(info.value)
    assert "with fabric.real_rate" in message
    assert message.endswith(": workload.compute_gap, faults.0.at, faults.1.duration")


def test_in_the_real_frame_zero_and_times_with_units_pass():
    sc = parse("name: t\nfabric: {real_rate: 100Gbit, hop_latency: 1us}\n"
               f"faults: [{{at: 0, kind: link_down, target: {LINK}, duration: 2ms}}]\n"
               "background: [{pattern: elephant, src: h0, dst: h3, at: 1ms, duration: 1ms}]\n",
               "t")
    assert sc.faults[0].duration == 0.002
    # a real-frame duration need not be whole seconds: its emulated one is rounded to them
    assert sc.background[0].duration == 0.001


def test_the_wall_time_bound_takes_units():
    assert parse("name: t\nmax_wall_time: 2h\n", "t").max_wall_time == 7200.0
    assert parse("name: t\n", "t").max_wall_time == 1800.0


def test_a_real_frame_scenario_dumped_and_validated_again_is_the_same():
    """The cluster mode sends the scenario to its servers as JSON, its times bare seconds."""
    sc = parse("name: t\nfabric: {real_rate: 100Gbit, hop_latency: 1us}\n"
               f"faults: [{{at: 1ms, kind: link_down, target: {LINK}, duration: 2ms}}]\n", "t")
    again = type(sc).model_validate(sc.model_dump(mode="json"))
    assert again.model_dump() == sc.model_dump() and again.fabric.hop_latency == 1e-6
