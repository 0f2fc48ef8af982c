#!/usr/bin/env python3
"""Ring all-reduce at growing host counts: share of the ideal busbw, the run's fidelity verdict,
and what it cost in CPU.

The fabric: 4 planes x 4 spines, 8 hosts per leaf (2 leaves of 4 hosts at 8 hosts), every link
at 10 Mbit/s (or `--rate auto`: what `rate: auto` chooses for one run of all the transports
asked for, its model and its pilot, per host count, so that they compare at one rate; on
`--against`'s checkout, its own choice) with 100 KB buffers, a 1 MiB all-reduce (1 warmup
+ 3 timed iterations), quickstart's packets (4096 B payload, MTU 4200; `--mss 1024 --mtu 1500`
for the scenario default, four times the packets). Each row is a whole `mrc-testbed run` (its
results in a temporary folder, or `--results`): fresh fabric, the fidelity monitor, the verdict.
Printed per run:
- the link rate (the one `auto` chose, where it did);
- busbw as a share of the ideal (planes x host link rate; MRC sprays every plane);
- the verdict and, when it is not `faithful`, its reasons;
- the gap between iterations (each rank verifies its result there), mean over ranks;
- the agents' event-loop lag: how late a 10 ms timer fired, 99th percentile, worst process;
- the run's own CPU (agents + softirq, share of all cores, as the verdict counts it), the
  agents' CPU per data packet delivered, and `(sys)`: the share of the agents' whole lives' CPU
  spent in the kernel (mostly sendmmsg carrying each packet through the emulated hops in the
  sender's system call); `softirq`: the machine's softirq time per data packet delivered, over
  the iterations (the fidelity monitor's share of all cores, times the cores and the time from
  the first iteration's start to the last one's end: machine-wide, so others' work adds to it);
- user-space and kernel apart, per data packet delivered (sent less resent), from the workload's
  start to the agents' end (each process's own user and system time, result.json): `user`
  (the agents' code: protocol, driver, collectives), `system` (their system calls), `softirq`
  as above, and `u/k` = user / (system + softirq): above 1, the agents' own code costs more
  than the kernel carrying its packets, and a faster protocol build moves the limit;
- `build`: the protocol the agents ran (hostagent/compiled.py; "mixed" if they disagreed).
`--build compiled,pure` runs every row once per build, side by side in the same sitting: the
compiled protocol (`make fast`; without it one error says so) and its sources
(MRC_TESTBED_PURE=1 in the agents' environment). Default: whatever is installed.
`--against CHECKOUT` runs every row on another checkout of the project first (another commit,
`make install`ed there, with whatever build it has and a calibration cache of its own), then
on this one: an A/B in one sitting. Agents of commits that report only their CPU's sum leave
`user`, `system` and `u/k` empty.

    sudo .venv/bin/python -m bench.scale [--hosts 8 16 32 64] [--modes pooled per_host]
                                         [--transport mrc,rocev2] [--build compiled,pure]
                                         [--rate 10Mbit|auto] [--size 1MiB]
                                         [--mss 4096] [--mtu 4200] [--results DIR]
                                         [--against CHECKOUT]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

import pandas as pd

from bench import cpu
from bench.fair import THIS, Checkout, checkouts
from hostagent import compiled
from runcontract import read_meta
from testbed import scenario as scenario_mod
from testbed.emulation.calibration import CACHE_DIR, agents_cpu, agents_cpu_split
from testbed.errors import TestbedError
from testbed.lifecycle import registry
from testbed.lifecycle.progress import Progress
from testbed.run import calibrate
from testbed.run.runner import RunOptions, run
from testbed.scenario.units import format_rate

SCENARIO = """name: scale-{hosts}
fabric: {{planes: 4, leaves_per_plane: {leaves}, spines_per_plane: 4, hosts_per_leaf: {per_leaf},
          host_link: {{rate: {rate}, buffer: 100KB}}, fabric_link: {{rate: {rate}, buffer: 100KB}},
          mtu: {mtu}}}
qp: {{mss: {mss}}}
transport: [{transport}]
workload: {{collective: all_reduce, size: {size}, iterations: 3, warmup: 1}}
agents: {{mode: {mode}, processes: {processes}}}
"""


def scenario(hosts: int, mode: str, transport: str, rate: str, size: str, mss: int, mtu: int,
             processes: int | None = None):
    per_leaf = min(8, hosts // 2)
    text = SCENARIO.format(hosts=hosts, leaves=hosts // per_leaf, per_leaf=per_leaf, rate=rate,
                           mode=mode, transport=transport, size=size, mss=mss, mtu=mtu,
                           processes=processes or "null")
    return scenario_mod.parse(text, "bench"), text


BUILDS = {"compiled": "0", "pure": "1"}  # --build: MRC_TESTBED_PURE in the agents' environment


def delivered_packets(qps: pd.DataFrame) -> float:
    """Data packets delivered: every QP's data packets sent, less those it sent again."""
    return float(qps["data_sent"].sum() - qps["retransmits"].sum())


def per_packet(split: tuple[float, float] | None, softirq_s: float | None,
               delivered: float) -> dict[str, float | None]:
    """Microseconds per delivered data packet of the agents' user and system time (`split`)
    and the machine's softirq, and user / (system + softirq): how much of the packet's CPU the
    agents' own code is, against the kernel's carrying it (None where not measured, or where
    the agents, of an older commit, did not report user and system apart)."""
    if delivered <= 0 or split is None:
        return {"user_us": None, "system_us": None, "softirq_pkt_us": None, "user_kernel": None}
    user_s, system_s = split
    kernel = system_s + (softirq_s or 0.0)
    return {"user_us": user_s / delivered * 1e6, "system_us": system_s / delivered * 1e6,
            "softirq_pkt_us": None if softirq_s is None else softirq_s / delivered * 1e6,
            "user_kernel": user_s / kernel if softirq_s is not None and kernel > 0 else None}


def use_build(build: str | None) -> None:
    """The agents started from now run `build` (None: the environment as it is: whatever is
    installed); the compiled one must exist."""
    if build is None:
        return
    if build == "compiled" and not compiled.choose(environ={})[0]:
        raise SystemExit(f"--build compiled: no usable compiled protocol here "
                         f"({compiled.choose(environ={})[1]}); `make fast` builds it")
    os.environ[compiled.PURE] = BUILDS[build]


def run_one(sc, text: str, base: Path, checkout: Checkout = THIS) -> dict:
    """One whole run (as `mrc-testbed run --no-report`; on another checkout, by its own CLI
    with its own calibration cache); what its results folder says."""
    error = None
    before = set(base.glob("*"))
    children = cpu.children()
    if checkout == THIS:
        try:
            run(sc, text, RunOptions(base), Progress(quiet=True))
        except TestbedError as exc:  # agents failed or stopped: the folder still says what ran
            error = str(exc)
    else:
        error = _run_on(checkout, text, base)
    kernel = cpu.kernel_share(children, cpu.children())
    new = sorted(set(base.glob("*")) - before)
    if not new:
        return {"error": error or "no results folder"}
    return read_run(new[-1], sc, error, kernel)


def _run_on(checkout: Checkout, text: str, base: Path) -> str | None:
    """`text` run by `checkout`'s own CLI into `base`; its error line, or None."""
    spec = base / f"scenario-{checkout.commit()}.yaml"
    spec.write_text(text)
    env = {k: v for k, v in os.environ.items() if k != compiled.PURE}  # its own build
    env["MRC_TESTBED_CACHE"] = str(CACHE_DIR / f"checkout-{checkout.commit()}")
    done = subprocess.run([checkout.python, "-m", "testbed.cli", "run", str(spec),
                           "--no-report", "--results", str(base)], cwd=checkout.path, env=env,
                          capture_output=True, text=True)
    spec.unlink()
    lines = done.stderr.strip().splitlines()
    return None if done.returncode == 0 else (lines[-1] if lines else f"exit {done.returncode}")


def read_run(d: Path, sc, error: str | None, kernel: float) -> dict:
    """A run's row from its results folder `d` (whichever checkout wrote it)."""
    meta = read_meta(d)
    out: dict = {"dir": d, "error": error, "kernel": kernel,
                 "rate": meta.facts.link_rates["host"] if meta.facts else None,
                 "build": meta.protocol.build if meta.protocol else "-"}
    f = meta.fidelity
    out |= {"verdict": f.verdict if f else "none", "reasons": f.reasons if f else [],
            "run_cpu": f.part("cpu").get("run_total") if f else None,
            "lag_p99_ms": ((f.part("agents").get("lag_p99_s") if f else 0) or 0) * 1e3}
    m = (re.search(r"sum\s+\d+\s+\S+\s+(\S+)", (d / "summary.txt").read_text())
         if (d / "summary.txt").exists() else None)
    ideal = meta.facts.ideal_busbw if meta.facts else None
    out["share"] = float(m.group(1)) / ideal if m and ideal else None
    if (d / "iterations.parquet").exists():
        it = pd.read_parquet(d / "iterations.parquet").dropna(subset=["start"])
        it = it.sort_values(["rank", "iteration"])
        span = float(it["end"].max() - it["start"].min())
        gaps = (it.groupby("rank")["start"].shift(-1) - it["end"]).dropna()
        out["gap_ms"] = gaps.mean() * 1e3 if len(gaps) else None
        out["iterations"] = int(it.groupby("iteration")["rank"].count().eq(sc.fabric.host_count)
                                .sum())
    if (d / "qps.parquet").exists():
        qps = pd.read_parquet(d / "qps.parquet")
        delivered = delivered_packets(qps)
        results = [json.loads(p.read_text()) for p in (d / "agents").glob("*/result.json")]
        out["agent_us"] = agents_cpu(results) / delivered * 1e6 if delivered else None
        cpu_seen = f.part("cpu") if f else {}
        softirq = None
        if delivered and cpu_seen.get("softirq") is not None and "iterations" in out:
            softirq = cpu_seen["softirq"] * cpu_seen["cores"] * span
            out["softirq_us"] = softirq / delivered * 1e6
        out |= per_packet(agents_cpu_split(results), softirq, delivered)
        out["retransmits"] = int(qps["retransmits"].sum())
    return out


def _num(value, fmt: str, width: int) -> str:
    return format(value, fmt).rjust(width) if value is not None else "-".rjust(width)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, nargs="+", default=[8, 16, 32, 64])
    ap.add_argument("--modes", nargs="+", default=["pooled", "per_host"])
    ap.add_argument("--transport", default="mrc", help="comma-separated: mrc,rocev2")
    ap.add_argument("--build", default=None, help="comma-separated: compiled,pure (default: "
                    "whatever is installed); each row once per build")
    ap.add_argument("--rate", default="10Mbit", help="link rate, or auto")
    ap.add_argument("--size", default="1MiB")
    ap.add_argument("--processes", type=int, default=None, help="pooled: processes (default: "
                    "one per core)")
    ap.add_argument("--mss", type=int, default=4096)
    ap.add_argument("--mtu", type=int, default=4200)
    ap.add_argument("--results", type=Path, default=None,
                    help="keep the runs' folders here (default: a temporary folder)")
    ap.add_argument("--against", type=Path, metavar="CHECKOUT",
                    help="another checkout of the project: each row runs there first (its "
                         "installed build), then here (A/B)")
    args = ap.parse_args()
    try:
        runs_on = checkouts(args.against)
    except ValueError as exc:
        raise SystemExit(f"--against: {exc}") from None
    transports = args.transport.split(",")
    builds: list[str | None] = args.build.split(",") if args.build else [None]
    for b in builds:
        if b is not None and b not in BUILDS:
            raise SystemExit(f"--build {b}: one of {', '.join(BUILDS)}")
    environ = os.environ.get(compiled.PURE)
    if "compiled" in builds:
        use_build("compiled")  # missing: said before the first fabric is built
    print(f"ring all-reduce {args.size} over {', '.join(transports)}, 4 planes x 4 spines, "
          f"links {args.rate}, {args.mss} B packets")
    print(f"{'hosts':>5} {'agents':>9} {'transport':>13} {'build':>27} {'rate':>9} "
          f"{'of ideal':>9} {'verdict':>13} {'run CPU':>8} {'gap(ms)':>8} {'agent us/pkt':>13} "
          f"{'(sys)':>6} {'softirq':>8} {'user':>6} {'system':>7} {'u/k':>5} {'retx':>5} "
          f"{'lag p99':>9}  reasons")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            base = args.results or Path(tmp)
            base.mkdir(parents=True, exist_ok=True)
            for hosts in args.hosts:
                for mode in args.modes:
                    rate = (auto_rate(hosts, mode, transports, args) if args.rate == "auto"
                            else args.rate)
                    for transport in transports:
                        for checkout in runs_on[:-1]:  # the other commit (its own auto), then
                            _row(hosts, mode, transport, args.rate, args, base, checkout)
                        for build in builds:  # this one
                            use_build(build)
                            _row(hosts, mode, transport, rate, args, base)
    finally:  # this process's environment as it was
        if environ is None:
            os.environ.pop(compiled.PURE, None)
        else:
            os.environ[compiled.PURE] = environ


def auto_rate(hosts: int, mode: str, transports: list[str], args: argparse.Namespace) -> str:
    """`rate: auto`'s choice for the row group, as a run of all its transports makes it (the
    pilot measures each, the rate fits the heaviest), so that the transports' rows run at one
    rate, as they would in one scenario."""
    sc, _ = scenario(hosts, mode, ", ".join(transports), "auto", args.size, args.mss, args.mtu,
                     args.processes)
    with registry.run_lock():
        resolved, _ = calibrate.choose(sc, Progress(quiet=True))
    rate = resolved.fabric.host_link.rate
    print(f"{hosts:>5} {mode:>9}  rate auto for {', '.join(transports)}: "
          f"{format_rate(rate)}", flush=True)
    return str(rate)


def _row(hosts: int, mode: str, transport: str, rate: str, args: argparse.Namespace,
         base: Path, checkout: Checkout = THIS) -> None:
    sc, text = scenario(hosts, mode, transport, rate, args.size, args.mss, args.mtu,
                        args.processes)
    r = run_one(sc, text, base, checkout)
    at = "" if checkout == THIS else f"@{checkout.commit()}"
    head = f"{hosts:>5} {mode:>9} {transport + at:>13}"
    if "verdict" not in r:
        print(f"{head}  {r['error']}", flush=True)
        return
    rate = f"{r['rate'] / 1e6:g}M" if r["rate"] else "-"
    why = "; ".join(r["reasons"]) if r["verdict"] != "faithful" else ""
    if r["error"]:
        why = (f"RUN FAILED after {r.get('iterations', 0)} iterations: "
               f"{r['error'][:200]}" + (f" | {why}" if why else ""))
    print(f"{head} {r['build']:>27} {rate:>9} {_num(r['share'], '.0%', 9)} "
          f"{r['verdict']:>13} {_num(r['run_cpu'], '.0%', 8)} "
          f"{_num(r.get('gap_ms'), '.0f', 8)} {_num(r.get('agent_us'), '.1f', 13)} "
          f"{r['kernel']:>6.0%} {_num(r.get('softirq_us'), '.1f', 8)} "
          f"{_num(r.get('user_us'), '.1f', 6)} {_num(r.get('system_us'), '.1f', 7)} "
          f"{_num(r.get('user_kernel'), '.2f', 5)} "
          f"{_num(r.get('retransmits'), 'd', 5)} {r['lag_p99_ms']:>6.1f} ms  {why}", flush=True)


if __name__ == "__main__":
    main()
