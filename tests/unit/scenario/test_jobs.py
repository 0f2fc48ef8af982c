"""`jobs:`: where each job's ranks land (the placement rules, worked out by hand on a fabric of
4 leaves x 2 hosts: leaf 0 holds h0 h1, leaf 1 h2 h3, ...), each bad input's one error, and each
job as the one-job scenario the run layer reads."""
from __future__ import annotations

from pathlib import Path

import pytest

from testbed.errors import ScenarioError
from testbed.fabric.plan import make_plan
from testbed.run import wall_time
from testbed.run.traffic import agent_configs, parts
from testbed.scenario import parse
from testbed.scenario.job_views import lines, views

ROOT = Path(__file__).resolve().parents[3]
FABRIC = "fabric: {planes: 1, leaves_per_plane: 4, hosts_per_leaf: 2, spines_per_plane: 2}\n"


def jobs(*entries: str, extra: str = "") -> str:
    return FABRIC + extra + "jobs:\n" + "".join(f"  - {e}\n" for e in entries)


def hosts(text: str) -> list[list[str]]:
    return parse(text, "t.yaml", "t").job_hosts()


@pytest.mark.parametrize(("rule", "first", "second"), [
    ("packed", ["h0", "h1", "h2", "h3"], ["h4", "h5", "h6", "h7"]),
    ("spread", ["h0", "h2", "h4", "h6"], ["h1", "h3", "h5", "h7"]),
    ("interleaved", ["h0", "h2", "h4", "h6"], ["h1", "h3", "h5", "h7"]),
])
def test_two_jobs_of_four_by_each_rule(rule, first, second):
    text = jobs(f"{{name: a, placement: {{rule: {rule}, count: 4}}}}",
                f"{{name: b, placement: {{rule: {rule}, count: 4}}}}")
    assert hosts(text) == [first, second]


def test_spread_deals_one_host_per_leaf_in_turn():
    """6 of 8: a round over the 4 leaves, then leaves 0 and 1 again."""
    assert hosts(jobs("{name: a, placement: {rule: spread, count: 6}}")) == [
        ["h0", "h2", "h4", "h6", "h1", "h3"]]


def test_placement_takes_what_named_jobs_leave():
    """A job placed after (or before) one naming its hosts never gets them."""
    text = jobs("{name: a, placement: {rule: packed, count: 3}}", "{name: b, hosts: [h1, h2]}")
    assert hosts(text) == [["h0", "h3", "h4"], ["h1", "h2"]]


def test_interleaved_skips_taken_hosts():
    text = jobs("{name: a, hosts: [h2, h3]}",
                "{name: b, placement: {rule: interleaved, count: 3}}")
    assert hosts(text) == [["h2", "h3"], ["h0", "h4", "h6"]]


@pytest.mark.parametrize(("text", "message"), [
    (jobs("{name: a, hosts: [h0, h1]}", "{name: a, hosts: [h2, h3]}"),
     "the name 'a' is given to two jobs"),
    (jobs("{name: a, hosts: [h0, h1]}", "{name: b, hosts: [h1, h3]}"),
     r"jobs.1 \(b\).hosts: h1 is already a host of job 'a'"),
    (jobs("{name: a, placement: {rule: packed, count: 9}}"),
     r"jobs.0 \(a\): placement: 9 hosts asked, 8 free"),
    (jobs("{name: a, hosts: [h0, h1]}", "{name: b, placement: {rule: spread, count: 7}}"),
     r"jobs.1 \(b\): placement: 7 hosts asked, 6 free"),
    (jobs("{name: a, placement: {rule: interleaved, count: 5}}"),
     "every other host gives 4 free hosts"),
    (jobs("{name: a, hosts: [h0]}"), "at least 2 distinct hosts"),
    (jobs("{name: a, hosts: []}"), "at least 2 distinct hosts"),
    (jobs("{name: a, placement: {rule: packed, count: 1}}"), "count"),
    (jobs("{name: a}"), "give hosts .* or placement"),
    (jobs("{name: a, hosts: [h0, h1], placement: {rule: packed, count: 2}}"),
     "give hosts .* or placement"),
    (jobs("{name: a, hosts: [h0, h9]}"), r"\['h9'\] are not hosts of this fabric"),
    (jobs("{name: 'a;rm -rf', hosts: [h0, h1]}"), "jobs.0.name"),
    (jobs("{name: a, hosts: [h0, h1], workload: {ranks: [h0, h1]}}"),
     "a job's ranks are its hosts"),
    (jobs("{name: a, hosts: [h0, h1], workload: {collective: all_to_all, algorithm: tree}}"),
     "all_to_all has no 'tree' algorithm"),
    (jobs("{name: a, hosts: [h0, h1], workload: {training: {dp: 4}}}"),
     r"jobs.0 \(a\).workload.training: dp x tp x pp = 4 x 1 x 1 = 4, but the workload has 2"),
    (jobs("{name: a, hosts: [h0, h1]}", extra="workload: {size: 4KiB}\n"),
     "workload and jobs"),
    (jobs("{name: a, hosts: [h0, h1], workload: {training: {dp: 2}}}",
          extra="faults: [{at: 0, kind: straggler, target: {host: h5}, factor: 2}]\n"),
     "straggler on h5, which is a host of no job"),
    (jobs("{name: a, hosts: [h0, h1], transport: tcp}"), "jobs.0.transport"),
    (jobs("{name: a, hosts: [h0, h1], start: 1}",
          extra="fabric: {real_rate: 100Gbit}\n").replace(FABRIC, ""),
     "jobs.0.start"),
])
def test_each_bad_job_is_one_clear_error(text, message):
    with pytest.raises(ScenarioError, match=message) as caught:
        parse(text, "t.yaml", "t")
    assert "1 problem" in str(caught.value)


def test_a_job_is_a_one_job_scenario_with_its_hosts_as_ranks():
    text = jobs("{name: dp, placement: {rule: spread, count: 4}, workload: {size: 64KiB}}",
                "{name: ep, hosts: [h1, h3], start: 0.5, transport: rocev2, "
                "workload: {collective: all_to_all}}")
    sc = parse(text, "t.yaml", "t")
    dp, ep = views(sc)
    assert (dp.name, dp.hosts, dp.start) == ("dp", ("h0", "h2", "h4", "h6"), 0.0)
    assert dp.scenario.rank_hosts() == ["h0", "h2", "h4", "h6"]
    assert dp.scenario.workload.size == 65536 and dp.scenario.jobs == []
    assert dp.scenario.transport == ["mrc", "rocev2"]
    assert ep.scenario.transport == ["rocev2"] and ep.start == 0.5
    assert ep.scenario.workload.collective == "all_to_all"
    assert lines(sc) == [
        "job dp: spread (4 hosts): h0 h2 h4 h6; all_reduce of 64 KiB x 5",
        "job ep: hosts as listed: h1 h3; all_to_all of 1 MiB x 5, starts at 500 ms, "
        "always over rocev2"]
    # each job's agents know only their own job's ranks, on their own transport
    plan = make_plan(sc)
    got = parts(sc, "mrc", Path("/tmp/out"))
    assert [(p.transport, p.start, p.out.name) for p in got] == [
        ("mrc", 0.0, "dp"), ("rocev2", 0.5, "ep")]
    configs = agent_configs(plan, got[1].scenario, "rocev2", Path("/tmp/out/ep"))
    assert sorted(configs) == ["h1", "h3"]
    assert [(c.rank, c.world, c.transport) for c in configs.values()] == [
        (0, 2, "rocev2"), (1, 2, "rocev2")]


def test_the_wall_time_counts_the_jobs_together_then_each_alone():
    """Per transport: the longer job (from its start) together, then each alone."""
    text = jobs("{name: a, hosts: [h0, h1], workload: {size: 1MiB, iterations: 3, warmup: 0}}",
                "{name: b, hosts: [h2, h3], start: 2, "
                "workload: {size: 1MiB, iterations: 3, warmup: 0}}",
                extra="transport: [mrc]\n")
    found = wall_time.estimate(parse(text, "t.yaml", "t"))
    together, alone_a, alone_b = found.runs
    a, b = together
    assert (alone_a, alone_b) == ((a,), (b,))
    assert b.workload == pytest.approx(2 + a.workload)
    assert found.total == pytest.approx(b.workload + a.workload + b.workload)


def test_the_shipped_job_scenarios_validate():
    for file in sorted((ROOT / "scenarios" / "jobs").glob("*.yaml")):
        sc = parse(file.read_text(), str(file), file.stem)
        assert len(views(sc)) == 2, file
