"""Runs stopped at random moments, many times, by SIGINT, SIGTERM or SIGKILL (then `clean`):
after each, nothing of the testbed is left and meta.json says how the run ended.

The moments are drawn (seeded) over a whole run with traffic, so they fall in every phase:
preflight, nodes, links, routes, verify, traffic, collect, teardown. MRC_INTERRUPT_TRIALS sets
how many (default 10, about a minute).
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from .helpers import CLI, ROOT, leftovers, run_cli, snapshot

pytestmark = pytest.mark.root

SCENARIO = """name: interrupt-fuzz
transport: [mrc]
fabric: {host_link: {rate: 25Mbit}, fabric_link: {rate: 25Mbit}}
workload: {size: 256KiB, iterations: 3, warmup: 0}
faults: [{at: 0.2, kind: link_down, target: {plane: 0, leaf: 0, spine: 0}, duration: 0.3}]
background: [{pattern: elephant, src: h1, dst: h2, duration: 1}]
"""
TRIALS = int(os.environ.get("MRC_INTERRUPT_TRIALS", "10"))
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)


def test_interrupts_at_random_moments_leave_nothing(tmp_path: Path):
    file = tmp_path / "s.yaml"
    file.write_text(SCENARIO)
    rng = random.Random(13)
    t0 = time.monotonic()
    full = subprocess.run(CLI + ["run", str(file), "--no-report", "--quiet", "--results",
                                 str(tmp_path / "full")], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert full.returncode == 0, full.stderr
    span = time.monotonic() - t0  # a whole run, from the command to its end
    tally: dict[str, int] = {}
    for trial in range(TRIALS):
        sig = rng.choice(SIGNALS)
        delay = rng.uniform(0.05, span)
        results = tmp_path / f"r{trial}"
        before = snapshot()
        proc = subprocess.Popen(CLI + ["run", str(file), "--no-report", "--quiet",
                                       "--results", str(results)], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        what = f"trial {trial}: {sig.name} after {delay:.2f} s (exit {proc.returncode})"
        started = results.exists()  # before it, the signal only ends Python starting up
        if sig == signal.SIGKILL:
            res = run_cli("clean")
            assert res.returncode == 0, f"{what}: clean: {res.stdout}{res.stderr}"
        elif started:
            assert proc.returncode in (0, 130), f"{what}:\n{err}"
            assert "Traceback" not in err, f"{what}:\n{err}"
        left = leftovers(before)
        assert not left, f"{what} left: {left}\n{err}"
        for meta_path in results.glob("*/meta.json"):
            status = json.loads(meta_path.read_text())["status"]
            assert status != "running", f"{what}: meta.json still says running"
            tally[status] = tally.get(status, 0) + 1
    print(f"{TRIALS} interrupts over a {span:.1f} s run: {tally}")
