"""Scenario files: defaults, and one actionable `ScenarioError` per kind of bad input."""
from __future__ import annotations

import re

import pytest

from testbed import scenario
from testbed.errors import ScenarioError
from testbed.fabric.plan import make_plan
from testbed.scenario.red import RedProfile
from testbed.scenario.units import parse_rate, parse_size


def parse(text: str) -> scenario.Scenario:
    return scenario.parse(text, "exp.yaml", default_name="exp")


def error_of(text: str) -> str:
    """The message of the ScenarioError that `text` must raise (and check it is exit code 2)."""
    with pytest.raises(ScenarioError) as info:
        parse(text)
    assert info.value.exit_code == 2
    return str(info.value)


# ---- valid files and defaults -----------------------------------------------------------------

def test_minimal_file_gets_every_default():
    s = scenario.parse("name: q", "x")
    assert s.name == "q"
    assert s.description == ""
    assert s.seed == 1
    f = s.fabric
    assert (f.planes, f.leaves_per_plane, f.spines_per_plane, f.hosts_per_leaf) == (2, 2, 2, 2)
    assert f.hosts is None and f.host_count == 4
    assert f.node_count == 4 + 2 * (2 + 2) == 12
    assert f.link_count == 2 * (4 + 2 * 2) == 16
    assert f.host_link.rate == 100_000_000 and f.host_link.buffer == 100_000
    assert f.fabric_link.rate == 100_000_000 and f.fabric_link.buffer == 100_000
    assert f.mtu == 1500
    n = s.naming
    assert (n.host, n.plane, n.leaf, n.spine) == ("h", "p", "l", "s")
    v = s.verify
    assert (v.probes, v.max_all, v.timeout, v.retries) == ("auto", 100_000, 2.0, 2)


def test_empty_file_takes_the_default_name():
    assert parse("").name == "exp"


def test_name_missing_without_default_is_reported():
    with pytest.raises(ScenarioError) as info:
        scenario.parse("seed: 3", "x.yaml")
    assert "name: required, missing" in str(info.value)


def test_rates_and_sizes_are_written_with_units():
    s = parse("fabric:\n  host_link: {rate: 1Gbit, buffer: 64KiB}\n"
              "  fabric_link: {rate: 2.5Gbit, buffer: 200KB}\n")
    assert s.fabric.host_link.rate == 1_000_000_000
    assert s.fabric.host_link.buffer == 65_536
    assert s.fabric.fabric_link.rate == 2_500_000_000
    assert s.fabric.fabric_link.buffer == 200_000


def test_hosts_may_leave_the_last_leaf_partly_filled():
    f = parse("fabric: {hosts: 5, hosts_per_leaf: 2, leaves_per_plane: 3}").fabric
    assert f.host_count == 5
    assert f.node_count == 5 + 2 * (3 + 2)


def test_load_names_the_scenario_after_the_file(tmp_path):
    path = tmp_path / "my-exp_1.yaml"
    text = "fabric:\n  planes: 3\n"
    path.write_text(text)
    s, raw = scenario.load(path)
    assert s.name == "my-exp_1"
    assert s.fabric.planes == 3
    assert raw == text


def test_load_keeps_an_explicit_name(tmp_path):
    path = tmp_path / "file.yaml"
    path.write_text("name: chosen\n")
    assert scenario.load(path)[0].name == "chosen"


def test_load_of_a_missing_file(tmp_path):
    with pytest.raises(ScenarioError) as info:
        scenario.load(tmp_path / "nope.yaml")
    assert info.value.exit_code == 2
    assert "nope.yaml" in str(info.value)
    assert "no such scenario file" in str(info.value)


def test_load_of_a_directory(tmp_path):
    with pytest.raises(ScenarioError) as info:
        scenario.load(tmp_path)
    assert "not a regular file (a directory)" in str(info.value)


# ---- one error per kind of bad input ---------------------------------------------------------

def test_unknown_key_suggests_the_close_one():
    msg = error_of("fabric: {plnaes: 2}")
    assert "fabric.plnaes" in msg
    assert "did you mean 'planes'" in msg


def test_unknown_nested_and_top_level_keys():
    assert "fabric.host_link.rat: unknown key; did you mean 'rate'" in error_of(
        "fabric: {host_link: {rat: 1Mbit}}")
    assert "verfy: unknown key; did you mean 'verify'" in error_of("verfy: {}")


@pytest.mark.parametrize("text, shown", [("fabric: {planes: 2.5}", "2.5"),
                                         ('fabric: {planes: "2"}', "'2'")])
def test_wrong_type(text, shown):
    msg = error_of(text)
    assert f"fabric.planes: {shown} is not allowed" in msg
    assert "integer" in msg


@pytest.mark.parametrize("value, bound", [(0, "greater than or equal to 1"),
                                          (17, "less than or equal to 16")])
def test_planes_out_of_range(value, bound):
    msg = error_of(f"fabric: {{planes: {value}}}")
    assert f"fabric.planes: {value} is not allowed" in msg
    assert bound in msg


def test_bad_rate_string():
    msg = error_of("fabric: {host_link: {rate: fast}}")
    assert "fabric.host_link.rate: 'fast' is not allowed" in msg
    assert "100Mbit" in msg  # says what a rate looks like


def test_rate_out_of_range():
    msg = error_of("fabric: {host_link: {rate: 10kbit}}")
    assert "fabric.host_link.rate: '10kbit' is not allowed: 10 kbit/s is outside" in msg
    assert "100 kbit/s..100 Gbit/s" in msg


def test_buffer_out_of_range():
    msg = error_of("fabric: {fabric_link: {buffer: 1KB}}")
    assert "fabric.fabric_link.buffer: '1KB' is not allowed: 1000 B is outside" in msg


def test_name_with_shell_characters():
    msg = error_of('name: "a;rm -rf"')
    assert "name: 'a;rm -rf' is not allowed" in msg


def test_naming_prefix_pattern():
    assert "naming.host: 'abcd' is not allowed" in error_of("naming: {host: abcd}")


def test_naming_prefixes_must_differ():
    msg = error_of("naming: {host: p}")
    assert "naming:" in msg and "must differ" in msg


def test_duplicate_yaml_key_names_its_line():
    msg = error_of("fabric:\n  planes: 2\n  planes: 3\n")
    assert "duplicate key 'planes'" in msg
    assert "line 3" in msg


def test_invalid_yaml_names_its_line():
    msg = error_of("fabric:\n  planes: 2\n   leaves_per_plane: 3\n")
    assert "not valid YAML" in msg
    assert "line 3" in msg


def test_top_level_list():
    msg = error_of("- planes\n- leaves\n")
    assert "top level must be a mapping" in msg and "list" in msg


def test_hosts_that_do_not_fit_suggest_enough_leaves():
    msg = error_of("fabric: {hosts: 9, leaves_per_plane: 2, hosts_per_leaf: 2}")
    assert "fabric:" in msg and "hosts=9" in msg
    assert "leaves_per_plane: 5" in msg  # ceil(9 / 2)


def test_leaves_left_empty():
    msg = error_of("fabric: {hosts: 2, leaves_per_plane: 2, hosts_per_leaf: 2}")
    assert "hosts=2" in msg and "only 1 of 2 leaves" in msg
    assert "leaves_per_plane: 1" in msg and "hosts: 4" in msg


def test_too_few_hosts():
    assert "fabric.hosts: 1 is not allowed" in error_of("fabric: {hosts: 1}")


def test_node_limit():
    # 20 hosts + 16 x (20 + 20) routers = 660 nodes
    msg = error_of("fabric: {planes: 16, leaves_per_plane: 20, spines_per_plane: 20, "
                   "hosts_per_leaf: 1}")
    assert "660 nodes" in msg and "limit of 600" in msg


def test_link_limit():
    # 1 x (64 hosts + 64 x 64) = 4160 links, only 192 nodes
    msg = error_of("fabric: {planes: 1, leaves_per_plane: 64, spines_per_plane: 64, "
                   "hosts_per_leaf: 1}")
    assert "4160 links" in msg and "limit of 2500" in msg


def test_interface_names_too_long():
    # leaf 11 of plane 11, port 10 hosts + 2 spines - 1 = 11: 'abc11def11-eth11' is 16 chars
    msg = error_of("fabric: {planes: 12, leaves_per_plane: 12, hosts_per_leaf: 10}\n"
                   "naming: {plane: abc, leaf: def}\n")
    assert "'abc11def11-eth11'" in msg and "15" in msg


def test_interface_names_just_fit():
    # 8 hosts per leaf: the longest name is 'abc11def11-eth9', 15 characters
    s = parse("fabric: {planes: 12, leaves_per_plane: 12, hosts_per_leaf: 8}\n"
              "naming: {plane: abc, leaf: def}\n")
    plan = make_plan(s)
    names = [port.ifname for node in plan.nodes for port in plan.ports(node)]
    assert "abc11def11-eth9" in names
    assert max(len(name) for name in names) == 15


def test_every_problem_is_listed():
    msg = error_of("fabric: {planes: 0, mtu: 100}\nseed: -1\n")
    assert "3 problems" in msg
    assert "fabric.planes" in msg and "fabric.mtu" in msg and "seed" in msg


# ---- JSON Schema -----------------------------------------------------------------------------

def test_json_schema():
    schema = scenario.json_schema()
    assert isinstance(schema, dict)
    assert {"fabric", "naming", "verify"} <= set(schema["properties"])
    assert "name" in schema["required"]
    link = schema["$defs"]["LinkClass"]["properties"]
    for field in ("rate", "buffer"):
        types = {alt["type"] for alt in link[field]["anyOf"]}
        assert types == {"string", "integer"}
    rate_pattern = next(a["pattern"] for a in link["rate"]["anyOf"] if a["type"] == "string")
    assert re.fullmatch(rate_pattern.removeprefix("(?i)"), "100mbit")


# ---- units -----------------------------------------------------------------------------------

@pytest.mark.parametrize("text, bps", [
    ("100Mbit", 100_000_000), ("1Gbit", 1_000_000_000), ("1.5Gbit", 1_500_000_000),
    ("100kbit", 100_000), ("64bit", 64), ("2Tbit", 2 * 10**12), ("10 mbit", 10_000_000),
    (" 1GBIT ", 1_000_000_000), (12345, 12345),
])
def test_parse_rate(text, bps):
    assert parse_rate(text) == bps


@pytest.mark.parametrize("text, nbytes", [
    ("64KiB", 65_536), ("100KB", 100_000), ("1MiB", 1_048_576), ("2MB", 2_000_000),
    ("1GiB", 2**30), ("1500", 1500), ("1500B", 1500), ("1.5KiB", 1536), (4096, 4096),
])
def test_parse_size(text, nbytes):
    assert parse_size(text) == nbytes


@pytest.mark.parametrize("bad", ["fast", "", "100", "100Mbps", "-5Mbit", "1e6bit", "Mbit",
                                 1.5, True, None])
def test_parse_rate_rejects(bad):
    with pytest.raises(ValueError):
        parse_rate(bad)


@pytest.mark.parametrize("bad", ["big", "", "64KiBs", "-1KB", "1.5.0KB", 2.0, False, None])
def test_parse_size_rejects(bad):
    with pytest.raises(ValueError):
        parse_size(bad)


@pytest.mark.parametrize("text, exact", [("2.01Mbit", 2_010_000), ("2.01Gbit", 2_010_000_000)])
def test_parse_rate_decimal_is_exact(text, exact):
    got = parse_rate(text)
    assert got == exact, (
        f"BUG in units.parse_rate: {text!r} -> {got}, expected {exact}; "
        f"int(float(number) * unit) truncates binary-float error (2.01 * 1e6 = 2009999.99...); "
        f"use Decimal or round()")


def test_parse_size_decimal_is_exact():
    got = parse_size("2.01MB")
    assert got == 2_010_000, (
        f"BUG in units.parse_size: '2.01MB' -> {got}; float truncation, see parse_rate")


def test_one_leaf_fabric_is_rejected():
    """One leaf: every pair meets at the leaf and the spines would carry nothing."""
    msg = error_of("fabric: {leaves_per_plane: 1, hosts_per_leaf: 4}")
    assert "leaves_per_plane: 1 leaves every spine unused" in msg


def test_denied_path_must_exist():
    msg = error_of("mrc: {denied: [{plane: 0, spine: 5}]}")
    assert "mrc.denied.0: plane 0 spine 5 is not in this fabric (2 planes of 2 spines)" in msg


def test_denied_paths_become_denied_evs_per_pair(tmp_path):
    from testbed.fabric.plan import make_plan
    from testbed.run.traffic import agent_configs
    sc = parse("name: d\nmrc: {denied: [{plane: 0, spine: 1}, {plane: 1}]}")
    configs = agent_configs(make_plan(sc), sc, "mrc", tmp_path)
    h0 = {p.host: p.denied for p in configs["h0"].peers}
    # h0->h3 crosses leaves: EVs (p0,s0) (p0,s1) (p1,s0) (p1,s1) = 0..3; h0->h1 same leaf: 0, 1
    assert h0 == {"h1": [1], "h2": [1, 2, 3], "h3": [1, 2, 3]}


def test_mrc_qps_get_evs_per_path_evs_for_every_path_and_rocev2_one(tmp_path):
    """Two EVs a path on the default fabric (2 planes of 2 spines): 8 EVs toward a host of
    another leaf, 4 toward one of the same leaf, each path's denial on both of its EVs;
    RoCEv2's QPs take one path each and keep the plain table."""
    from testbed.fabric.plan import make_plan
    from testbed.run.traffic import agent_configs
    sc = parse("name: d\nmrc: {evs_per_path: 2, denied: [{plane: 0, spine: 1}]}")
    plan = make_plan(sc)
    peers = {p.host: p for p in agent_configs(plan, sc, "mrc", tmp_path)["h0"].peers}
    assert [(i, plane) for i, plane, _ in peers["h3"].evs] == [
        (0, 0), (1, 0), (2, 1), (3, 1), (4, 0), (5, 0), (6, 1), (7, 1)]
    assert peers["h3"].evs[1][2] == peers["h3"].evs[5][2] != peers["h3"].evs[0][2]
    assert peers["h3"].denied == [1, 5]
    assert [plane for _, plane, _ in peers["h1"].evs] == [0, 1, 0, 1]
    roce = {p.host: p for p in agent_configs(plan, sc, "rocev2", tmp_path)["h0"].peers}
    assert len(roce["h3"].evs) == 4


def test_denying_every_path_is_an_error():
    msg = error_of("mrc: {denied: [{plane: 0}, {plane: 1, spine: 0}, {plane: 1, spine: 1}]}")
    assert "mrc.denied: every path is denied" in msg


@pytest.mark.parametrize("page", ["README.md", "docs/manual/scenario.md"])
def test_the_scenario_examples_are_valid(page: str):
    """README and the scenario manual show a scenario (the manual every section of one): each
    must stay a file the testbed accepts."""
    from pathlib import Path
    text = (Path(__file__).resolve().parents[3] / page).read_text()
    block = text.split("# A scenario\n\n```yaml\n", 1)[1].split("```", 1)[0]
    sc = parse(block)
    assert sc.fabric.mtu == 4200 and sc.qp.mss == 4096 and sc.transport == ["mrc", "rocev2"]


# ---- in-fabric ECN and trimming ---------------------------------------------------------------

def test_switch_defaults_ecn_with_the_dcqcn_papers_profile_and_trim_from_the_buffer():
    s = parse("fabric: {host_link: {buffer: 100KB}}")
    assert s.switch.ecn and s.switch.trim and s.switch.enabled
    # Zhu et al., SIGCOMM 2015: K_min 5 KB, K_max 200 KB, P_max 1%
    assert s.fabric.host_link.ecn() == RedProfile(5_000, 200_000, 0.01)
    assert s.fabric.host_link.trim() == 80_000


def test_red_profile_keys_and_the_step_they_replace():
    s = parse("fabric: {host_link: {ecn_kmin: 20KB, ecn_kmax: 60KB, ecn_pmax: 0.05}, "
              "fabric_link: {ecn_kmax: 1MB}}")
    assert s.fabric.host_link.ecn() == RedProfile(20_000, 60_000, 0.05)
    assert s.fabric.fabric_link.ecn() == RedProfile(5_000, 1_000_000, 0.01), "above the buffer"
    s = parse("fabric: {host_link: {ecn_threshold: 20KB}}")
    assert s.fabric.host_link.ecn() == RedProfile(20_000, 20_000, 1.0), "a step, as before"


def test_switch_thresholds_explicit_and_off():
    s = parse("switch: {ecn: false, trim: false}\n"
              "fabric: {fabric_link: {buffer: 100KB, ecn_threshold: 10KB, trim_threshold: 50KB}}")
    assert not s.switch.enabled
    assert s.fabric.fabric_link.ecn() == RedProfile(10_000, 10_000, 1.0)
    assert s.fabric.fabric_link.trim() == 50_000
    links = make_plan(s).links
    assert all(not link.ecn.marks and link.trim == 0 for link in links), "off in the plan"


@pytest.mark.parametrize(("text", "words"), [
    ("fabric: {host_link: {buffer: 100KB, trim_threshold: 200KB}}",
     "fabric.host_link: trim_threshold 195 KiB must be at most the buffer (97.7 KiB)"),
    ("fabric: {fabric_link: {buffer: 100KB, ecn_threshold: 90KB}}",
     "fabric.fabric_link: ecn_threshold 87.9 KiB must be below trim_threshold 78.1 KiB"),
    ("fabric: {fabric_link: {buffer: 100KB, ecn_kmin: 90KB}}",
     "fabric.fabric_link: ecn_kmin 87.9 KiB must be below trim_threshold 78.1 KiB"),
    ("fabric: {fabric_link: {ecn_kmin: 60KB, ecn_kmax: 50KB}}",
     "ecn_kmin 58.6 KiB must be at most ecn_kmax 48.8 KiB"),
    ("fabric: {fabric_link: {ecn_threshold: 20KB, ecn_pmax: 0.1}}",
     "ecn_threshold (a step) with ecn_pmax (RED's profile): keep one"),
    ("fabric: {fabric_link: {ecn_pmax: 0}}", "ecn_pmax"),
    ("fabric: {fabric_link: {ecn_pmax: 1.5}}", "ecn_pmax"),
    ("switch: {trimming: true}", "unknown key; did you mean 'trim'?"),
])
def test_switch_errors_name_the_field(text: str, words: str):
    assert words in error_of(text)


def test_ecn_above_the_default_trim_is_fine_when_trimming_is_off():
    s = parse("switch: {trim: false}\nfabric: {fabric_link: {buffer: 100KB, ecn_threshold: 90KB}}")
    assert s.fabric.fabric_link.ecn().kmin == 90_000


def test_retry_schedule_fields_follow_the_spec_ranges():
    assert "retry.linear_cnt" in error_of("qp: {retry: {linear_cnt: 8}}")
    assert "retry.exp_cnt" in error_of("qp: {retry: {exp_cnt: 26}}")
    assert "timeout_exp" in error_of("qp: {timeout_exp: 25}")
    assert "both set" in error_of("qp: {timeout: 0.01, timeout_exp: 8}")
    sc = parse("name: t\nqp: {timeout_exp: 8, retry: {linear_cnt: 0, exp_cnt: 25}}")
    assert sc.timeout() == pytest.approx(1.024e-6 * 256)
    assert parse("name: t\nqp: {timeout: 0.02}").timeout() == 0.02
    default = parse("name: t")
    assert default.timeout() == pytest.approx(2 * default.drain_time() + 0.005)


def test_rocev2_runs_one_qp_per_plane_and_mrc_keeps_a_spare_where_planes_have_4_paths():
    sc = parse("name: t\nfabric: {planes: 4}")
    assert sc.qps_per_peer("rocev2") == 4 and sc.qps_per_peer("mrc") == 1
    assert parse("name: t\nqp: {qps_per_peer: {rocev2: 16}}").qps_per_peer("rocev2") == 16
    assert parse("name: t").active_evs_per_plane() is None, "2 spines: every path active"
    four = parse("name: t\nfabric: {spines_per_plane: 4}")
    assert four.active_evs_per_plane() == 3
    assert parse("name: t\nfabric: {spines_per_plane: 4}\nmrc: {evs_per_plane: 4}"
                 ).active_evs_per_plane() == 4
    assert parse("name: t\nfabric: {spines_per_plane: 4}\nmrc: {evs_per_path: 4}"
                 ).active_evs_per_plane() is None, "several EVs a path: no spare path"
