#!/usr/bin/env python3
"""The MRC paper's fault experiments, each run next to a healthy control on the same fabric in
the same sitting, for every variant (MRC, RoCEv2 lossy, RoCEv2 lossless:
bench/fair.py) on the same seeds. Which spine each RoCEv2 QP lands on depends on the hash of
its seeded source port; which EVs MRC keeps active is a seeded choice too: every variant gets
every seed.

    sudo .venv/bin/python -m bench.paper [--set paper|paper-real|validation|validation-real]
        [--seeds 1,2,3]
        [--variants mrc,rocev2,rocev2-lossless] [--against CHECKOUT] [--results DIR]
        [EXPERIMENT ...]

`--set paper` runs scenarios/paper/ (the fabrics the paper table was measured on);
`--set paper-real` the same experiments as real 100 Gbit/s fabrics with 1 us hops in their own
frame (scenarios/paper-real/);
`--set validation` runs scenarios/validation/, fabrics and settings no constant was tuned on,
each fault against the healthy control of its own fabric; `--set validation-real` the same as
real fabrics in their own frame (scenarios/validation-real/: 100-200 Gbit/s, 0.7-2 us hops,
other buffers than the paper set's). `--against CHECKOUT` runs another
checkout of the project (another commit with its own venv) beside this one, seed by seed, its
variants named `VARIANT@COMMIT`, each against a control run on its own code.

For every run it prints (to stderr, as it goes) the collective's busbw over the whole run and
over the iterations that overlap the fault window (or, for the flap, the iterations while the
ports are down and those after), each as a ratio to the control's busbw (the same scenario
without faults, same variant and seed), the QPs that failed, each run's fidelity verdict and
own CPU (agents + runner + softirq, share of all cores) beside its control's, and what the row
needs (EV condemnations of the lossy path; the incast victim's iteration time during the incast
against before it). At the end it prints (stdout) a report to paste: the command and commit,
every run with its verdicts, and per experiment and variant min / median / max of each ratio
over the runs whose fault and control runs were both `faithful`, with their number. Results
folders go to results/paper-<utc>/ and a JSON of every number to results/paper-<utc>/paper.json.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from analysis import metrics
from bench import fair
from bench.common import ROOT, loaded, say, timed_iterations
from testbed.fabric.frame import Frame
from testbed.scenario.schema import load as load_scenario

# the paper's experiments (the same file names in the small and the real-frame set), name:
# (fault scenario, control scenario or None: compare within the run, the iterations before
# the fault)
PAPER: dict[str, tuple[str, str | None]] = {
    "gray-loss": ("gray-loss", "control"),
    "loss-0.1pct": ("loss-0.1pct", "control"),
    "loss-1pct": ("loss-1pct", "control"),
    # the paper's own placement: every NIC drops what it receives, on every plane
    "loss-0.1pct-nic": ("loss-0.1pct-nic", "control"),
    "loss-1pct-nic": ("loss-1pct-nic", "control"),
    "host-flap": ("host-flap", "control-8plane"),
    "blackhole-reboot": ("blackhole-reboot", "control"),
    "incast-victim": ("incast-victim", None),
    "incast-victim-apart": ("incast-victim-apart", None),  # the victim sends no incast
    "degrade": ("degrade", "control"),
}
# per set: its folder and experiments
SETS: dict[str, tuple[Path, dict[str, tuple[str, str | None]]]] = {
    "paper": (ROOT / "scenarios" / "paper", PAPER),
    "paper-real": (ROOT / "scenarios" / "paper-real", PAPER | {
        # the NIC drops on 32 paths between leaves instead of 8: how many paths a QP has
        # decides what condemning every untrimmed loss costs it
        "loss-0.1pct-nic-wide": ("loss-0.1pct-nic-wide", "control-wide"),
        "loss-1pct-nic-wide": ("loss-1pct-nic-wide", "control-wide"),
    }),
    "validation": (ROOT / "scenarios" / "validation", {
        "3plane-gray-loss": ("3plane-gray-loss", "3plane-control"),
        "3plane-blackhole-reboot": ("3plane-blackhole-reboot", "3plane-control"),
        "3plane-host-flap": ("3plane-host-flap", "3plane-control"),
        "8spine-loss-1pct": ("8spine-loss-1pct", "8spine-control"),
        "8spine-degrade": ("8spine-degrade", "8spine-control"),
        "1plane-incast": ("1plane-incast", "1plane-control"),
    }),
}
# the validation set as real fabrics in their own frame (scenarios/validation-real/): other
# rates, hop and NIC latencies and buffers than the paper set's, the same experiments
SETS["validation-real"] = (ROOT / "scenarios" / "validation-real", SETS["validation"][1])


def windows(scenario) -> tuple[list[tuple[float, float]], float]:
    """The intervals (emulated s since the workload's start, as the run's tables count) in
    which a fault or background flow is active, and when the last one ends. Flaps: only their
    down halves."""
    frame = Frame.of(scenario)
    faults, background = frame.faults(scenario.faults), frame.background(scenario.background)
    spans = []
    for f in faults:
        if f.kind == "flap":
            for c in range(f.count or 1):
                start = f.at + c * f.period
                spans.append((start, start + f.period / 2))
        elif f.duration is not None:
            spans.append((f.at, f.at + f.duration))
        else:
            spans.append((f.at, float("inf")))
    for b in background:
        spans.append((b.at, b.at + b.duration))
    end = max((e for _, e in spans), default=0.0)
    if any(f.kind == "flap" for f in faults):
        end = max(f.at + (f.count or 1) * f.period for f in faults if f.kind == "flap")
    return spans, end


def measure(run_dir: Path) -> dict | None:
    """The numbers of one run; None (said why) for a run that did not complete."""
    r = loaded(run_dir)
    if r is None:
        return None
    scenario, _ = load_scenario(run_dir / "scenario.yaml")  # the scenario as it ran
    timed = timed_iterations(r)
    spans, end = windows(scenario)
    inside = timed[[any(row.start < e and row.end > s for s, e in spans)
                    for row in timed.itertuples()]] if spans else timed.iloc[0:0]
    after = timed[timed["start"] >= end] if spans else timed.iloc[0:0]
    before = timed[timed["end"] <= min((s for s, _ in spans), default=0.0)]
    qps = r.tables["qps"]
    out = {"dir": str(run_dir), "transport": r.transport, "seed": scenario.seed,
           "iterations": len(timed), "verified": bool(timed["verified"].all()),
           "cct": float(timed["cct"].mean()),
           "cct_window": float(inside["cct"].mean()) if len(inside) else None,
           "n_window": len(inside),
           "cct_after": float(after["cct"].mean()) if len(after) else None,
           "n_after": len(after),
           "cct_before": float(before["cct"].mean()) if len(before) else None,
           "n_before": len(before),
           "failed_qps": metrics.failed_qps(qps),
           "retransmits": int(qps["retransmits"].sum()), "timeouts": int(qps["timeouts"].sum()),
           "fidelity": r.meta.verdict or "-",
           "cpu": {k: (r.meta.fidelity.part("cpu") if r.meta.fidelity else {}).get(k)
                   for k in ("run_total", "run_agents", "run_runner", "softirq", "busy_mean")}}
    for col in ("tail_probes", "rack_losses", "stalls"):
        if col in qps:
            out[col] = int(qps[col].sum())
    paths = r.tables.get("paths")
    if r.transport == "mrc" and paths is not None and not paths.empty:
        out["condemned_all"] = int(paths["condemned"].sum()) if "condemned" in paths else 0
        out["congestion_losses_all"] = (int(paths["congestion_losses"].sum())
                                        if "congestion_losses" in paths else 0)
        out["random_losses_all"] = (int(paths["random_losses"].sum())
                                    if "random_losses" in paths else 0)
        lossy = [f for f in scenario.faults if f.kind == "loss" and f.duration]
        if lossy:
            t = lossy[0].target
            on = paths[(paths["plane"] == t.plane) & (paths["spine"] == t.spine)]
            per_leaf = scenario.fabric.hosts_per_leaf
            hosts = {f"h{i}" for i in range(t.leaf * per_leaf, (t.leaf + 1) * per_leaf)}
            up = on[on["host"].isin(hosts)]
            out["condemned_per_qp_max"] = int(up["condemned"].max()) if len(up) else 0
            out["condemned_total"] = int(up["condemned"].sum())
            out["affected_evs"] = len(up)
            out["share_on_lossy_evs"] = float(up["sent"].sum() / max(1, paths[paths["host"].isin(
                hosts)]["sent"].sum()))
    return out


def ratio(a: float | None, b: float | None) -> float | None:
    """Throughput ratio of two mean CCTs of the same bytes: control time / fault time."""
    return None if not a or not b else b / a



def _ratio(x: float | None) -> str:
    return f"{x:.2f}" if x is not None else "-"


def _ms(seconds: float | None) -> str:
    return f"{seconds * 1e3:.0f}" if seconds is not None else "-"


def _cpu(m: dict | None) -> str:
    """The run's own share of the cores as the verdict counts it (agents + runner + softirq)."""
    total = ((m or {}).get("cpu") or {}).get("run_total")
    return f"{total:.0%}" if total is not None else "-"


def extra(m: dict) -> str:
    """What the row needs beyond its ratios: the lossy path's condemnations, MRC's loss
    accounting, the incast victim's iteration times."""
    parts = []
    if "condemned_per_qp_max" in m:
        parts.append(f"lossy path condemned <= {m['condemned_per_qp_max']}x per QP "
                     f"({m['condemned_total']} over {m['affected_evs']} EVs), "
                     f"{m['share_on_lossy_evs']:.1%} of the leaf's packets on it")
    if "condemned_all" in m:
        parts.append(f"EVs condemned {m['condemned_all']}x, {m['congestion_losses_all']} "
                     f"losses taken as congestion, {m['random_losses_all']} as random, "
                     f"{m.get('rack_losses', 0)} found by RACK, {m.get('tail_probes', 0)} tail "
                     f"probes, {m.get('stalls', 0)} stalls")
    if m.get("control") is None:
        parts.append(f"victim CCT before {m['cct_before'] * 1e3:.0f} ms (n={m['n_before']}), "
                     f"during {m['cct_window'] * 1e3:.0f} ms (n={m['n_window']})"
                     if m["cct_before"] and m["cct_window"] else "no iterations before or during")
    if not m["verified"]:
        parts.append("NOT VERIFIED")
    return "; ".join(parts)


def verdicts(m: dict) -> list[str]:
    """The fidelity verdicts a row's ratios rest on: its run's and its control's."""
    control = m.get("control")
    return [m["fidelity"]] + ([] if control is None else [control.get("fidelity", "no run")])


RATIOS = (("ratio_whole", "whole"), ("ratio_window", "window"), ("ratio_after", "after"))


def report(rows: list[dict], experiments: list[str], variants: list[str],
           seeds: list[int], missing: list[list] | None = None) -> str:
    """Every run, the runs that made no result (`missing`: experiment, variant, seed, which
    run, why), then per experiment and variant the spread of each ratio over the runs whose
    verdicts were all faithful."""
    per_run = [[m["experiment"], m["variant"], m["seed"], *(_ratio(m[k]) for k, _ in RATIOS),
                f"{_ms(m['cct'])}/{_ms((m.get('control') or {}).get('cct', m['cct_before']))}",
                m["n_window"], m["failed_qps"], m["retransmits"], m["timeouts"],
                "/".join(verdicts(m)) + ("" if fair.counted(verdicts(m)) else " **excluded**"),
                f"{_cpu(m)}/{_cpu(m.get('control'))}", extra(m)] for m in rows]
    out = fair.table(["experiment", "variant", "seed", "whole", "window", "after",
                      "CCT ms run/control", "n win",
                      "failed QPs", "retx", "t/o", "fidelity run/control", "run CPU run/control",
                      "notes"], per_run)
    if missing:
        out += "\nruns that made no result:\n\n" + fair.table(
                 ["experiment", "variant", "seed", "run", "why"], missing)
    summary = []
    for name in experiments:
        for variant in variants:
            mine = [m for m in rows if m["experiment"] == name and m["variant"] == variant]
            faithful = [fair.counted(verdicts(m)) for m in mine]
            # a QP that failed stopped the collective: a training job would have stopped, and
            # the iterations before it are no ratio of the run
            failed = [f and m["failed_qps"] > 0 for m, f in zip(mine, faithful)]
            keep = [f and not x for f, x in zip(faithful, failed)]
            spreads = [fair.spread([m[k] for m in mine], keep) for k, _ in RATIOS]
            summary.append([name, variant, f"{sum(keep)} of {len(seeds)}",
                            *(s.text() for s in spreads),
                            f"{sum(failed)} of {sum(faithful)}" if any(failed) else "",
                            "" if all(faithful) and len(mine) == len(seeds)
                            else "**runs excluded or missing**"])
    out += "\nmin/median/max over the counted runs (same seeds for every variant):\n\n"
    out += fair.table(["experiment", "variant", "runs counted", "whole", "window", "after",
                       "QPs failed", ""], summary)
    out += ("\nwhole, window, after: busbw as a ratio to the control run's (same fabric, "
            "variant and seed, no fault).\nCCT: the mean collective completion time of the run "
            "and of its control, the level each\nratio is relative to. For an experiment "
            "without a control scenario (the paper's incasts), the\nvictim's own iterations "
            "before the incast are the control. A run counts only when it and its\ncontrol "
            "were judged `faithful`; the others are listed above, marked excluded, and left out "
            "of\nmin/median/max. A faithful run in which a QP failed counts under QPs failed, "
            "not in the\nratios: its collective stopped. rocev2: lossy (Go-Back-N over a fabric "
            "that drops);\nrocev2-lossless: the same scenario with `switch: {lossless: "
            "true}`.\n")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("experiments", nargs="*", help="default: every experiment of the set")
    ap.add_argument("--set", dest="which", choices=list(SETS), default="paper")
    fair.add_options(ap, "paper")
    args = ap.parse_args()
    folder, table_of = SETS[args.which]
    experiments = args.experiments or list(table_of)
    unknown = [e for e in experiments if e not in table_of]
    if unknown:
        ap.error(f"{', '.join(unknown)}: not in the {args.which} set "
                 f"({', '.join(table_of)})")
    sit = fair.sitting(ap, args, "paper")
    seeds, out = sit.seeds, sit.out
    top = fair.header(f"bench/paper.py, {args.which} set", sys.orig_argv)
    out.mkdir(parents=True, exist_ok=True)
    say(f"results: {out}")
    controls: dict[tuple[str, str, int], dict] = {}
    rows: list[dict] = []
    missing: list[list] = []
    for name in experiments:
        fault, control = table_of[name]
        for seed in seeds:  # seeds outermost within an experiment: variants side by side
            for variant, checkout in sit.plan:
                k = fair.key(variant, checkout)
                base = None
                if control is not None:
                    ck = (control, k, seed)
                    if ck not in controls:
                        d, err = fair.run_variant(folder / f"{control}.yaml", variant, seed, out,
                                                  checkout=checkout)
                        if d is None:
                            missing.append([name, k, seed, f"control {control}", fair.why(err)])
                            say(f"  {control} {k} s{seed}: no run ({fair.why(err)})")
                        controls[ck] = (measure(d) if d else None) or {}
                    base = controls[ck]
                d, err = fair.run_variant(folder / f"{fault}.yaml", variant, seed, out,
                                          checkout=checkout)
                m = measure(d) if d is not None else None
                if m is None:
                    missing.append([name, k, seed, fault, fair.why(err) if d is None
                                    else "incomplete run (stderr above)"])
                    say(f"  {fault} {k} s{seed}: no run ({fair.why(err)})")
                    continue
                ref = base.get("cct") if base is not None else m["cct_before"]
                m |= {"experiment": name, "variant": k, "control": base,
                      "ratio_whole": ratio(m["cct"], ref),
                      "ratio_window": ratio(m["cct_window"], ref),
                      "ratio_after": ratio(m["cct_after"], ref)}
                rows.append(m)
                say(f"{name} {k} s{seed}: whole {_ratio(m['ratio_whole'])} window "
                    f"{_ratio(m['ratio_window'])} after {_ratio(m['ratio_after'])}, fidelity "
                    f"{'/'.join(verdicts(m))}{'' if fair.counted(verdicts(m)) else ' (excluded)'}")
                (out / "paper.json").write_text(json.dumps(rows, indent=1, default=str))
    print(top + sit.lines())
    print(report(rows, experiments, sit.keys, seeds, missing), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
