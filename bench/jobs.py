#!/usr/bin/env python3
"""Jobs sharing a fabric: each job's slowdown against itself alone, and what running jobs
together costs the machine, for both transports on the same seeds, in one sitting.

    sudo .venv/bin/python -m bench.jobs [--scenarios scenarios/jobs] [--seeds 1,2,3]
        [--variants mrc,rocev2] [--results DIR] [--again DIR]

Every scenario with `jobs:` (default: scenarios/jobs/, a DP step beside an MoE step, packed and
spread, healthy and with a T1 blackhole under leaves 0-1) runs once per variant and seed; each
such run is the jobs together on one fabric, then each job alone on a fabric built from the same
plan and seed, with the same timeline (its control: testbed/run/runner.py). A job's slowdown
is its mean timed step together over alone; it counts when the run together and the job's
control were both `faithful` and every rank of both verified every byte.

The second table is the cost of jobs: the agents' CPU (user and system, every agent process
from the workload's start to its end) per data packet delivered, with the jobs together
against the same jobs' controls (each alone, summed): building once and carrying two jobs
should cost no more per packet than one. Results folders go to results/jobs-<utc>/, every
number to its jobs.json.
"""
from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from bench import fair
from bench.common import ROOT, say
from bench.scale import delivered_packets
from runcontract.meta import MetaError, read_meta
from testbed.emulation.calibration import agents_cpu
from testbed.scenario.schema import load as load_scenario


@dataclass(frozen=True)
class JobCell:
    """One job of one run: its times together and alone, and whether they count."""

    scenario: str
    job: str
    variant: str
    seed: int
    together_s: float | None
    alone_s: float | None
    counted: bool
    note: str

    @property
    def slowdown(self) -> float | None:
        return (self.together_s / self.alone_s
                if self.together_s is not None and self.alone_s else None)


@dataclass(frozen=True)
class Cost:
    """Agents' CPU and delivered data packets of the jobs together and of their controls."""

    scenario: str
    variant: str
    seed: int
    together_cpu_s: float
    together_packets: float
    alone_cpu_s: float
    alone_packets: float

    @property
    def ratio(self) -> float | None:
        """CPU per packet together over alone (1.0: no cost to sharing)."""
        if not (self.together_packets and self.alone_packets and self.alone_cpu_s):
            return None
        return ((self.together_cpu_s / self.together_packets)
                / (self.alone_cpu_s / self.alone_packets))


def verified(folder: Path) -> bool:
    """Every rank completed and verified every iteration of the job's folder."""
    path = folder / "iterations.parquet"
    if not path.exists():
        return False
    it = pd.read_parquet(path)
    return bool(len(it)) and bool(it["verified"].all()) and bool(it["start"].notna().all())


def agents(folder: Path) -> tuple[float, float]:
    """The agents' CPU seconds and data packets delivered in a job's folder."""
    results = [json.loads(p.read_text()) for p in (folder / "agents").glob("*/result.json")]
    qps = pd.read_parquet(folder / "qps.parquet")
    return agents_cpu(results), delivered_packets(qps)


def measure(scenario: str, variant: str, seed: int, run: Path | None,
            err: str) -> tuple[list[JobCell], Cost | None]:
    """The run's jobs and its cost, or why there are none."""
    if run is None:
        say(f"  no run: {fair.why(err)}")
        return [], None
    try:
        meta = read_meta(run)
    except MetaError as exc:
        say(f"  {run.name}: {exc}")
        return [], None
    cells, cost = [], None
    alone_cpu = together_pkts = alone_pkts = 0.0
    for job in meta.jobs:
        mine, solo = run / "jobs" / job.name, run / (job.solo_run or "-")
        ok = (meta.verdict == fair.FAITHFUL and job.solo_verdict == fair.FAITHFUL
              and verified(mine) and verified(solo))
        note = "" if ok else (f"together {meta.verdict}, alone {job.solo_verdict}, verified "
                              f"{verified(mine)}/{verified(solo)}")
        cells.append(JobCell(scenario, job.name, variant, seed, job.time_s, job.solo_time_s,
                             ok, note))
        if (mine / "qps.parquet").exists() and (solo / "qps.parquet").exists():
            together_pkts += agents(mine)[1]
            cpu, packets = agents(solo)
            alone_cpu, alone_pkts = alone_cpu + cpu, alone_pkts + packets
    # together, a pooled process serves hosts of both jobs: its CPU is counted once
    together_cpu = agents_cpu([json.loads(p.read_text())
                               for p in run.glob("jobs/*/agents/*/result.json")])
    if together_pkts and alone_pkts:
        cost = Cost(scenario, variant, seed, together_cpu, together_pkts, alone_cpu, alone_pkts)
    return cells, cost


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", type=Path, default=ROOT / "scenarios" / "jobs",
                    help="a folder of scenarios with jobs, or one such file")
    fair.add_again_options(ap, seeds="1,2,3", variants="mrc,rocev2")
    args = ap.parse_args()
    seeds, variants, out = fair.again_sitting(ap, args, "jobs")
    files = (sorted(args.scenarios.glob("*.yaml")) if args.scenarios.is_dir()
             else [args.scenarios])
    if not files:
        ap.error(f"{args.scenarios}: no scenario files there")
    try:
        for file in files:
            if not load_scenario(file)[0].jobs:
                ap.error(f"{file}: a scenario without jobs; this bench compares jobs")
    except (ValueError, OSError) as exc:
        ap.error(str(exc))
    cells: list[JobCell] = []
    costs: list[Cost] = []
    total, done = len(files) * len(seeds) * len(variants), 0
    for seed in seeds:
        for file in files:
            for variant in variants:
                done += 1
                run, err = fair.run_or_earlier(file, variant, seed, out, args.again is not None,
                                               timeout=fair.RUN_TIMEOUT * 3)
                got, cost = measure(file.stem, variant, seed, run, err)
                cells += got
                costs += [cost] if cost is not None else []
                say(f"[{done}/{total}] seed {seed} {file.stem} {variant}: " + ", ".join(
                    f"{c.job} {c.slowdown:.3f}x" if c.slowdown else f"{c.job} -" for c in got)
                    + "".join(f" ({c.job}: {c.note})" for c in got if c.note))
    print(fair.header("Jobs together against each alone", ["bench.jobs", *_argv(args)]))
    print(f"- results: {out}\n- seeds: {', '.join(map(str, seeds))}")
    print("- slowdown: a job's mean timed step together over alone (same fabric, seed and "
          "timeline), min/median/max over runs where both were faithful and verified\n")
    rows = []
    for file in files:
        for job in dict.fromkeys(c.job for c in cells if c.scenario == file.stem):
            for variant in variants:
                mine = [c for c in cells if (c.scenario, c.job, c.variant)
                        == (file.stem, job, variant)]
                s = fair.spread([c.slowdown for c in mine], [c.counted for c in mine])
                t = fair.spread([c.together_s and c.together_s * 1e3 for c in mine],
                                [c.counted for c in mine])
                a = fair.spread([c.alone_s and c.alone_s * 1e3 for c in mine],
                                [c.counted for c in mine])
                rows.append([file.stem, job, variant, f"{s.text('{:.3f}')} (n={s.n}/{s.runs})",
                             t.text("{:.0f}"), a.text("{:.0f}")])
    print(fair.table(["scenario", "job", "variant", "slowdown", "together (ms)", "alone (ms)"],
                     rows))
    print("\n### The cost of jobs: agents' CPU per delivered data packet, together over alone "
          "(min/median/max)\n")
    cost_rows = []
    for variant in variants:
        mine = [c for c in costs if c.variant == variant]
        s = fair.spread([c.ratio for c in mine], [True] * len(mine))
        per = fair.spread([c.together_cpu_s / c.together_packets * 1e6 for c in mine],
                          [True] * len(mine))
        alone = fair.spread([c.alone_cpu_s / c.alone_packets * 1e6 for c in mine],
                            [True] * len(mine))
        cost_rows.append([variant, f"{per.text('{:.0f}')}", f"{alone.text('{:.0f}')}",
                          f"{s.text('{:.2f}')} (n={s.n})"])
    print(fair.table(["variant", "together (us/packet)", "alone (us/packet)",
                      "together/alone"], cost_rows))
    out.mkdir(parents=True, exist_ok=True)
    (out / "jobs.json").write_text(json.dumps(
        {"jobs": [asdict(c) | {"slowdown": c.slowdown} for c in cells],
         "cost": [asdict(c) | {"ratio": c.ratio} for c in costs]}, indent=1))
    return 0


def _argv(args: argparse.Namespace) -> list[str]:
    where = (args.scenarios.relative_to(ROOT) if args.scenarios.is_relative_to(ROOT)
             else args.scenarios)
    again = [f"--again {args.again}"] if args.again else []
    return [f"--scenarios {where}", f"--seeds {args.seeds}", f"--variants {args.variants}",
            *again]


if __name__ == "__main__":
    raise SystemExit(main())
