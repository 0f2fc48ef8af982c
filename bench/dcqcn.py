#!/usr/bin/env python3
"""How the RoCEv2 baseline's results depend on DCQCN's scaled timers: a sweep on the simnet, or
(`--testbed`) on the testbed's fault scenarios.

DCQCN's CNP spacing and its alpha / rate-increase timers are ratios to the path's base RTT
(hostagent/protocol/dcqcn.py, `CONSTANTS`: 5 and 5.5 RTTs, from the paper's 50 and 55 us over
a 10 us fabric RTT). This sweeps both ratios over 0.5-20 base RTTs in three seeded cases on the
sans-IO simulated network (tests/unit/hostagent/simnet.py), each shaped like quickstart's
fabric (25 Mbit/s ports, 4 KB packets, 100 KB buffers marking ECN above a fifth and dropping
when full, the other hops' serialization as path latency: a 5.5 ms base RTT):

- bottleneck: one QP through a port at half its line rate;
- incast: 4 QPs, each at line rate, into one port;
- shared: 2 QPs sharing one port.

For each setting: the time until the last QP's 1 MiB write completes, its share of the ideal
(every byte at the port's rate, and one base RTT), timeouts, CNPs and rate cuts over all
QPs ("fail": a QP used up its retries). `*` marks the default ratios, `<` the best share per
case. No root; about 15 s of CPU.

    .venv/bin/python -m bench.dcqcn           # share-of-ideal matrices, default and best rows
    .venv/bin/python -m bench.dcqcn --full    # and every setting's row

On the testbed, each scenario (default: scenarios/degrade.yaml, incast-victim.yaml,
gray-loss.yaml: a slowed link, an incast beside the collective, a lossy link) runs once per
seed, grid setting and RoCEv2 variant (bench/fair.py: the same scenario copy, `dcqcn:
{cnp_rtts, timer_rtts}` set to the setting; a spec's and a run's file name end in
`-cnpC-timerT`); each run must say in its meta.json that it ran that setting. The default grid
is the default ratios and five of the simnet's informative points (its best incast and
bottleneck settings, and the diagonal from 1 to 20 RTTs); one that leaves the default out gets
it added first. As root; 3 scenarios x 6 settings x 3 seeds of one variant are 54 runs of
8-10 s each on a 2-core machine (more where a setting slows the collective): about 10 min,
twice that with rocev2-lossless:

    sudo .venv/bin/python -m bench.dcqcn --testbed [--seeds 1,2,3]
        [--variants rocev2[,rocev2-lossless]] [--grid 5:5.5,0.5:2,1:1,2:2,10:10,20:20]
        [--results DIR] [SCENARIO.yaml ...]

Progress goes to stderr; stdout is a report to paste: the header (command, commit, start),
every run with its verdict, the runs that made no result and why, then per scenario (with its
base RTT) and variant one row per setting: the runs counted (faithful ones, bench/fair.py) of
the seeds, min/median/max over them of the busbw's share of the ideal, the CCT p99 (ms), the
timeouts and the CNPs of all QPs of a run. `*` marks the default setting, `<` the best median
share among the settings whose every run made a result. The run folders stay under
results/dcqcn-<utc>/ (or DIR).
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.load import RunError, load_run
from bench import faults
from bench.common import ROOT, results_folder
from bench.fair import (
    Spread,
    counted,
    header,
    parse_seeds,
    parse_variants,
    run_variant,
    spread,
    table,
    why,
)
from hostagent.protocol import nic, wire
from hostagent.protocol.dcqcn import CONSTANTS, DcqcnCC, DcqcnConfig
from hostagent.protocol.qp import QPConfig, WriteDone
from hostagent.protocol.rocev2 import RoceQP
from testbed.run.traffic import base_rtt
from testbed.scenario import limits
from testbed.scenario.schema import load as load_scenario
from tests.unit.hostagent.simnet import Link, PathModel, SimNet

LINE = 25e6  # bit/s: every host port
MSS = 4096
BUFFER = 100_000  # bytes at the bottleneck port: ECN above a fifth, dropped when full
SIZE = 1 << 20  # bytes each QP writes
MAX_CWND = 256 * 1024
RATIOS = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0)
DEFAULT_CNP = CONSTANTS["cnp_rtts"].value
DEFAULT_TIMER = CONSTANTS["timer_rtts"].value
TIMERS = tuple(sorted({*RATIOS, DEFAULT_TIMER} - {5.0}))
HOP = (MSS + wire.HEADER_SIZE + nic.FRAME_OVERHEAD) * 8 / LINE  # s: a packet at one line hop
ACK_HOP = (wire.HEADER_SIZE + nic.FRAME_OVERHEAD) * 8 / LINE
DATA_LATENCY = 3 * HOP  # the data's other hops: host port, leaf up, spine down
ACK_LATENCY = 4 * ACK_HOP


@dataclass(frozen=True)
class Case:
    name: str
    senders: int
    port_share: float  # the shared port's rate, as a share of the line rate

    @property
    def port_rate(self) -> float:
        return self.port_share * LINE / 8  # bytes/s

    @property
    def base_rtt(self) -> float:
        """As testbed/run/traffic.py's: a packet at each hop, its ACK back."""
        return DATA_LATENCY + (MSS + wire.HEADER_SIZE) / self.port_rate + ACK_LATENCY

    @property
    def ideal(self) -> float:
        """Every sender's bytes through the port at its rate, with our header per packet."""
        packets = -(-SIZE // MSS)
        return (self.senders * (SIZE + packets * wire.HEADER_SIZE) / self.port_rate +
                self.base_rtt)


CASES = (Case("bottleneck", 1, 0.5), Case("incast", 4, 1.0), Case("shared", 2, 1.0))


@dataclass
class Result:
    time: float
    share: float
    timeouts: int
    cnps: int
    cuts: int
    failed: bool


def run(case: Case, cnp_rtts: float, timer_rtts: float, seed: int = 1) -> Result:
    port = Link(rate=case.port_rate, ecn_bytes=BUFFER / 5, trim_bytes=BUFFER)
    timeout = 2 * BUFFER / case.port_rate + 0.005  # the scenario's default (schema.py)
    cfg = QPConfig(mss=MSS, max_cwnd=MAX_CWND, timeout=timeout, line_rate=LINE,
                   base_rtt=case.base_rtt)
    senders, nets = [], []
    for k in range(case.senders):
        a, b = (RoceQP(qpn, peer, memoryview(bytearray(SIZE)), cfg, seed * 100 + qpn,
                       cc=DcqcnCC(DcqcnConfig.for_path(MSS, MAX_CWND, LINE, case.base_rtt,
                                                       cnp_rtts, timer_rtts)))
                for qpn, peer in ((2 * k + 1, 2 * k + 2), (2 * k + 2, 2 * k + 1)))
        net = SimNet(a, b, seed=seed * 100 + k)
        net.paths[("a", 0)] = PathModel(latency=DATA_LATENCY, link=port)
        net.paths[("b", 0)] = PathModel(latency=ACK_LATENCY)
        a.post_write(0, memoryview(bytes(SIZE)), 0, None, 0.0, peer=1)
        senders.append(a)
        nets.append(net)
    now = 0.0
    until = 60 * case.ideal
    while not all(qp.events or qp.failed for qp in senders) and now <= until:
        for net in nets:
            net.step(now)
        times = [t for t in (net.next_time() for net in nets) if t is not None]
        if not times:
            break
        now = max(now, min(times))
    ends = [e.stats.end for qp in senders for e in qp.events if isinstance(e, WriteDone)]
    failed = len(ends) < len(senders)
    end = now if failed else max(ends)
    return Result(end, 0.0 if failed else case.ideal / end,
                  sum(qp.counters.timeouts for qp in senders),
                  sum(qp.cc.cnps for qp in senders if isinstance(qp.cc, DcqcnCC)),
                  sum(qp.cc.decreases for qp in senders), failed)


def marks(key: tuple[float, float], best: tuple[float, float] | None) -> str:
    return ("*" if key == (DEFAULT_CNP, DEFAULT_TIMER) else " ") + ("<" if key == best else " ")


def cell(r: Result) -> str:
    return "  fail" if r.failed else f"{r.share:>6.0%}"


def row(key: tuple[float, float], r: Result, best: tuple[float, float]) -> str:
    return (f" {marks(key, best)}{key[0]:>5g} {key[1]:>6g} {r.time:8.3f} {cell(r)} "
            f"{r.timeouts:8d} {r.cnps:6d} {r.cuts:6d}")


# ---- on the testbed -----------------------------------------------------------------------

Setting = tuple[float, float]  # (cnp_rtts, timer_rtts)
DEFAULT: Setting = (DEFAULT_CNP, DEFAULT_TIMER)
SCENARIOS = ("degrade", "incast-victim", "gray-loss")
GRID: tuple[Setting, ...] = (DEFAULT, (0.5, 2.0), (1.0, 1.0), (2.0, 2.0), (10.0, 10.0),
                             (20.0, 20.0))
ROCE_VARIANTS = ("rocev2", "rocev2-lossless")
Row = dict[str, Any]  # one run's measures (bench/faults.py measure, with timeouts and CNPs)
Runs = dict[tuple[Setting, str, int], Row]  # by setting, variant and seed


def parse_grid(text: str) -> list[Setting]:
    """`5:5.5,1:1` as [(5.0, 5.5), (1.0, 1.0)]: distinct CNP:TIMER pairs of base RTTs within
    the scenario's bounds, the default first where it was not given (the tables compare with
    it)."""
    grid: list[Setting] = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        try:
            cnp, timer = (float(v) for v in item.split(":"))
        except ValueError:
            raise ValueError(f"grid {text!r}: {item!r} is not CNP:TIMER, e.g. 5:5.5") from None
        for v in (cnp, timer):
            if not limits.MIN_DCQCN_RTTS <= v <= limits.MAX_DCQCN_RTTS:
                raise ValueError(f"grid {text!r}: {v:g} RTTs is outside the scenario's "
                                 f"{limits.MIN_DCQCN_RTTS:g}..{limits.MAX_DCQCN_RTTS:g}")
        if (cnp, timer) in grid:
            raise ValueError(f"grid {text!r}: {item} is given twice")
        grid.append((cnp, timer))
    if not grid:
        raise ValueError(f"grid {text!r}: give CNP:TIMER pairs, e.g. 5:5.5,1:1")
    return grid if DEFAULT in grid else [DEFAULT, *grid]


def parse_roce_variants(text: str) -> list[str]:
    """The RoCEv2 variants of bench/fair.py named in `text` (MRC runs no DCQCN)."""
    variants = parse_variants(text)
    if any(v not in ROCE_VARIANTS for v in variants):
        raise ValueError(f"variants {text!r}: DCQCN is RoCEv2's; choose from "
                         f"{', '.join(ROCE_VARIANTS)}")
    return variants


def ratios(setting: Setting) -> dict[str, float]:
    """A setting as the scenario's `dcqcn` section."""
    return {"cnp_rtts": setting[0], "timer_rtts": setting[1]}


def setting_text(setting: Setting) -> str:
    return f"{setting[0]:g}/{setting[1]:g}"


def measure(run_dir: Path, setting: Setting) -> Row:
    """bench/faults.py's row of one run, with its QPs' timeouts and CNPs; RunError for a run
    that did not complete or did not run `setting`."""
    row = faults.measure(run_dir)
    run = load_run(run_dir)
    ran = run.meta.dcqcn
    if ran != ratios(setting):
        raise RunError(f"the run's meta says it ran DCQCN {ran}, not {ratios(setting)}")
    qps = run.tables["qps"]
    return row | {"timeouts": int(qps["timeouts"].sum()),
                  "cnps": int(qps["cnps"].fillna(0).sum())}


@dataclass(frozen=True)
class Summary:
    """One setting of one variant on one scenario, over its seeds."""

    setting: Setting
    variant: str
    share: Spread
    p99: Spread
    timeouts: Spread
    cnps: Spread
    complete: bool  # every seed's run made a result


def summarize(runs: Runs, grid: list[Setting],
              variants: list[str], seeds: list[int]) -> list[Summary]:
    """Per variant and setting, the spreads over the seeds' faithful runs (`runs`: the rows
    `measure` made, by setting, variant and seed; a run that made no result is absent)."""
    out = []
    for v in variants:
        for setting in grid:
            mine = [runs[(setting, v, s)] for s in seeds if (setting, v, s) in runs]
            keep = [counted([m["fidelity"]]) for m in mine]
            share, p99, timeouts, cnps = (spread([m[k] for m in mine], keep)
                                          for k in ("share", "p99", "timeouts", "cnps"))
            out.append(Summary(setting, v, share, p99, timeouts, cnps,
                               complete=len(mine) == len(seeds)))
    return out


def best(summaries: list[Summary], variant: str) -> Setting | None:
    """The setting with the highest median share of `variant`, among those whose every run
    made a result (a setting whose QPs ran out of retries is not a candidate, whatever its
    other runs gave); the first in the grid on a tie."""
    medians = [(s.share.median, s.setting) for s in summaries
               if s.variant == variant and s.complete and s.share.median is not None]
    return max(medians, key=lambda x: x[0])[1] if medians else None


def base_rtt_of(file: Path) -> float | None:
    """The scenario's base RTT (testbed/run/traffic.py), None where a link's rate is `auto`
    (this machine chooses it when the run starts)."""
    scenario = load_scenario(file)[0]
    return None if scenario.auto_links() else base_rtt(scenario)


def sweep_report(results: dict[str, Runs], rtts: dict[str, float | None],
                 grid: list[Setting], variants: list[str], seeds: list[int],
                 missing: list[list[object]]) -> str:
    """Every run, the runs that made no result, then per scenario one row per variant and
    setting."""
    per_run = [[name, v, setting_text(st), seed, f"{m['share']:.0%}",
                f"{m['p50']:.0f}/{m['p99']:.0f}", m["timeouts"], m["cnps"], m["verified"],
                m["fidelity"] + ("" if counted([m["fidelity"]]) else " **excluded**")]
               for name, runs in results.items() for (st, v, seed), m in runs.items()]
    out = table(["scenario", "variant", "CNP/timer (RTTs)", "seed", "share of ideal",
                 "CCT p50/p99 (ms)", "timeouts", "CNPs", "verified", "fidelity"], per_run)
    if missing:
        out += "\nruns that made no result:\n\n" + table(
            ["scenario", "variant", "CNP/timer (RTTs)", "seed", "why"], missing)
    for name, runs in results.items():
        summaries = summarize(runs, grid, variants, seeds)
        tops = {v: best(summaries, v) for v in variants}
        rows = [[s.variant, f"{setting_text(s.setting)} "
                 f"{marks(s.setting, tops[s.variant]).strip()}".rstrip(),
                 f"{s.share.n} of {len(seeds)}", s.share.text("{:.0%}"),
                 s.p99.text("{:.0f}"), s.timeouts.text("{:.0f}"), s.cnps.text("{:.0f}")]
                for s in summaries]
        rtt = rtts[name]
        out += (f"\n### {name}: " + ("base RTT set by `rate: auto`" if rtt is None else
                f"base RTT {rtt * 1e3:.2f} ms (the default spaces CNPs by "
                f"{DEFAULT_CNP * rtt * 1e3:.1f} ms)") + "\n\n")
        out += table(["variant", "CNP/timer (RTTs)", "runs counted", "share of ideal",
                      "CCT p99 (ms)", "timeouts", "CNPs"], rows)
    out += ("\nmin/median/max over the runs judged `faithful` (README, Fidelity); runs counted "
            "of the seeds.\nCNP/timer: dcqcn.cnp_rtts / dcqcn.timer_rtts, in the scenario's "
            "base RTTs (hostagent/protocol/dcqcn.py).\n`*` the default (dcqcn.CONSTANTS), `<` "
            "the best median share of the settings whose every run made a\nresult. share of "
            "ideal: busbw over the variant's ideal (bench/faults.py); timeouts and CNPs: over\n"
            "every QP of a run (CNPs as the senders received them).\n")
    return out


def sweep_testbed(files: list[Path], grid: list[Setting], variants: list[str],
                  seeds: list[int], out: Path) -> int:
    top = header("bench/dcqcn.py --testbed", sys.orig_argv)
    print(f"results: {out}", file=sys.stderr, flush=True)
    results: dict[str, Runs] = {}
    rtts = {file.stem: base_rtt_of(file) for file in files}  # a bad file fails before any run
    missing: list[list[object]] = []
    for file in files:
        runs = results.setdefault(file.stem, {})
        for seed in seeds:  # every setting and variant side by side on each seed
            for setting in grid:
                for v in variants:
                    label = f"-cnp{setting[0]:g}-timer{setting[1]:g}"
                    d, err = run_variant(file.resolve(), v, seed, out / file.stem,
                                         overrides={"dcqcn": ratios(setting)}, label=label)
                    what = f"{file.stem} {v} {setting_text(setting)} s{seed}"
                    try:
                        if d is not None:
                            m = runs[(setting, v, seed)] = measure(d, setting)
                            print(f"{what}: {m['share']:.0%} of ideal, {m['fidelity']}",
                                  file=sys.stderr, flush=True)
                            continue
                    except RunError as exc:
                        err = str(exc)
                    missing.append([file.stem, v, setting_text(setting), seed, why(err)])
                    print(f"{what}: no result ({why(err)})", file=sys.stderr, flush=True)
    grid_text = ", ".join(setting_text(s) for s in grid)
    print(top + f"- results: {out}\n- seeds: {', '.join(map(str, seeds))}\n"
          f"- grid (CNP/timer, base RTTs): {grid_text}\n")
    print(sweep_report(results, rtts, grid, variants, seeds, missing), end="")
    return 0


def sweep_simnet(full: bool) -> None:
    columns = "    cnp  timer   time s  share timeouts   cnps   cuts"
    print(f"base RTT {CASES[0].base_rtt * 1e3:.2f} ms (bottleneck) / "
          f"{CASES[1].base_rtt * 1e3:.2f} ms; ratios in base RTTs; share = ideal / time")
    for case in CASES:
        results = {(c, t): run(case, c, t) for c in RATIOS for t in TIMERS}
        top = max(results, key=lambda k: results[k].share)
        print(f"\n{case.name}: {case.senders} QP(s) into a port at {case.port_share:g} x "
              f"{LINE / 1e6:g} Mbit/s, ideal {case.ideal:.3f} s")
        print("  share of ideal: rows CNP spacing, columns timer")
        print("  cnp\\timer" + "".join(f"{t:>6g}  " for t in TIMERS))
        for c in RATIOS:
            print(f"  {c:>9g}" + "".join(cell(results[(c, t)]) + marks((c, t), top)
                                         for t in TIMERS))
        print(columns)
        keys = list(results) if full else sorted({(DEFAULT_CNP, DEFAULT_TIMER), top})
        for key in keys:
            print(row(key, results[key], top))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="simnet: print every setting's row")
    parser.add_argument("--testbed", action="store_true",
                        help="sweep on the testbed's fault scenarios (as root)")
    parser.add_argument("scenarios", nargs="*", metavar="SCENARIO.yaml",
                        help=f"--testbed: the scenarios (default: {', '.join(SCENARIOS)})")
    parser.add_argument("--grid", default=",".join(f"{c:g}:{t:g}" for c, t in GRID),
                        help="--testbed: CNP:TIMER settings in base RTTs")
    parser.add_argument("--seeds", default="1,2,3", help="--testbed: every setting runs each")
    parser.add_argument("--variants", default="rocev2",
                        help=f"--testbed: of {', '.join(ROCE_VARIANTS)}")
    parser.add_argument("--results", type=Path, help="--testbed: where the run folders go "
                        "(default: results/dcqcn-<utc>)")
    args = parser.parse_args()
    if not args.testbed:
        if args.scenarios:
            parser.error("scenarios are for --testbed")
        sweep_simnet(args.full)
        return 0
    try:
        grid, seeds = parse_grid(args.grid), parse_seeds(args.seeds)
        variants = parse_roce_variants(args.variants)
    except ValueError as exc:
        parser.error(str(exc))
    files = ([Path(f) for f in args.scenarios] or
             [ROOT / "scenarios" / f"{n}.yaml" for n in SCENARIOS])
    out = args.results or results_folder("dcqcn")
    return sweep_testbed(files, grid, variants, seeds, out)


if __name__ == "__main__":
    sys.exit(main())
