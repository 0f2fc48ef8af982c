#!/usr/bin/env python3
"""The same scenarios on one machine and over 2 emulated servers (VXLAN between them), side by
side: every EV proven, every rank verified, busbw as a share of each transport's ideal, and
what crossed the underlay. `sudo make cluster-demo` runs it.

    sudo .venv/bin/python -m bench.cluster [NAME ...] [--repeat N] [--results DIR]

For NAME (default: quickstart link-down) it runs scenarios/NAME.yaml and
scenarios/cluster-NAME.yaml (the same file with a `cluster:` section), both transports each,
N times in turn (one pair is one sample of each side: the spread between pairs is the noise a
difference must beat). `--results` keeps the run folders (each with its fidelity reasons);
without it they go to a temporary folder.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from analysis.load import load_run
from analysis.metrics import nccl_rows
from bench.common import ROOT


def measure(run_dir: Path) -> dict:
    run = load_run(run_dir)
    row = nccl_rows(run.tables["iterations"])[0]
    ideal = run.facts.ideal_busbw
    verify = json.loads((run_dir / "verify.json").read_text())
    used = (run.meta.cluster or {}).get("underlay_during_workload", {})
    return {"share": row.busbw / ideal, "evs": f"{verify['received']}/{verify['probed']}",
            "fidelity": run.meta.verdict or "?",
            "verified": bool(run.tables["iterations"]["verified"].all()),
            "underlay_mb": sum(u["tx_bytes"] for u in used.values()) / 1e6 if used else None,
            "underlay_errors": sum(u["errors"] + u["drops"] for u in used.values())}


def run(file: Path, out: Path) -> dict[str, dict]:
    res = subprocess.run([sys.executable, "-m", "testbed.cli", "run", str(file), "--no-report",
                          "--quiet", "--results", str(out)], capture_output=True, text=True,
                         cwd=ROOT, check=False)
    if res.returncode != 0:
        raise SystemExit(f"{file.name}: exit {res.returncode}: {res.stderr.strip()}")
    return {d.name.rsplit("-", 1)[1]: measure(d) for d in sorted(out.iterdir())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", default=["quickstart", "link-down"])
    parser.add_argument("--repeat", type=int, default=1, help="pairs of runs per scenario")
    parser.add_argument("--results", type=Path, help="keep the run folders here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        return compare(args.names, args.repeat, args.results or Path(tmp))


def compare(names: list[str], repeat: int, out: Path) -> int:
    print(f"{'scenario':<12}{'transport':>10}  {'one machine':>11}  {'2 servers':>9}  "
          f"{'EVs proven':>10}  {'ranks':>8}  {'underlay (MB, both ways)':>24}  "
          f"fidelity (one machine / 2 servers)")
    ok = True
    for k in range(repeat):
        for name in names:
            single = run(ROOT / "scenarios" / f"{name}.yaml", out / f"{name}-{k}")
            spread = run(ROOT / "scenarios" / f"cluster-{name}.yaml", out / f"c-{name}-{k}")
            for transport, one in single.items():
                two = spread[transport]
                good = one["verified"] and two["verified"] and two["underlay_errors"] == 0
                ok &= good
                print(f"{name:<12}{transport:>10}  {one['share']:>11.0%}  {two['share']:>9.0%}  "
                      f"{one['evs'] + ' ' + two['evs']:>10}  "
                      f"{'verified' if good else 'FAILED':>8}  {two['underlay_mb']:>24.2f}  "
                      f"{one['fidelity']} / {two['fidelity']}")
    print(f"shares are of each transport's own ideal busbw; {repeat} run(s) of each side")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
