#!/usr/bin/env python3
"""The MRC paper's incast with TCP senders and with RDMA senders, side by side: the victim's
throughput while 7 hosts write to one receiver, for both transports on the same seeds.

    sudo .venv/bin/python -m bench.incast [--tcp scenarios/paper/incast-victim-apart.yaml]
        [--rdma scenarios/paper/incast-rdma-apart.yaml] [--seeds 1,2,3]
        [--variants mrc,rocev2] [--results DIR] [--again DIR]

Both scenarios have the same fabric (16 hosts, 2 planes of 4 leaves x 4 spines), the same
victim (a 2-rank all-gather between h1, on the receiver's leaf, and h4) and the same senders
and receiver (h5 h6 h8 h9 h12 h13 h14 to h0). `--tcp`'s senders are iperf3 TCP flows in plane
0 (`background:`), from 1 s for 4 s; `--rdma`'s are a job of the agents writing 256 KiB messages
over the run's transport (`workload.flows`), from 1 s until its 24.5 MiB are through.

The victim's measure, the same for both: busbw during the incast over busbw before it (the
victim's own iterations before the incast are its control, as bench/paper.py takes them for the
paper's incasts): the mean collective completion time of its iterations that ended before the
incast began, over that of those wholly inside the incast's span (TCP: the span its flows ran,
meta.json; RDMA: the first write's start to the last one's end, steps.parquet). The paper:
MRC's victim is not affected, RoCEv2's with DCQCN loses about 25%. For the RDMA incast the
run also measures the victim against itself alone (its solo control; the job's slowdown).
A run counts when it (and the RDMA run's solo control) was `faithful` and the victim verified
every byte. Results go to results/incast-<utc>/, every number to incast.json.
"""
from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from analysis.metrics import cct
from bench import fair
from bench.common import ROOT, say
from runcontract.meta import MetaError, RunMeta, read_meta

KINDS = ("tcp", "rdma")


@dataclass(frozen=True)
class Victim:
    """One run's victim: its busbw during the incast over before it, and what it rests on."""

    kind: str
    variant: str
    seed: int
    ratio: float | None  # busbw during / before
    before_ms: float | None
    during_ms: float | None
    n_before: int
    n_during: int
    slowdown: float | None  # RDMA: the victim's mean iteration beside the incast over alone
    counted: bool
    note: str


def window_ratio(iterations: pd.DataFrame, t0: float, start: float,
                 end: float) -> tuple[float | None, float | None, float | None, int, int]:
    """(during/before busbw, before CCT s, during CCT s, n before, n during) of the victim's
    timed iterations every rank completed; `start`, `end`: the incast's span, s after t0."""
    it = cct(iterations, t0)
    it = it[~it["warmup"].astype(bool) & (it["ranks"] == it["ranks"].max())]
    before = it[it["end"] <= start]["cct"]
    during = it[(it["start"] >= start) & (it["end"] <= end)]["cct"]
    if before.empty or during.empty:
        return None, None, None, len(before), len(during)
    b, d = float(before.mean()), float(during.mean())
    return b / d, b, d, len(before), len(during)


def incast_span(run: Path, meta: RunMeta, kind: str) -> tuple[float, float] | None:
    """When the incast ran, s after the workload's start: the TCP flows' span, or the RDMA
    writes' first start to last end."""
    if kind == "tcp":
        windows = [] if meta.facts is None else [w for w in meta.facts.background
                                                  if w.pattern == "incast"]
        return (windows[0].start, windows[0].end) if windows else None
    steps = pd.read_parquet(run / "jobs" / "incast" / "steps.parquet")
    sends = steps[steps["kind"] == "send"]
    if sends.empty or meta.workload_start is None:
        return None
    return (float(sends["start"].min()) - meta.workload_start,
            float(sends["end"].max()) - meta.workload_start)


def measure(kind: str, variant: str, seed: int, run: Path | None, err: str) -> Victim:
    def none(note: str) -> Victim:
        return Victim(kind, variant, seed, None, None, None, 0, 0, None, False, note)
    if run is None:
        return none(fair.why(err))
    try:
        meta = read_meta(run)
    except MetaError as exc:
        return none(str(exc))
    victim = run / "jobs" / "victim" if kind == "rdma" else run
    span = incast_span(run, meta, kind)
    path = victim / "iterations.parquet"
    if span is None or not path.exists():
        return none(f"{meta.status}: no incast span or no victim iterations")
    iterations = pd.read_parquet(path)
    assert meta.workload_start is not None
    ratio, b, d, nb, nd = window_ratio(iterations, meta.workload_start, *span)
    job = next((j for j in meta.jobs if j.name == "victim"), None)
    verdicts = [meta.verdict] + ([job.solo_verdict] if job is not None else [])
    verified = bool(iterations["verified"].all()) and bool(iterations["start"].notna().all())
    ok = fair.counted([str(v) for v in verdicts]) and verified and ratio is not None
    note = "" if ok else f"verdicts {verdicts}, victim verified {verified}"
    return Victim(kind, variant, seed, ratio, b and b * 1e3, d and d * 1e3, nb, nd,
                  None if job is None else job.slowdown, ok, note)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tcp", type=Path,
                    default=ROOT / "scenarios" / "paper" / "incast-victim-apart.yaml",
                    help="the incast with iperf3 TCP senders (background:)")
    ap.add_argument("--rdma", type=Path,
                    default=ROOT / "scenarios" / "paper" / "incast-rdma-apart.yaml",
                    help="the incast with RDMA senders (a job of flows beside a job 'victim')")
    fair.add_again_options(ap, seeds="1,2,3", variants="mrc,rocev2")
    args = ap.parse_args()
    seeds, variants, out = fair.again_sitting(ap, args, "incast")
    for file in (args.tcp, args.rdma):
        if not file.is_file():
            ap.error(f"{file}: no such scenario file")
    files = {"tcp": args.tcp, "rdma": args.rdma}
    rows: list[Victim] = []
    total, done = len(seeds) * len(variants) * len(KINDS), 0
    for seed in seeds:
        for variant in variants:
            for kind in KINDS:
                done += 1
                run, err = fair.run_or_earlier(files[kind], variant, seed, out,
                                               args.again is not None,
                                               timeout=fair.RUN_TIMEOUT * 3)
                v = measure(kind, variant, seed, run, err)
                rows.append(v)
                say(f"[{done}/{total}] seed {seed} {variant} {kind}: "
                    + (f"victim {v.ratio:.2f} of its busbw before" if v.ratio else "-")
                    + (f" ({v.note})" if v.note else ""))
    print(fair.header("The incast's victim: TCP senders against RDMA senders",
                      ["bench.incast", *_argv(args)]))
    print(f"- results: {out}\n- seeds: {', '.join(map(str, seeds))}")
    print("- victim: busbw during the incast over before it, min/median/max over counted runs; "
          "RDMA also the victim's mean iteration beside the incast over alone\n")
    table = []
    for variant in variants:
        for kind in KINDS:
            mine = [r for r in rows if (r.variant, r.kind) == (variant, kind)]
            keep = [r.counted for r in mine]
            s = fair.spread([r.ratio for r in mine], keep)
            alone = fair.spread([r.slowdown for r in mine], keep)
            table.append([variant, kind, f"{s.text()} (n={s.n}/{s.runs})",
                          alone.text("{:.3f}") if kind == "rdma" else "",
                          "; ".join(f"s{r.seed}: {r.before_ms:.0f}/{r.during_ms:.0f} ms "
                                    f"(n={r.n_before}/{r.n_during})" if r.ratio else
                                    f"s{r.seed}: {r.note}" for r in mine)])
    print(fair.table(["variant", "incast", "victim during/before", "slowdown vs alone",
                      "CCT before/during"], table))
    print("The paper (its 64-GPU testbed): MRC's victim not affected; RoCEv2 with DCQCN about "
          "-25%.")
    out.mkdir(parents=True, exist_ok=True)
    (out / "incast.json").write_text(json.dumps([asdict(r) for r in rows], indent=1))
    return 0


def _argv(args: argparse.Namespace) -> list[str]:
    def rel(p: Path) -> Path:
        return p.relative_to(ROOT) if p.is_relative_to(ROOT) else p
    again = [f"--again {args.again}"] if args.again else []
    return [f"--tcp {rel(args.tcp)}", f"--rdma {rel(args.rdma)}", f"--seeds {args.seeds}",
            f"--variants {args.variants}", *again]


if __name__ == "__main__":
    raise SystemExit(main())
