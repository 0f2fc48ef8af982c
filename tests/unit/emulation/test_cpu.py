"""/proc/stat and /proc/pressure/cpu as the CPU sampler reads them, from hand-written text."""
from __future__ import annotations

from testbed.emulation.cpu import parse_psi, parse_stat

STAT = """cpu  100 5 50 800 20 3 7 0 11 0
cpu0 50 2 25 400 10 1 3 0 5 0
intr 1 2 3
"""
PSI = """some avg10=63.46 avg60=64.23 avg300=38.12 total=255394648
full avg10=0.00 avg60=0.00 avg300=0.00 total=0
"""


def test_stat_busy_is_all_but_idle_and_iowait_guest_not_twice():
    busy, softirq, total = parse_stat(STAT)
    assert total == 100 + 5 + 50 + 800 + 20 + 3 + 7 + 0  # guest is inside user already
    assert busy == total - 800 - 20 and softirq == 7


def test_psi_some_total_in_microseconds():
    assert parse_psi(PSI) == 255394648
    assert parse_psi("full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n") is None
