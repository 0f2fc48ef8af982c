"""/proc/stat and /proc/pressure/cpu as the CPU sampler reads them, from hand-written text."""
from __future__ import annotations

import threading
import time

import pytest

from testbed.emulation.cpu import CpuSampler, parse_psi, parse_stat, summarize
from testbed.emulation.machine_monitor import Machine

STAT = """cpu  100 5 50 800 20 3 7 13 11 0
cpu0 50 2 25 400 10 1 3 0 5 0
intr 1 2 3
"""
PSI = """some avg10=63.46 avg60=64.23 avg300=38.12 total=255394648
full avg10=0.00 avg60=0.00 avg300=0.00 total=0
"""


def test_stat_busy_is_all_but_idle_and_iowait_guest_not_twice():
    busy, softirq, steal, total = parse_stat(STAT)
    assert total == 100 + 5 + 50 + 800 + 20 + 3 + 7 + 13  # guest is inside user already
    assert busy == total - 800 - 20 and softirq == 7 and steal == 13


def test_psi_some_total_in_microseconds():
    assert parse_psi(PSI) == 255394648
    assert parse_psi("full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n") is None


def row(t: float, interval: float, process: float | None, busy: float = 0.5) -> dict:
    return {"time": t, "interval_s": interval, "busy": busy, "softirq": 0.1,
            "psi_some": 0.2, "process": process}


def test_summary_weights_by_interval_and_starts_at_the_workload():
    rows = [row(10.0, 1.0, 0.9, busy=1.0), row(11.0, 1.0, 0.1), row(14.0, 3.0, 0.3)]
    assert summarize(rows)["process"] == pytest.approx((0.9 + 0.1 + 0.9) / 5)
    after = summarize(rows, since=10.0)  # the row ending at 10.0 was the start-up
    assert after["process"] == pytest.approx((0.1 + 0.9) / 4)
    assert after["busy_mean"] == 0.5 and after["busy_max"] == 0.5 and after["softirq"] == 0.1
    assert summarize(rows, since=20.0)["process"] is None
    assert summarize([row(1.0, 1.0, None), row(2.0, 1.0, 0.5)])["process"] is None


def test_a_machines_runner_share_sums_the_runs_own_processes_on_its_clock():
    server = [row(100.0, 1.0, 0.2), row(101.0, 1.0, 0.04)]
    runner = [row(100.0, 1.0, 0.3), row(101.0, 1.0, 0.06)]
    m = Machine(["srv0"], set(), [], None, server, 2, "srv0",
                {"srv0's agent": server, "runner": runner}, clock_offset=0.5)
    assert m.cpu()["runner"] == pytest.approx(0.12 + 0.18)
    # the workload started at 99.6 on the runner's clock, 100.1 on the machine's: the rows
    # ending at 100.0 there were before it
    assert m.cpu(since=99.6)["runner"] == pytest.approx(0.04 + 0.06)
    assert m.cpu(since=99.4)["runner"] == pytest.approx(0.12 + 0.18)
    assert Machine([], set(), [], None, server, 2).cpu()["runner"] is None  # none measured


def test_the_sampler_counts_every_thread_of_its_process():
    sampler = CpuSampler(0.05)
    burned: list[float] = []

    def burn() -> None:
        t0 = time.thread_time()
        while time.thread_time() - t0 < 0.2:
            pass
        burned.append(time.thread_time() - t0)

    sampler.start()
    worker = threading.Thread(target=burn)
    worker.start()
    worker.join()
    time.sleep(0.06)
    sampler.stop()
    used = sum(r["process"] * r["interval_s"] * sampler.cores for r in sampler.rows)
    assert used >= burned[0] * 0.95  # a thread other than the sampler's, and one that ended
