"""How the pooled mode splits hosts over its processes (testbed/run/traffic.py)."""
from __future__ import annotations

import pytest

from testbed.run.traffic import agent_groups, pools


@pytest.mark.parametrize("hosts, processes", [(4, 2), (64, 2), (7, 3), (3, 8), (1, 1), (5, 1)])
def test_contiguous_groups_of_nearly_equal_size_cover_every_host_once(hosts, processes):
    names = [f"h{i}" for i in range(hosts)]
    groups = agent_groups(names, processes)
    assert [h for g in groups for h in g] == names  # every host once, in rank order
    assert len(groups) == min(hosts, processes) and all(groups)
    assert max(map(len, groups)) - min(map(len, groups)) <= 1


def test_a_pooled_process_serves_one_jobs_hosts():
    """Two jobs on one machine of 2 cores: each gets its share of the processes (one each
    here), so that stopping one job's processes stops none of the other's hosts; a job of
    one host among many still gets a process of its own."""
    where = (dict.fromkeys(("h0", "h1", "h2", "h3"), ("m", 0))
             | dict.fromkeys(("h4", "h5", "h6", "h7"), ("m", 1)))
    assert pools(where, lambda m: 2) == [("m", ["h0", "h1", "h2", "h3"]),
                                         ("m", ["h4", "h5", "h6", "h7"])]
    six_and_two = {f"h{i}": ("m", 0 if i < 6 else 1) for i in range(8)}
    assert pools(six_and_two, lambda m: 4) == [("m", ["h0", "h1"]), ("m", ["h2", "h3"]),
                                               ("m", ["h4", "h5"]), ("m", ["h6", "h7"])]
    lone = {f"h{i}": ("m", 0) for i in range(7)} | {"h7": ("m", 1)}
    # 2 x 7/8 = 1.75 processes for the first job: 2; 0.25 for the second: at least 1
    assert pools(lone, lambda m: 2) == [("m", ["h0", "h1", "h2"]),
                                        ("m", ["h3", "h4", "h5", "h6"]), ("m", ["h7"])]
    one_job = {f"h{i}": ("m", 0) for i in range(4)}
    assert pools(one_job, lambda m: 2) == [("m", ["h0", "h1"]), ("m", ["h2", "h3"])]
