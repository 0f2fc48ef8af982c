#!/usr/bin/env python3
"""Time-dilation invariance: one real fabric emulated at D and at k x D, compared in its frame.

    sudo .venv/bin/python -m bench.similarity [--factors 1,2] [--seeds 1,2,3]
        [--variants mrc,rocev2] [--results DIR] [CONDITION ...]

The scenarios of scenarios/similarity/ state a 100 Gbit/s fabric with 1 us hops in the real
frame, emulated at 25 Mbit/s (D = 4,000). Factor k runs the same files with every emulated
link k times slower (D x k): a similar emulation gives the same real-frame times at every k,
since every size stays in bytes and every stated time is scaled by D. Conditions: `healthy`,
`loss-1pct` (1% random loss on every leaf-spine link) and `link-down` (one link down for
300 us); each faulted run is also a ratio to the healthy run of its factor, variant and seed.

It prints (stdout, to paste) per condition and variant, for each factor, min / median / max
over the seeds of the mean CCT in the real frame and of the ratio to the control, and whether
factor k agrees with factor 1: the medians differ by no more than the larger of the two
seeds' ranges (max - min) or 2%. A run counts only when it (and its control) was judged
`faithful`. Below the table, the departures the runs' `similarity` records list whose value
changes with the factor (where invariance is expected to break), and each factor's median CPU
share (where the machine breaks it). Run folders go to results/similarity-<utc>/.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from analysis.metrics import failed_qps
from bench import fair
from bench.common import ROOT, loaded, say, timed_iterations
from testbed.scenario.units import parse_rate

FOLDER = ROOT / "scenarios" / "similarity"
CONDITIONS = {"healthy": "control", "loss-1pct": "loss-1pct", "link-down": "link-down"}
CONTROL = "healthy"
RELATIVE_FLOOR = 0.02  # medians this close agree however narrow the seeds' ranges


def parse_factors(text: str) -> list[int]:
    """`1,2,4`: whole factors from 1 up, in order, without repeats; 1 must be among them."""
    try:
        factors = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--factors {text!r}: whole numbers separated by commas") from None
    if 1 not in factors or any(k < 1 for k in factors) or len(set(factors)) != len(factors):
        raise ValueError(f"--factors {text!r}: distinct whole numbers >= 1, including 1 (the "
                         f"base every other factor is compared with)")
    return sorted(factors)


def slowed(file: Path, factor: int) -> dict[str, object]:
    """The overrides that run `file` with every emulated link `factor` times slower (the time
    dilation `factor` times larger); nothing for factor 1."""
    if factor == 1:
        return {}
    fabric = yaml.safe_load(file.read_text())["fabric"]
    return {"fabric": {kind: {"rate": parse_rate(fabric[kind]["rate"]) // factor}
                       for kind in ("host_link", "fabric_link")}}


@dataclass(frozen=True)
class Agreement:
    """Factor k against factor 1 on one quantity: the ratio of their medians and whether they
    agree within the seeds' spread."""

    ratio: float | None
    agrees: bool | None  # None: a side had no counted run

    def text(self) -> str:
        if self.ratio is None or self.agrees is None:
            return "-"
        return f"{self.ratio:.3f} {'agrees' if self.agrees else '**DIFFERS**'}"


def agreement(base: fair.Spread, other: fair.Spread) -> Agreement:
    """Agree when the medians differ by at most the larger seeds' range (max - min) of the two,
    or by RELATIVE_FLOOR of the base's median."""
    if base.median is None or other.median is None:
        return Agreement(None, None)
    ranges = [s.high - s.low for s in (base, other) if s.high is not None and s.low is not None]
    allowed = max([*ranges, RELATIVE_FLOOR * abs(base.median)])
    ratio = other.median / base.median if base.median else None
    return Agreement(ratio, abs(other.median - base.median) <= allowed)


def measure(run_dir: Path) -> dict | None:
    """One run's numbers in the real frame; None (said why) for a run that did not complete."""
    r = loaded(run_dir)
    if r is None:
        return None
    sim = r.meta.similarity
    dilation = sim.dilation if sim is not None else (r.facts.dilation() or 1.0)
    timed = timed_iterations(r)
    cpu = (r.meta.fidelity.part("cpu") if r.meta.fidelity else {}).get("run_total")
    return {"dir": str(run_dir), "dilation": dilation, "iterations": len(timed),
            "verified": bool(timed["verified"].all()),
            "cct_real": float(timed["cct"].mean()) / dilation,
            "failed_qps": failed_qps(r.tables["qps"]), "fidelity": r.meta.verdict or "-",
            "cpu": cpu, "departures": [d.model_dump() for d in sim.departures] if sim else []}


def changing(departures: dict[int, list[dict]]) -> list[str]:
    """The departures whose value in the real frame differs between factors: what the
    emulation does not scale, and so where its results may move with D."""
    by_quantity: dict[str, dict[int, str]] = {}
    for factor, records in departures.items():
        for d in records:
            by_quantity.setdefault(d["quantity"], {})[factor] = d["used"]
    return [f"{q}: " + ", ".join(f"x{k} {v}" for k, v in sorted(values.items()))
            for q, values in by_quantity.items() if len(set(values.values())) > 1]


def report(rows: list[dict], conditions: list[str], variants: list[str],
           factors: list[int]) -> str:
    """The invariance table, then what changes with the factor."""
    lines = []
    for name in conditions:
        for variant in variants:
            spreads: dict[int, tuple[fair.Spread, fair.Spread]] = {}
            for k in factors:
                mine = [m for m in rows if (m["condition"], m["variant"], m["factor"])
                        == (name, variant, k)]
                keep = [fair.counted(m["verdicts"]) and not m["failed_qps"] for m in mine]
                spreads[k] = (fair.spread([m["cct_real"] * 1e6 for m in mine], keep),
                              fair.spread([m.get("ratio") for m in mine], keep))
            for k in factors:
                cct_s, ratio_s = spreads[k]
                d = next((m["dilation"] for m in rows if (m["condition"], m["factor"])
                          == (name, k)), None)
                lines.append([name, variant, f"x{k}", f"{d:,.0f}" if d else "-",
                              f"{cct_s.n} of {cct_s.runs}", cct_s.text("{:.1f}"),
                              ratio_s.text() if name != CONTROL else "",
                              "" if k == 1 else agreement(spreads[1][0], cct_s).text(),
                              "" if k == 1 or name == CONTROL
                              else agreement(spreads[1][1], ratio_s).text()])
    out = fair.table(["condition", "variant", "factor", "D", "runs counted",
                      "CCT us (real) min/med/max", "ratio to control", "CCT vs x1",
                      "ratio vs x1"], lines)
    out += ("\nCCT: the mean collective completion time of the timed iterations, emulated "
            "seconds / D. ratio to control: the healthy run's CCT over this one's (same "
            "factor, variant, seed). vs x1: the median over factor 1's, and whether they "
            "agree (the medians differ by at most the larger seeds' range, or "
            f"{RELATIVE_FLOOR:.0%}). A run counts when it and its control were faithful and "
            "no QP gave up.\n")
    for name in conditions:
        by_factor = {k: next((m["departures"] for m in rows
                              if (m["condition"], m["factor"]) == (name, k)), [])
                     for k in factors}
        moving = changing(by_factor)
        out += (f"\n{name}: departures that change with D: "
                + ("; ".join(moving) if moving else "none") + "\n")
    cpu = []
    for k in factors:
        shares = [m["cpu"] for m in rows if m["factor"] == k and m["cpu"] is not None]
        cpu.append(f"x{k} {statistics.median(shares):.0%}" if shares else f"x{k} -")
    out += "\nrun CPU (agents + runner + softirq, median share of all cores): " + ", ".join(
        cpu) + "\n"
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("conditions", nargs="*", help=f"default: {', '.join(CONDITIONS)}")
    ap.add_argument("--factors", default="1,2", help="slow-downs of the emulated links")
    fair.add_options(ap, "similarity")
    ap.set_defaults(variants="mrc,rocev2")
    args = ap.parse_args()
    conditions = args.conditions or list(CONDITIONS)
    unknown = [c for c in conditions if c not in CONDITIONS]
    if unknown:
        ap.error(f"{', '.join(unknown)}: not a condition ({', '.join(CONDITIONS)})")
    try:
        factors = parse_factors(args.factors)
    except ValueError as exc:
        ap.error(str(exc))
    if args.against is not None:
        ap.error("--against: this bench compares factors on one checkout")
    sit = fair.sitting(ap, args, "similarity")
    top = fair.header("bench/similarity.py", sys.orig_argv)
    sit.out.mkdir(parents=True, exist_ok=True)
    say(f"results: {sit.out}")
    order = [CONTROL] + [c for c in conditions if c != CONTROL]  # controls first
    controls: dict[tuple[str, int, int], dict] = {}
    rows: list[dict] = []
    for name in order:
        file = FOLDER / f"{CONDITIONS[name]}.yaml"
        for seed in sit.seeds:
            for k in factors:
                for variant, checkout in sit.plan:
                    d, err = fair.run_variant(file, variant, seed, sit.out, checkout=checkout,
                                              overrides=slowed(file, k), label=f"-x{k}")
                    m = measure(d) if d is not None else None
                    if m is None:
                        say(f"  {name} {variant} x{k} s{seed}: no run ({fair.why(err)})")
                        continue
                    if name == CONTROL:
                        controls[(variant, k, seed)] = m
                    base = controls.get((variant, k, seed))
                    m |= {"condition": name, "variant": variant, "factor": k, "seed": seed,
                          "ratio": (base["cct_real"] / m["cct_real"]
                                    if base and m["cct_real"] else None),
                          "verdicts": [m["fidelity"]] + ([] if name == CONTROL else
                                                         [(base or {}).get("fidelity", "no run")])}
                    rows.append(m)
                    say(f"{name} {variant} x{k} s{seed}: CCT {m['cct_real'] * 1e6:.1f} us "
                        f"real, fidelity {m['fidelity']}")
                    (sit.out / "similarity.json").write_text(json.dumps(rows, indent=1))
    if CONTROL not in conditions:
        rows = [m for m in rows if m["condition"] != CONTROL]
    print(top + sit.lines() + f"- factors: {', '.join(f'x{k}' for k in factors)}\n")
    print(report(rows, [c for c in order if c in conditions], sit.keys, factors), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
