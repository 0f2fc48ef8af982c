#!/usr/bin/env python3
"""Build time of the testbed against bare Mininet, side by side, in one run.

For each scenario, alternately (so both see the same machine state) and `--repeat` times:
- bare Mininet: the same graph (every node a Mininet host, every link a Mininet veth link),
  `addHost`/`addLink`/`build()`, then `stop()`: nodes and links only, no addresses, routes,
  shaping or verification;
- the testbed: `mrc-testbed run FILE --verify-only` as a user runs it, timed by its own phases
  (meta.json): nodes, links, routes (addresses, neighbours, routes, End SIDs, htb on every
  port), verify (every EV probed, or the stated sample), then teardown.
Each side runs in a fresh process. Namespaces die asynchronously in the kernel after their
last process exits, so after each teardown the bench also waits until the machine is idle
again and counts that as part of teardown ("+ kernel"): otherwise one side's clean-up would
slow the other side's build. Prints medians and the ratios testbed / bare Mininet.

    sudo .venv/bin/python -m bench.build [--repeat 3] [scenarios/quickstart.yaml ...]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ROOT
from runcontract import read_meta

PYTHON = str(ROOT / ".venv/bin/python")
DEFAULT = ["scenarios/quickstart.yaml", "scenarios/ref-64.yaml"]


def bare(file: str) -> dict:
    """Runs in a child process: the scenario's graph with plain Mininet."""
    from mininet.log import setLogLevel
    from mininet.net import Mininet

    from testbed import scenario
    from testbed.fabric.plan import make_plan

    setLogLevel("error")
    sc = scenario.load(file)[0]
    plan = make_plan(sc.with_rate(10**8))  # bare Mininet shapes nothing: `rate: auto` moot
    t0 = time.monotonic()
    net = Mininet(controller=None, build=False, autoSetMacs=False, autoStaticArp=False)
    for name in plan.nodes:
        net.addHost(name, ip=None)
    for link in plan.links:
        net.addLink(link.lower.node, link.upper.node,
                    intfName1=link.lower.ifname, intfName2=link.upper.ifname)
    net.build()
    t1 = time.monotonic()
    net.stop()
    t2 = time.monotonic()
    return {"build": t1 - t0, "teardown": t2 - t1}


def testbed(file: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.monotonic()
        res = subprocess.run([PYTHON, "-m", "testbed.cli", "run", file, "--verify-only",
                              "--quiet", "--results", tmp], cwd=ROOT, capture_output=True,
                             text=True)
        wall = time.monotonic() - t0
        if res.returncode != 0:
            sys.exit(f"testbed run of {file} failed:\n{res.stderr}")
        (run,) = Path(tmp).iterdir()
        phases = read_meta(run).phases
        verify = json.loads((run / "verify.json").read_text())
    build = sum(phases[p] for p in ("nodes", "links", "routes", "verify"))
    return {"build": build, "teardown": phases["teardown"], "wall": wall,
            "routes": phases["routes"], "verify": phases["verify"], "probed": verify["probed"],
            "scope": verify["scope"]}


def _busy_jiffies() -> tuple[int, int]:
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def settle(max_wait: float = 60.0, window: float = 0.25, idle_share: float = 0.05) -> float:
    """Seconds until the machine spends under `idle_share` of its CPU time busy for a window
    (the kernel's asynchronous namespace clean-up has finished)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < max_wait:
        b0, t_0 = _busy_jiffies()
        time.sleep(window)
        b1, t_1 = _busy_jiffies()
        if t_1 > t_0 and (b1 - b0) / (t_1 - t_0) < idle_share:
            break
    return time.monotonic() - t0


def median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", default=DEFAULT)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--bare", help=argparse.SUPPRESS)  # child mode
    args = ap.parse_args()
    if args.bare:
        print(json.dumps(bare(args.bare)))
        return

    print(f"{'scenario':<14}{'nodes':>6}{'links':>6} | {'bare Mininet':^19} | "
          f"{'testbed':^37} | {'testbed / bare':^15}")
    print(f"{'':<26} | {'build':>8}{'teardown':>11} | {'build':>8}{'(routes':>9}{'verify)':>9}"
          f"{'teardown':>11} | {'build':>6}{'total':>8}")
    print(f"{'':<26} | {'':>8}{'+ kernel':>11} | {'':>8}{'':>9}{'':>9}{'+ kernel':>11} |")
    settle()
    for file in args.files:
        from testbed import scenario
        sc = scenario.load(ROOT / file)[0]
        bare_runs, tb_runs = [], []
        for _ in range(args.repeat):
            out = subprocess.run([PYTHON, "-m", "bench.build", "--bare", file], cwd=ROOT,
                                 capture_output=True, text=True, check=True).stdout
            bare_runs.append(json.loads(out.strip().splitlines()[-1]))
            bare_runs[-1]["teardown"] += settle()
            tb_runs.append(testbed(file))
            tb_runs[-1]["teardown"] += settle()
        b_build, b_down = median(bare_runs, "build"), median(bare_runs, "teardown")
        t_build, t_down = median(tb_runs, "build"), median(tb_runs, "teardown")
        print(f"{sc.name:<14}{sc.fabric.node_count:>6}{sc.fabric.link_count:>6} | "
              f"{b_build:>7.2f}s{b_down:>10.2f}s | {t_build:>7.2f}s"
              f"{median(tb_runs, 'routes'):>8.2f}s"
              f"{median(tb_runs, 'verify'):>8.2f}s{t_down:>10.2f}s | "
              f"{t_build / b_build:>5.2f}x{(t_build + t_down) / (b_build + b_down):>7.2f}x")
        print(f"{'':<26}   testbed verification: {tb_runs[0]['scope']}; whole CLI run "
              f"(start to exit) {median(tb_runs, 'wall'):.2f} s")
    print(f"\nmedians of {args.repeat} alternating runs; build = nodes + links (+ routes, "
          f"shaping and verification for the testbed)")


if __name__ == "__main__":
    main()
