"""bench/jobs.py's arithmetic on numbers worked out by hand: a job's slowdown, and the cost of
jobs as CPU per packet together over alone."""
from __future__ import annotations

import pytest

from bench.jobs import Cost, JobCell


def test_a_slowdown_is_together_over_alone():
    assert JobCell("s", "dp", "mrc", 1, 0.3, 0.2, True, "").slowdown == pytest.approx(1.5)
    assert JobCell("s", "dp", "mrc", 1, 0.3, None, True, "").slowdown is None


def test_the_cost_compares_cpu_per_packet():
    """2 s for 1,000 packets together (2 ms each) against 3 s for 1,000 alone (3 ms each)."""
    assert Cost("s", "mrc", 1, 2.0, 1000, 3.0, 1000).ratio == pytest.approx(2 / 3)
    assert Cost("s", "mrc", 1, 2.0, 0, 3.0, 1000).ratio is None
