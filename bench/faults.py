#!/usr/bin/env python3
"""Every fault scenario, MRC and RoCEv2 side by side, in one run: busbw as a share of each
transport's ideal (planes it may use x host link rate), the ratio of their busbw, the CCT tail,
retransmissions and in-fabric trims. The same fabric, workload and seed for both transports.

    sudo .venv/bin/python bench/faults.py [--results DIR] [SCENARIO.yaml ...]

Without scenarios it runs the quickstart-sized fault scenarios shipped in scenarios/ (those that
need netem are skipped, with the reason, where the kernel lacks it). Every run folder is kept
under results/faults-<utc>/ (or DIR) for a closer look.
"""
from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analysis.load import RunError, load_run  # noqa: E402
from analysis.metrics import cct, nccl_rows, percentiles  # noqa: E402

RUN_TIMEOUT = 400.0  # s

DEFAULT = ["quickstart", "loss-0", "loss-0.1pct", "loss-1pct", "gray-loss", "link-down",
           "host-flap", "degrade", "t1-blackhole-reboot", "leaf-down", "plane-down", "delay",
           "incast-victim"]


def measure(run_dir: Path) -> dict:
    run = load_run(run_dir)
    row = nccl_rows(run.tables["iterations"])[0]
    ideal = run.facts.ideal_busbw
    timed = cct(run.tables["iterations"], run.t0)
    timed = timed[~timed["warmup"]]
    p50, p99 = percentiles(timed["cct"].to_numpy() * 1e3, (50, 99))
    qps = run.tables["qps"]
    links = run.tables["links"]
    trims = 0
    if "trimmed" in links:
        trims = int(links.sort_values("time").groupby(["node", "ifname"])["trimmed"].last()
                    .fillna(0).sum())
    return {"busbw": row.busbw, "share": row.busbw / ideal, "p50": p50.value, "p99": p99.value,
            "n": len(timed),
            "retx": int(qps["retransmits"].sum()), "trims": trims,
            "verified": bool(timed["verified"].all()),
            "fidelity": (run.meta.get("fidelity") or {}).get("verdict", "-")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenarios", nargs="*", metavar="SCENARIO.yaml",
                    help="default: the quickstart-sized fault scenarios in scenarios/")
    ap.add_argument("--results", type=Path, help="where the run folders go "
                    "(default: results/faults-<utc>)")
    args = ap.parse_args()
    names = args.scenarios or [str(ROOT / "scenarios" / f"{n}.yaml") for n in DEFAULT]
    results = args.results or \
        ROOT / "results" / f"faults-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    print(f"results: {results}", flush=True)
    print(f"{'scenario':<22}{'MRC':>7}{'RoCEv2':>8}{'MRC/RoCEv2':>11}  {'CCT p50/p99 MRC':>17}  "
          f"{'RoCEv2 (ms)':>13}  {'n':>3}  {'retx M/R':>11}  {'trims M/R':>10}  verified  "
          f"fidelity M/R")
    for file in names:
        name = Path(file).stem
        out = results / name
        proc = subprocess.Popen([sys.executable, "-m", "testbed.cli", "run", file,
                                 "--no-report", "--quiet", "--results", str(out)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=ROOT)
        try:  # both transports take about a minute: interrupt (SIGINT cleans up) a hang
            _, err = proc.communicate(timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate()
            err = f"interrupted after {RUN_TIMEOUT:.0f} s\n{err}"
        m = {}
        for d in sorted(out.iterdir()) if out.exists() else []:
            try:
                m[d.name.rsplit("-", 1)[1]] = measure(d)
            except RunError as exc:
                print(f"{name:<22}{d.name}: {str(exc).splitlines()[0]}")
        if "mrc" not in m or "rocev2" not in m:
            reason = err.strip().splitlines()[0] if err.strip() else "?"
            print(f"{name:<22}skipped: {reason}")
            continue
        a, b = m["mrc"], m["rocev2"]
        print(f"{name:<22}{a['share']:>7.0%}{b['share']:>8.0%}"
              f"{a['busbw'] / b['busbw']:>10.2f}x  {a['p50']:>8.0f}/{a['p99']:<8.0f}"
              f"  {b['p50']:>6.0f}/{b['p99']:<6.0f}  {a['n']:>3}  "
              f"{a['retx']:>5}/{b['retx']:<5}  {a['trims']:>4}/{b['trims']:<5}  "
              f"{a['verified'] and b['verified']!s:<8}  {a['fidelity']}/{b['fidelity']}")
    print("MRC, RoCEv2: busbw as a share of each transport's own ideal (the planes it may use x\n"
          "the host link rate); MRC/RoCEv2: ratio of the busbw themselves. CCT over the timed\n"
          "iterations (a p99 of so few samples is near their maximum, not a measured tail);\n"
          "fidelity: each run's verdict (README, Fidelity): numbers of a run that is not\n"
          "`faithful` measure the CPU as much as the network")
    return 0


if __name__ == "__main__":
    sys.exit(main())
