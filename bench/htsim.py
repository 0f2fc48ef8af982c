#!/usr/bin/env python3
"""The testbed against uet-htsim, the Ultra Ethernet Consortium's simulator: each scenario runs
in htsim (htsim_uec for MRC, htsim_roce with PFC for RoCEv2) and on the testbed, on
the same seeds, and one table puts them side by side: the collective's completion time (CCT)
and its flows' completion times p50 / p99, each as a ratio to the ideal, min / median / max
over the seeds, and the ratio of the medians, testbed over htsim. For chained flows (a ring)
a row `CCT, htsim at arrival` gives htsim's CCT had each step started when its predecessor's
last byte arrived, as the testbed's ring does, rather than when its sender had it all
acknowledged, as htsim's triggers do (htsim_files.arrival_cct_us). A row `CCT, testbed's first
iteration` gives the testbed's untimed first iteration, whose QPs start with fresh windows as
htsim's flows do (the timed ones keep each QP's window from the iteration before), against
htsim's CCT (at arrival, for chained flows).

    sudo flock /tmp/testbed-run.lock .venv/bin/python -m bench.htsim --htsim DIR
        [--seeds 1,2,3] [--variants mrc,rocev2,rocev2-lossless] [--results DIR]
        [SCENARIO.yaml ...]

DIR is a checkout of github.com/ultraethernet/uet-htsim; htsim_uec and htsim_roce are built
there with cmake when missing. Without scenarios it runs scenarios/htsim/. A testbed run counts
only when judged `faithful`. Progress goes to stderr; stdout is the report to paste.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.load import RunError, load_run
from analysis.steps import iteration_times
from bench import fair
from bench.common import ROOT
from bench.htsim_files import Flow, Inputs, arrival_cct_us, ideal_cct, inputs
from bench.htsim_output import Completion, completions, event
from testbed.errors import ScenarioError
from testbed.scenario import load

SIM = Path("htsim") / "sim"
BINARIES = ("htsim_uec", "htsim_roce")
HTSIM_TIMEOUT = 300.0  # s of wall time for one htsim run
END_IDEALS = 50  # htsim's simulated end: this many ideal CCTs (its DCQCN timers never stop)


def counterpart(variant: str) -> str:
    """The htsim binary a testbed variant is matched with: htsim_uec for MRC's, htsim_roce
    for RoCEv2's."""
    return "htsim_uec" if fair.VARIANTS[variant].transport == "mrc" else "htsim_roce"


def binaries(checkout: Path) -> dict[str, Path]:
    """htsim_uec and htsim_roce of the uet-htsim checkout, built with cmake (at most 2 jobs:
    a shared machine) when missing."""
    sim = checkout / SIM
    if not (sim / "CMakeLists.txt").is_file():
        raise SystemExit(f"{checkout}: not a uet-htsim checkout (no {SIM}/CMakeLists.txt); "
                         f"git clone https://github.com/ultraethernet/uet-htsim")
    made = {name: sim / "build" / "datacenter" / name for name in BINARIES}
    missing = [name for name, path in made.items() if not path.is_file()]
    if missing:
        print(f"building {', '.join(missing)} in {sim}/build", file=sys.stderr, flush=True)
        for cmd in (["cmake", "-S", str(sim), "-B", str(sim / "build"),
                     "-DCMAKE_BUILD_TYPE=Release"],
                    ["cmake", "--build", str(sim / "build"), "-j2", "--target", *missing]):
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return made


def commit(path: Path) -> str:
    done = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=path,
                          capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else "?"


def run_htsim(binary: Path, args: list[str], workdir: Path, flows: int,
              timeout: float = HTSIM_TIMEOUT) -> list[Completion]:
    """Run htsim in `workdir` and read its flows as it prints them; once all `flows` have
    finished it is stopped (its DCQCN timers keep it running to its end time, printing a line
    per packet). ValueError when it ends or times out first."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "command").write_text(" ".join([str(binary), *args]) + "\n")
    proc = subprocess.Popen([str(binary), *args], cwd=workdir, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    # grep keeps the flow lines of millions (htsim_roce prints a line per packet sent)
    lines = subprocess.Popen(["grep", "-a", "--line-buffered", "-E", "^(Flow|startflow) "],
                             stdin=proc.stdout, stdout=subprocess.PIPE, text=True,
                             errors="replace")
    assert proc.stdout is not None and lines.stdout is not None
    proc.stdout.close()  # grep holds it now: htsim gets SIGPIPE if grep ends
    watchdog = threading.Timer(timeout, proc.kill)  # a livelocked htsim prints no flow line
    watchdog.start()
    kept, events, done = [], [], 0
    try:
        for line in lines.stdout:
            if (e := event(line)) is not None:
                kept.append(line)
                events.append(e)
                done += e.finished
            if done == flows:
                break
    finally:
        watchdog.cancel()
        for p in (proc, lines):
            p.kill()
            p.wait()
        (workdir / "flows.txt").write_text("".join(kept))
    if done < flows:
        raise ValueError(f"{binary.name} ended (exit {proc.returncode}; -9: killed after "
                         f"{timeout:.0f} s) with {done} of {flows} flows finished")
    return completions(events)


@dataclass(frozen=True)
class Measure:
    """One run's ratios to the ideal: CCT, and the flows' completion times p50 and p99; for
    htsim's chained flows also the CCT had each started at its predecessor's arrival."""

    cct: float
    p50: float
    p99: float
    fidelity: str = fair.FAITHFUL
    cct_arrival: float | None = None
    # the testbed's first (untimed) iteration, whose QPs start with fresh windows as htsim's
    # flows do; the timed ones keep each QP's window from the iteration before
    cct_first: float | None = None


def matched(inp: Inputs, prefix: str, done: list[Completion]) -> list[tuple[Flow, Completion]]:
    """Each finished flow with the flow it is: by name (`prefix_src_dst`), the flows of one
    pair in id order against its completions in start order (flows of one pair start in id
    order; htsim_roce prints no flow id)."""
    ours: dict[str, list[Flow]] = {}
    for f in sorted(inp.flows, key=lambda f: f.id):
        ours.setdefault(f"{prefix}_{f.src}_{f.dst}", []).append(f)
    order = {name: iter(flows) for name, flows in ours.items()}
    return [(next(order[c.name]), c) for c in sorted(done, key=lambda c: c.start_us)]


def htsim_measure(pairs: list[tuple[Flow, Completion]], inp: Inputs, ideal_s: float,
                  rate: float) -> Measure:
    """Ratios from htsim's flows (us): the CCT is the last finish (every chain starts at 0);
    each flow's ideal is its bytes at the host link's `rate` (bit/s of htsim's frame). Where
    flows are chained, also the CCT had each started at its predecessor's arrival
    (`arrival_cct_us`), which is when the testbed's ring starts a step."""
    fct = [c.fct_us / (f.size * 8 / rate * 1e6) for f, c in pairs]
    p50, p99 = np.percentile(fct, [50, 99])
    ideal_us = ideal_s * 1e6
    arrival = None
    if inp.at_arrival and any(f.after is not None for f, _ in pairs):
        ends = {f.id: c.end_us for f, c in pairs}
        arrival = arrival_cct_us([f for f, _ in pairs], ends, inp.return_us) / ideal_us
    return Measure(max(c.end_us for _, c in pairs) / ideal_us, float(p50), float(p99),
                   cct_arrival=arrival)


def receivers_spans(iterations: pd.DataFrame, messages: pd.DataFrame) -> pd.DataFrame:
    """Each iteration of a flows workload at its receivers (the ranks its writes go to): the
    longest of their own spans of it (a receiver's start to its end: `cct`, s), and whether it
    is a warm-up, by iteration. Each receiver's own span, not their first start to their last
    end: flows with no receiver in common (pairs) drift apart over the iterations, and a span
    across receivers would count the drift; the longest is the slowest flow's, as htsim's CCT
    (the last flow's completion) is."""
    it = iterations[iterations["rank"].isin(messages["peer"].unique())]
    return (it.assign(span=it["end"] - it["start"]).groupby("iteration")
            .agg(cct=("span", "max"), warmup=("warmup", "first")))


def collective_spans(iterations: pd.DataFrame) -> pd.DataFrame:
    """Each iteration of a collective (`cct`, s, and whether it is a warm-up), by iteration,
    from its first rank's start or, when later, the previous iteration's last end, to its last
    end (analysis.steps.iteration_times). htsim's flows all start at 0; the testbed's ranks
    done early start the next iteration at once and wait for the late ones, and counted from
    their start the iteration would include that skew (0.5-0.95 s of a 2.7-3.2 s ring on a
    degraded spine)."""
    return (iteration_times(iterations).set_index("iteration")
            .rename(columns={"time": "cct"})[["cct", "warmup"]])


def testbed_measure(run_dir: Path, ideal_s: float, rate: float) -> Measure:
    """Ratios from a testbed run: the median timed iteration's CCT (a collective's:
    `collective_spans`), and each write of a timed iteration from posted to acknowledged over
    its bytes at the host link's `rate`. A flows workload's CCT is its slowest receiver's span
    of the iteration, from its clear-to-send to the last byte, as htsim's flows all start at
    0: its senders' iterations overlap (a sender done early posts its next write, which waits
    for the receiver)."""
    run = load_run(run_dir)
    if run.meta.status != "complete":
        raise RunError(f"the run {run.meta.status}")
    m = run.tables["messages"]
    every = (collective_spans(run.tables["iterations"]) if run.steps.empty
             else receivers_spans(run.tables["iterations"], m))
    times = every.loc[~every["warmup"], "cct"]
    warm = every.loc[every["warmup"], "cct"]
    m = m[m["iteration"].isin(times.index) & (m["size"] > 0)]
    fct = (m["end"] - m["start"]) / (m["size"] * 8 / rate)
    p50, p99 = np.percentile(fct.to_numpy(), [50, 99])
    return Measure(float(times.median()) / ideal_s, float(p50), float(p99),
                   run.meta.verdict or "-",
                   cct_first=float(warm.iloc[0]) / ideal_s if len(warm) else None)


def spread_text(values: list[float]) -> str:
    if not values:
        return "-"
    return "/".join(f"{x:.2f}" for x in (min(values), statistics.median(values), max(values)))


def ratio_text(testbed: list[float], htsim: list[float]) -> str:
    if not testbed or not htsim:
        return "-"
    return f"{statistics.median(testbed) / statistics.median(htsim):.2f}"


def scenario_rows(file: Path, sit: fair.Sitting, bins: dict[str, Path],
                  notes: list[str], missing: list[list[object]], dcqcn: bool,
                  on_testbed: bool = True) -> list[list[object]]:
    """Run one scenario in htsim and, unless `on_testbed` is off, on the testbed on every
    seed; its rows of the table. A variant whose htsim counterpart cannot build the fabric is
    not run on the testbed."""
    sc, _ = load(file)
    inp = inputs(sc, dcqcn=dcqcn)
    notes += [f"{file.stem}: {n}" for n in inp.notes]
    variants = [v for v in sit.variants if inp.roce is not None or counterpart(v) == "htsim_uec"]
    for variant in variants:  # a variant whose run name is too long fails here, before any run
        fair.variant_text(file.read_text(), variant, sit.seeds[0])
    ideal = ideal_cct(inp.flows, inp.host_rate)
    end_us = str(max(1000, round(END_IDEALS * ideal / inp.dilation * 1e6)))
    sim: dict[str, list[Measure]] = {b: [] for b in BINARIES}
    bed: dict[str, list[Measure]] = {v: [] for v in variants}
    for seed in sit.seeds:
        for name in BINARIES:
            args = inp.uec if name == "htsim_uec" else inp.roce
            if args is None:
                continue
            work = sit.out / file.stem / f"{name}-s{seed}"
            work.mkdir(parents=True, exist_ok=True)
            (work / "matrix.cm").write_text(inp.matrix)
            topo = []
            if inp.topology_file is not None:
                (work / "fabric.topo").write_text(inp.topology_file)
                topo = ["-topo", "fabric.topo"]
            try:
                done = run_htsim(bins[name], [*args, *topo, "-tm", "matrix.cm", "-seed",
                                              str(seed), "-end", end_us], work, len(inp.flows))
            except ValueError as exc:
                missing.append([file.stem, name, seed, str(exc)])
                continue
            prefix = "Uec" if name == "htsim_uec" else "Roce"
            sim[name].append(htsim_measure(matched(inp, prefix, done), inp,
                                           ideal / inp.dilation, inp.host_rate * inp.dilation))
            print(f"{file.stem} {name} s{seed}: CCT {sim[name][-1].cct:.2f} x ideal",
                  file=sys.stderr, flush=True)
        for variant in variants if on_testbed else ():
            d, err = fair.run_variant(file.resolve(), variant, seed, sit.out / file.stem)
            try:
                if d is None:
                    raise RunError(fair.why(err))
                m = testbed_measure(d, ideal, inp.host_rate)
            except RunError as exc:
                missing.append([file.stem, variant, seed, str(exc)])
                continue
            print(f"{file.stem} {variant} s{seed}: CCT {m.cct:.2f} x ideal, {m.fidelity}",
                  file=sys.stderr, flush=True)
            if fair.counted([m.fidelity]):
                bed[variant].append(m)
            else:
                missing.append([file.stem, variant, seed, f"{m.fidelity}: not a result"])
    return [row for variant in variants
            for row in variant_rows(file.stem, variant, sim[counterpart(variant)],
                                    bed[variant], len(sit.seeds))]


def variant_rows(stem: str, variant: str, h: list[Measure], t: list[Measure],
                 seeds: int) -> list[list[object]]:
    """One variant's rows: htsim's measures `h` beside the testbed's `t`. `CCT, htsim at
    arrival` where htsim's flows are chained; `CCT, testbed's first iteration` where the
    testbed ran one before the timed ones, against htsim's CCT (at arrival where chained)."""
    arrival = [m.cct_arrival for m in h if m.cct_arrival is not None]
    first = [m.cct_first for m in t if m.cct_first is not None]
    pairs = {"cct": ([m.cct for m in h], [m.cct for m in t]),
             "arrival": (arrival, [m.cct for m in t]),
             "first": (arrival or [m.cct for m in h], first),
             "p50": ([m.p50 for m in h], [m.p50 for m in t]),
             "p99": ([m.p99 for m in h], [m.p99 for m in t])}
    rows: list[list[object]] = []
    for metric, label in (("cct", "CCT"), ("arrival", "CCT, htsim at arrival"),
                          ("first", "CCT, testbed's first iteration"),
                          ("p50", "flow p50"), ("p99", "flow p99")):
        hv, tv = pairs[metric]
        if (metric == "arrival" and not arrival) or (metric == "first" and not first):
            continue
        rows.append([stem, variant, counterpart(variant), label, spread_text(hv),
                     spread_text(tv), ratio_text(tv, hv), f"{len(h)}+{len(t)} of {seeds}"])
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenarios", nargs="*", type=Path, metavar="SCENARIO.yaml",
                    help="default: scenarios/htsim/*.yaml")
    ap.add_argument("--htsim", type=Path, required=True, metavar="DIR",
                    help="a uet-htsim checkout (its root)")
    ap.add_argument("--roce-dcqcn", action="store_true",
                    help="htsim_roce with DCQCN besides PFC (stalls at uet-htsim 40ccb05)")
    ap.add_argument("--htsim-only", action="store_true",
                    help="run htsim alone (no root, no testbed run): its side of the table")
    fair.add_options(ap, "htsim")
    args = ap.parse_args()
    if args.against is not None:
        ap.error("--against: this bench measures one checkout against htsim")
    sit = fair.sitting(ap, args, "htsim")
    bins = binaries(args.htsim.resolve())
    files = args.scenarios or sorted((ROOT / "scenarios" / "htsim").glob("*.yaml"))
    top = fair.header("bench/htsim.py", sys.orig_argv)
    notes: list[str] = []
    missing: list[list[object]] = []
    rows: list[list[object]] = []
    print(f"results: {sit.out}", file=sys.stderr, flush=True)
    for file in files:
        try:
            rows += scenario_rows(file, sit, bins, notes, missing, args.roce_dcqcn,
                                  not args.htsim_only)
        except (ScenarioError, ValueError) as exc:  # HtsimError is a ValueError
            missing.append([file.stem, "-", "-", str(exc)])
    print(top + f"- uet-htsim: {commit(args.htsim)}\n" + sit.lines())
    print(fair.table(["scenario", "variant", "htsim", "ratio to ideal", "htsim min/med/max",
                      "testbed min/med/max", "testbed / htsim", "runs (htsim+testbed)"], rows))
    if missing:
        print("runs that made no result:\n\n" + fair.table(["scenario", "run", "seed", "why"],
                                                           missing))
    print("model notes:\n\n" + "\n".join(f"- {n}" for n in notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
