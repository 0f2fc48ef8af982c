"""How the pooled mode splits hosts over its processes (testbed/run/traffic.py)."""
from __future__ import annotations

import pytest

from testbed.run.traffic import agent_groups


@pytest.mark.parametrize("hosts, processes", [(4, 2), (64, 2), (7, 3), (3, 8), (1, 1), (5, 1)])
def test_contiguous_groups_of_nearly_equal_size_cover_every_host_once(hosts, processes):
    names = [f"h{i}" for i in range(hosts)]
    groups = agent_groups(names, processes)
    assert [h for g in groups for h in g] == names  # every host once, in rank order
    assert len(groups) == min(hosts, processes) and all(groups)
    assert max(map(len, groups)) - min(map(len, groups)) <= 1
