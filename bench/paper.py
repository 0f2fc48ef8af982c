#!/usr/bin/env python3
"""The MRC paper's fault experiments (issue 9's table), each run next to a healthy control on
the same fabric in the same sitting: MRC with one seed, RoCEv2 over several seeds (which spine
each of its QPs lands on depends on the hash, and so on the seed).

    sudo .venv/bin/python bench/paper.py [--seeds 1,2,3] [--mrc-seeds 1] [EXPERIMENT ...]

For every run it prints the collective's busbw over the whole run and over the iterations that
overlap the fault window (or, for the flap, the iterations while the ports are down and those
after), each as a ratio to the control's busbw (the same scenario without faults, same
transport and seed), the QPs that failed, each run's fidelity verdict and own CPU (agents +
runner + softirq, share of all cores) beside its control's, and what the row needs (EV
condemnations of the lossy path; the incast victim's iteration time during the incast against
before it). Results folders
go to results/paper-<utc>/ and a JSON of every number to results/paper-<utc>/paper.json.
"""
from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analysis.load import RunError, load_run  # noqa: E402
from analysis.metrics import cct  # noqa: E402
from testbed.scenario.schema import load as load_scenario  # noqa: E402

PAPER = ROOT / "scenarios" / "paper"
EXPERIMENTS = {  # name: (fault scenario, control scenario or None: compare within the run)
    "gray-loss": ("gray-loss", "control"),
    "loss-0.1pct": ("loss-0.1pct", "control"),
    "loss-1pct": ("loss-1pct", "control"),
    "host-flap": ("host-flap", "control-8plane"),
    "blackhole-reboot": ("blackhole-reboot", "control"),
    "incast-victim": ("incast-victim", None),
    "incast-victim-apart": ("incast-victim-apart", None),  # the victim sends no incast
    "degrade": ("degrade", "control"),
}


def run(file: Path, transport: str, seed: int, out: Path) -> Path | None:
    """One transport of one scenario with this seed; the run's folder (None if it failed to
    produce one)."""
    text = file.read_text()
    name = re.search(r"^name: (\S+)", text, re.M).group(1)
    text = re.sub(r"^name: \S+", f"name: {name}-s{seed}\nseed: {seed}\n"
                  f"transport: [{transport}]", text, count=1, flags=re.M)
    spec = out / f"{name}-{transport}-s{seed}.yaml"
    spec.write_text(text)
    stderr = run_cli([sys.executable, "-m", "testbed.cli", "run", str(spec), "--no-report",
                      "--quiet", "--results", str(out / "runs")])
    runs = sorted((out / "runs").glob(f"*-{name}-s{seed}-{transport}"))
    if not runs:
        print(f"  {spec.name}: no run ({stderr.strip()[-300:]})", flush=True)
        return None
    return runs[-1]


RUN_TIMEOUT = 300.0  # s: a run of these scenarios takes under a minute


def run_cli(cmd: list[str], timeout: float = RUN_TIMEOUT) -> str:
    """Run a testbed command; past `timeout`, interrupt it (SIGINT: the runner cleans up
    what it built) and wait for it. Its stderr."""
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate()
        err += f"\ninterrupted after {timeout:.0f} s"
    return err


def windows(scenario) -> tuple[list[tuple[float, float]], float]:
    """The intervals (s since the workload's start) in which a fault or background flow is
    active, and when the last one ends. Flaps: only their down halves."""
    spans = []
    for f in scenario.faults:
        if f.kind == "flap":
            for c in range(f.count or 1):
                start = f.at + c * f.period
                spans.append((start, start + f.period / 2))
        elif f.duration is not None:
            spans.append((f.at, f.at + f.duration))
        else:
            spans.append((f.at, float("inf")))
    for b in scenario.background:
        spans.append((b.at, b.at + b.duration))
    end = max((e for _, e in spans), default=0.0)
    if any(f.kind == "flap" for f in scenario.faults):
        end = max(f.at + (f.count or 1) * f.period for f in scenario.faults if f.kind == "flap")
    return spans, end


def measure(run_dir: Path) -> dict | None:
    """The numbers of one run; None (said why) for a run that did not complete."""
    try:
        r = load_run(run_dir)
    except RunError as exc:
        print(f"  {run_dir.name}: {exc}", flush=True)
        return None
    scenario, _ = load_scenario(run_dir / "scenario.yaml")  # the scenario as it ran
    it = cct(r.tables["iterations"], r.t0)
    timed = it[~it["warmup"] & (it["ranks"] == it["ranks"].max())]
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
           "failed_qps": int(qps["failed"].notna().sum()) if "failed" in qps else 0,
           "retransmits": int(qps["retransmits"].sum()), "timeouts": int(qps["timeouts"].sum()),
           "fidelity": (r.meta.get("fidelity") or {}).get("verdict", "-"),
           "cpu": {k: ((r.meta.get("fidelity") or {}).get("cpu") or {}).get(k)
                   for k in ("run_total", "run_agents", "run_runner", "softirq", "busy_mean")}}
    for col in ("tail_probes", "rack_losses", "stalls"):
        if col in qps:
            out[col] = int(qps[col].sum())
    paths = r.tables.get("paths")
    if r.transport == "mrc" and paths is not None and not paths.empty:
        out["condemned_all"] = int(paths["condemned"].sum()) if "condemned" in paths else 0
        out["congestion_losses_all"] = int(paths["congestion_losses"].sum()) \
            if "congestion_losses" in paths else 0
        out["random_losses_all"] = int(paths["random_losses"].sum()) \
            if "random_losses" in paths else 0
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


def _cpu(m: dict | None) -> str:
    """The run's own share of the cores as the verdict counts it (agents + runner + softirq)."""
    total = ((m or {}).get("cpu") or {}).get("run_total")
    return f"{total:.0%}" if total is not None else "-"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("experiments", nargs="*", default=list(EXPERIMENTS))
    ap.add_argument("--seeds", default="1,2,3", help="RoCEv2 seeds")
    ap.add_argument("--mrc-seeds", default="1")
    ap.add_argument("--transports", default="mrc,rocev2")
    args = ap.parse_args()
    out = ROOT / "results" / f"paper-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    (out / "runs").mkdir(parents=True)
    seeds = {"mrc": [int(s) for s in args.mrc_seeds.split(",")],
             "rocev2": [int(s) for s in args.seeds.split(",")]}
    controls: dict[tuple[str, str, int], dict] = {}
    rows = []
    print(f"results: {out}", flush=True)
    print(f"{'experiment':<22}{'transport':<8}{'seed':>5}{'whole':>8}{'window':>8}"
          f"{'after':>8}{'n win':>6}{'failed':>7}{'retx':>7}{'t/o':>5}  fidelity "
          f"(fault/control)  extra", flush=True)
    for name in args.experiments:
        fault, control = EXPERIMENTS[name]
        for transport in args.transports.split(","):
            for seed in seeds[transport]:
                base = None
                if control is not None:
                    key = (control, transport, seed)
                    if key not in controls:
                        d = run(PAPER / f"{control}.yaml", transport, seed, out)
                        controls[key] = (measure(d) if d else None) or {}
                    base = controls[key]
                d = run(PAPER / f"{fault}.yaml", transport, seed, out)
                m = measure(d) if d is not None else None
                if m is None:
                    continue
                ref = base.get("cct") if base else m["cct_before"]
                m |= {"experiment": name, "control": base,
                      "ratio_whole": ratio(m["cct"], ref),
                      "ratio_window": ratio(m["cct_window"], ref),
                      "ratio_after": ratio(m["cct_after"], ref)}
                rows.append(m)
                extra = ""
                if "condemned_per_qp_max" in m:
                    extra = (f"lossy path condemned <= {m['condemned_per_qp_max']}x per QP "
                             f"({m['condemned_total']} over {m['affected_evs']} EVs), "
                             f"{m['share_on_lossy_evs']:.1%} of the leaf's packets on it")
                if "condemned_all" in m:
                    extra += (f"{'; ' if extra else ''}EVs condemned {m['condemned_all']}x, "
                              f"{m['congestion_losses_all']} losses taken as congestion, "
                              f"{m['random_losses_all']} as random, "
                              f"{m.get('rack_losses', 0)} found by RACK, "
                              f"{m.get('tail_probes', 0)} tail probes, {m.get('stalls', 0)} "
                              f"stalls")
                if control is None:
                    victim = (f"victim CCT before {m['cct_before'] * 1e3:.0f} ms "
                              f"(n={m['n_before']}), during {m['cct_window'] * 1e3:.0f} ms "
                              f"(n={m['n_window']})" if m["cct_before"] and m["cct_window"]
                              else "no iterations before or during")
                    extra += ("; " if extra else "") + victim
                print(f"{name:<22}{transport:<8}{seed:>5}{_ratio(m['ratio_whole']):>8}"
                      f"{_ratio(m['ratio_window']):>8}{_ratio(m['ratio_after']):>8}"
                      f"{m['n_window']:>6}{m['failed_qps']:>7}{m['retransmits']:>7}"
                      f"{m['timeouts']:>5}  {m['fidelity']}/{(base or {}).get('fidelity', '-')}"
                      f"  run CPU {_cpu(m)}/{_cpu(base)}  {extra}"
                      f"{'' if m['verified'] else '  NOT VERIFIED'}", flush=True)
                (out / "paper.json").write_text(json.dumps(rows, indent=1, default=str))
    print("whole, window, after: busbw as a ratio to the control run's (same fabric, transport "
          "and seed,\nno fault); for the incast, the victim's own iterations before the incast "
          "are the control.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
