#!/usr/bin/env python3
"""Every fault scenario, each variant (MRC, RoCEv2 lossy, RoCEv2 lossless: bench/fair.py) on
the same seeds: busbw as a share of each variant's ideal (planes it may use x host link rate),
min / median / max over the runs judged `faithful`, the busbw ratio of MRC to each RoCEv2
variant seed by seed, the CCT tail, retransmissions and in-fabric trims.

    sudo .venv/bin/python -m bench.faults [--seeds 1,2,3]
        [--variants mrc,rocev2,rocev2-lossless] [--against CHECKOUT] [--results DIR]
        [SCENARIO.yaml ...]

`--against CHECKOUT` measures another checkout of the project (another commit, with its own
`make install`) beside this one: each variant and seed runs there first, then here, so a change
is an A/B of one sitting; its rows are named `VARIANT@COMMIT`.

Without scenarios it runs the quickstart-sized fault scenarios shipped in scenarios/ (those that
need netem are skipped, with the reason, where the kernel lacks it). Progress goes to stderr;
stdout is a report to paste (command and commit, every run with its verdict, the spreads).
Every run folder is kept under results/faults-<utc>/ (or DIR) for a closer look.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from analysis.load import RunError, load_run
from analysis.metrics import cct, collision_bound, host_leaves, nccl_rows, percentiles
from bench import fair
from bench.common import ROOT

DEFAULT = ["quickstart", "loss-0", "loss-0.1pct", "loss-1pct", "gray-loss", "link-down",
           "host-flap", "degrade", "t1-blackhole-reboot", "leaf-down", "plane-down", "delay",
           "incast-victim"]


def measure(run_dir: Path) -> dict:
    """One run's row; RunError (the report's "no result", with why) for a run that did not
    complete, e.g. a QP that used up its retries: its collective stopped, it has no share."""
    run = load_run(run_dir)
    if run.meta.status != "complete":
        why = (run.meta.gave_up[0].line() if run.meta.gave_up
               else str(run.meta.error or "").split("\n")[0])
        raise RunError(f"the run {run.meta.status}: {why}")
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
    hosts = run.tables["iterations"].groupby("rank")["host"].first().to_dict()
    bound = collision_bound(run.tables.get("paths", pd.DataFrame()), host_leaves(links), hosts)
    return {"busbw": row.busbw, "share": row.busbw / ideal, "p50": p50.value, "p99": p99.value,
            "bound": bound,
            "n": len(timed),
            "retx": int(qps["retransmits"].sum()), "trims": trims,
            "verified": bool(timed["verified"].all()),
            "fidelity": run.meta.verdict or "-"}


def paired(rows: dict[tuple[str, int], dict], variant: str, seeds: list[int]) -> list[float | None]:
    """MRC's busbw over `variant`'s, seed by seed, both on the same checkout; None where a run
    of the pair is missing or not faithful."""
    mrc = "mrc" + variant[variant.find("@"):] if "@" in variant else "mrc"
    out: list[float | None] = []
    for seed in seeds:
        a, b = rows.get((mrc, seed)), rows.get((variant, seed))
        out.append(a["busbw"] / b["busbw"] if a and b and b["busbw"]
                   and fair.counted([a["fidelity"], b["fidelity"]]) else None)
    return out


def _bound(m: dict) -> str:
    bound = m.get("bound")
    return "-" if bound is None else f"{bound:.0%} ({m['share'] / bound:.0%})"


def report(results: dict[str, dict[tuple[str, int], dict]], variants: list[str],
           seeds: list[int], missing: list[list] | None = None) -> str:
    """Every run, the runs that made no result (`missing`: scenario, variant, seed, why), then
    per scenario and variant the spread over the faithful runs."""
    per_run = [[name, v, seed, f"{m['share']:.0%}", _bound(m),
                f"{m['p50']:.0f}/{m['p99']:.0f}", m["n"],
                m["retx"], m["trims"], m["verified"],
                m["fidelity"] + ("" if fair.counted([m["fidelity"]]) else " **excluded**")]
               for name, runs in results.items() for (v, seed), m in runs.items()]
    out = fair.table(["scenario", "variant", "seed", "share of ideal",
                      "ECMP bound (share of it)", "CCT p50/p99 (ms)", "n",
                      "retx", "trims", "verified", "fidelity"], per_run)
    if missing:
        out += "\nruns that made no result:\n\n" + fair.table(
            ["scenario", "variant", "seed", "why"], missing)
    summary = []
    for name, runs in results.items():
        for v in variants:
            mine = [runs[(v, s)] for s in seeds if (v, s) in runs]
            keep = [fair.counted([m["fidelity"]]) for m in mine]
            share = fair.spread([m["share"] for m in mine], keep)
            p99 = fair.spread([m["p99"] for m in mine], keep)
            vs = (fair.spread(paired(runs, v, seeds), [True] * len(seeds))
                  if not v.startswith("mrc") and "mrc" in variants else None)
            summary.append([name, v, f"{share.n} of {len(seeds)}", share.text("{:.0%}"),
                            p99.text("{:.0f}"), vs.text("{:.2f}x") if vs else "",
                            "" if share.n == len(seeds) else "**runs excluded or missing**"])
    out += "\nmin/median/max over the faithful runs (same seeds for every variant):\n\n"
    out += fair.table(["scenario", "variant", "runs counted", "share of ideal", "CCT p99 (ms)",
                       "busbw MRC / this (paired by seed)", ""], summary)
    out += ("\nshare of ideal: busbw as a share of the variant's own ideal (the planes it may "
            "use x the host\nlink rate). MRC / this: the ratio of the busbw themselves, seed by "
            "seed, over the seeds\nwhere both runs were faithful. CCT over the timed iterations "
            "(a p99 of so few samples is\nnear their maximum, not a measured tail). A run not "
            "judged `faithful` (README, Fidelity)\nmeasures the CPU as much as the network: "
            "listed, marked excluded, left out of the spreads.\nrocev2: lossy (Go-Back-N over "
            "a fabric that drops); rocev2-lossless: the same scenario with\n`switch: "
            "{lossless: true}`. ECMP bound: the share of the ideal the run's spread over "
            "spines allows\n(analysis.metrics.collision_bound: 1/k where k single-path QPs "
            "share a leaf-spine link),\nand the run's busbw as a share of it; - where no "
            "flow crossed a spine.\n")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenarios", nargs="*", metavar="SCENARIO.yaml",
                    help="default: the quickstart-sized fault scenarios in scenarios/")
    fair.add_options(ap, "faults")
    args = ap.parse_args()
    sit = fair.sitting(ap, args, "faults")
    seeds, out = sit.seeds, sit.out
    top = fair.header("bench/faults.py", sys.orig_argv)
    files = ([Path(f) for f in args.scenarios] or
             [ROOT / "scenarios" / f"{n}.yaml" for n in DEFAULT])
    print(f"results: {out}", file=sys.stderr, flush=True)
    results: dict[str, dict[tuple[str, int], dict]] = {}
    skipped = []
    missing: list[list] = []
    for file in files:
        runs: dict[tuple[str, int], dict] = {}
        reason = ""
        for seed in seeds:  # variants (and checkouts) side by side on each seed
            for v, checkout in sit.plan:
                k = fair.key(v, checkout)
                d, err = fair.run_variant(file.resolve(), v, seed, out / file.stem,
                                          checkout=checkout)
                try:
                    if d is not None:
                        runs[(k, seed)] = measure(d)
                        m = runs[(k, seed)]
                        print(f"{file.stem} {k} s{seed}: {m['share']:.0%} of ideal, "
                              f"{m['fidelity']}", file=sys.stderr, flush=True)
                        continue
                except RunError as exc:
                    err = str(exc)
                reason = fair.why(err)
                missing.append([file.stem, k, seed, reason])
                print(f"{file.stem} {k} s{seed}: no result ({reason})", file=sys.stderr,
                      flush=True)
            if not runs:  # the first seed made nothing (netem missing, ...): skip the rest
                break
        if runs:
            results[file.stem] = runs
        else:
            missing = [row for row in missing if row[0] != file.stem]
            skipped.append(f"- {file.stem}: skipped: {reason}")
    print(top + sit.lines())
    print(report(results, sit.keys, seeds, missing), end="")
    if skipped:
        print("\n" + "\n".join(skipped))
    return 0


if __name__ == "__main__":
    sys.exit(main())
