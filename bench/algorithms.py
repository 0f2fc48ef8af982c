#!/usr/bin/env python3
"""A collective's algorithms side by side (all-reduce: ring against tree; all-to-all: direct
against pairwise): busbw by size for each algorithm and both transports, on a healthy fabric
and with one spine degraded to a quarter of its rate for the whole run, and where `auto`'s
choice lands against the faster of the two. Every run in one sitting, every variant on the
same seeds.

    sudo .venv/bin/python -m bench.algorithms [--scenario FILE] [--collective all_reduce]
        [--sizes 64KiB,1MiB,4MiB] [--seeds 1] [--variants mrc,rocev2] [--results DIR]

The scenario (default scenarios/paper-real/control.yaml: 8 ranks over 2 planes, 100 Gbit/s,
1 us hops), with `--collective` (default all_reduce) in place of its own, runs once per size,
algorithm, variant, seed and fabric (healthy; `degraded`: plane
0's leaf 0 - spine 1 link at 0.25 of its rate from the start). Iterations shrink with the size
so that no run carries more than about 16 MiB a rank (at least 4 timed). `auto` is not run:
it runs what the cost model picks (hostagent/workloads/algorithms.py, over the fabric as
testbed/run/algorithm.py sees it), which the table names beside the measured faster one.

Each cell is busbw (nccl-tests' loop time: each rank's timed loop, averaged over the ranks, as
the summary's table; not the mean CCT, which counts twice what consecutive iterations overlap
when ranks drift apart) as a share of the ideal (a rank's planes at line
rate), min/median/max over the seeds whose run was `faithful` and verified; `tree/ring` (or
`pairwise/direct`) is the ratio of the medians; `auto/best` the share auto's pick gets of the
faster one's. Results folders go to results/algorithms-<utc>/, every number to its
algorithms.json.
"""
from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

from analysis import metrics
from bench import fair
from bench.common import ROOT, loaded, say
from hostagent.workloads import algorithms
from testbed.run.algorithm import cost_fabric
from testbed.scenario.schema import load as load_scenario
from testbed.scenario.units import format_size, parse_size

FABRICS = ("healthy", "degraded")
DEGRADED = {"faults": [{"at": 0.0, "kind": "degrade", "fraction": 0.25,
                        "target": {"plane": 0, "leaf": 0, "spine": 1}}]}
BYTES_PER_RUN = 16 * 2**20  # a rank's array bytes over a run's timed iterations, at most
MIN_ITERATIONS, MAX_ITERATIONS = 4, 12


def iterations_for(size: int) -> int:
    return max(MIN_ITERATIONS, min(MAX_ITERATIONS, BYTES_PER_RUN // size))


@dataclass(frozen=True)
class Cell:
    """One run's outcome."""

    share: float | None  # busbw / ideal
    faithful: bool
    note: str


def measure(run_dir: Path | None, err: str) -> Cell:
    if run_dir is None:
        return Cell(None, False, fair.why(err))
    run = loaded(run_dir)
    if run is None:
        return Cell(None, False, f"{run_dir.name} did not complete")
    iterations = run.tables["iterations"]
    try:
        (row,) = metrics.nccl_rows(iterations)
    except ValueError as exc:  # an iteration some rank did not finish, or none timed
        return Cell(None, False, str(exc))
    verified = row.wrong == 0
    faithful = run.meta.verdict == fair.FAITHFUL and verified
    return Cell(row.busbw / run.facts.ideal_busbw, faithful,
                "" if faithful else f"{run.meta.verdict}, verified {verified}")


def spread_text(values: list[float]) -> str:
    if not values:
        return "-"
    return "/".join(f"{v:.2f}" for v in (min(values), median(values), max(values)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", type=Path, default=ROOT / "scenarios/paper-real/control.yaml",
                    help="the fabric and workload (an all-reduce) every run uses")
    ap.add_argument("--collective", default="all_reduce",
                    choices=[k for k, a in algorithms.AVAILABLE.items() if len(a) == 2],
                    help="the collective whose two algorithms run (default: %(default)s)")
    ap.add_argument("--sizes", default="64KiB,1MiB,4MiB",
                    help="array sizes, comma-separated, with units (default: %(default)s)")
    fair.add_again_options(ap, seeds="1", variants="mrc,rocev2")
    args = ap.parse_args()
    seeds, variants, out = fair.again_sitting(ap, args, "algorithms")
    try:
        sizes = [parse_size(s.strip()) for s in args.sizes.split(",") if s.strip()]
        scenario, _ = load_scenario(args.scenario)
    except (ValueError, OSError) as exc:
        ap.error(str(exc))
    if scenario.workload.steps:
        ap.error(f"{args.scenario}: the workload must be a collective, not a step graph")
    kind = args.collective
    first, second = algorithms.AVAILABLE[kind]
    world, fabric = len(scenario.rank_hosts()), cost_fabric(scenario)
    cells: dict[tuple[int, str, str, str], list[Cell]] = {}
    total = len(sizes) * len(variants) * len(FABRICS) * 2 * len(seeds)
    done = 0
    for seed in seeds:
        for size in sizes:
            for variant in variants:
                for fab in FABRICS:
                    for alg in (first, second):
                        done += 1
                        overrides: dict[str, Any] = {"workload": {
                            "collective": kind, "size": size, "algorithm": alg, "warmup": 1,
                            "iterations": iterations_for(size)}}
                        if fab == "degraded":
                            overrides |= DEGRADED
                        label = f"-{format_size(size).replace(' ', '')}-{alg}-{fab}"
                        run_dir, err = fair.run_or_earlier(
                            args.scenario, variant, seed, out, args.again is not None,
                            overrides=overrides, label=label)
                        cell = measure(run_dir, err)
                        cells.setdefault((size, variant, fab, alg), []).append(cell)
                        say(f"[{done}/{total}] seed {seed} {format_size(size)} {variant} {fab} "
                            f"{alg}: " + (f"{cell.share:.2f} of ideal" if cell.share else "-")
                            + (f" ({cell.note})" if cell.note else ""))
    rows = []
    for size in sizes:
        pick = algorithms.choose(kind, "auto", size, world, fabric)
        for variant in variants:
            for fab in FABRICS:
                kept = {alg: [c.share for c in cells[(size, variant, fab, alg)]
                              if c.faithful and c.share is not None] for alg in (first, second)}
                med = {alg: median(v) if v else None for alg, v in kept.items()}
                a, b = med[first], med[second]
                best = max((v for v in med.values() if v is not None), default=None)
                got = med[pick]
                rows.append([format_size(size), variant, fab,
                             f"{spread_text(kept[first])} (n={len(kept[first])})",
                             f"{spread_text(kept[second])} (n={len(kept[second])})",
                             f"{b / a:.2f}" if a and b else "-", pick,
                             f"{got / best:.2f}" if got and best else "-"])
    print(fair.header(f"{kind}: {first} against {second}", ["bench.algorithms", *_argv(args)]))
    where = args.scenario.relative_to(ROOT) if args.scenario.is_relative_to(ROOT) else args.scenario
    print(f"- scenario: {where}, {world} ranks; cost model's fabric: one-way "
          f"{fabric.latency_s * 1e6:.1f} us, {fabric.bytes_per_s * 8 / 1e6:.1f} Mbit/s a rank "
          "(emulated)")
    print(f"- results: {out}\n- seeds: {', '.join(map(str, seeds))}")
    print("- busbw as a share of the ideal, min/median/max over faithful, verified runs\n")
    print(fair.table(["size", "variant", "fabric", first, second, f"{second}/{first}", "auto picks",
                      "auto/best"], rows))
    (out / "algorithms.json").write_text(json.dumps(
        {f"{s}|{v}|{f}|{a}": [vars(c) for c in cs] for (s, v, f, a), cs in cells.items()},
        indent=1))
    return 0


def _argv(args: argparse.Namespace) -> list[str]:
    again = [f"--again {args.again}"] if args.again else []
    return [f"--scenario {args.scenario}", f"--collective {args.collective}",
            f"--sizes {args.sizes}", *again, f"--seeds {args.seeds}",
            f"--variants {args.variants}"]


if __name__ == "__main__":
    raise SystemExit(main())
