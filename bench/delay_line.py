#!/usr/bin/env python3
"""The delay line's cost on a built fabric: the agents' CPU per delivered data packet with the
scenario's link latency (every datagram held at the receiver, hostagent/runtime/delay_line.py)
and without it (`fabric.hop_latency` and `fabric.nic_latency` 0: nothing held), same rate,
same seed, both transports, one sitting.

    sudo flock /tmp/testbed-run.lock .venv/bin/python -m bench.delay_line
        [--seeds 1,2,3] [--variants mrc,rocev2] [--against CHECKOUT] [--results DIR]
        [SCENARIO.yaml]

The scenario (default scenarios/htsim/ring-8-real.yaml: 8 hosts at 25 Mbit/s, 1 us hops at
D = 4,000) must state a link latency. Each seed runs, per variant and checkout, the scenario
with its latency and then without; the CPU is every agent process's, user and system, from the
workload's start to its end (what `bench.jobs` counts), over the data packets the QPs
delivered. A pair counts when both runs were `faithful`. Without latency a path holds fewer
packets, so the transports' dynamics differ too (their windows, their ACKs per packet): this is
what the delay line costs a run, not the hold alone (`bench.proto --sockets --latency`
measures that over loopback).
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from bench import fair
from bench.common import ROOT, say
from bench.jobs import agents
from runcontract.meta import MetaError, read_meta
from testbed.errors import ScenarioError
from testbed.scenario import load

SCENARIO = ROOT / "scenarios" / "htsim" / "ring-8-real.yaml"
NO_LATENCY = {"fabric": {"hop_latency": "0s", "nic_latency": "0s"}}


@dataclass(frozen=True)
class Pair:
    """One variant, checkout and seed: CPU seconds and delivered packets held and not."""

    variant: str
    seed: int
    held_cpu_s: float
    held_packets: float
    plain_cpu_s: float
    plain_packets: float
    counted: bool
    note: str = ""

    @property
    def held_us(self) -> float | None:
        return self.held_cpu_s / self.held_packets * 1e6 if self.held_packets else None

    @property
    def plain_us(self) -> float | None:
        return self.plain_cpu_s / self.plain_packets * 1e6 if self.plain_packets else None

    @property
    def ratio(self) -> float | None:
        """CPU per packet with the delay line over without."""
        held, plain = self.held_us, self.plain_us
        return held / plain if held is not None and plain else None


def cost(run: Path | None) -> tuple[float, float, str]:
    """A run's agents' CPU seconds, delivered data packets and verdict ("" when none)."""
    if run is None or not (run / "qps.parquet").exists():
        return 0.0, 0.0, ""
    try:
        verdict = read_meta(run).verdict or ""
    except MetaError:
        return 0.0, 0.0, ""
    cpu, packets = agents(run)
    return cpu, packets, verdict


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenario", nargs="?", type=Path, default=SCENARIO, metavar="SCENARIO.yaml")
    fair.add_options(ap, "delay-line")
    ap.set_defaults(variants="mrc,rocev2")
    args = ap.parse_args()
    sit = fair.sitting(ap, args, "delay-line")
    try:
        sc, _ = load(args.scenario)
    except (ScenarioError, OSError) as exc:
        ap.error(str(exc))
    if not (sc.fabric.hop_latency or sc.fabric.nic_latency):
        ap.error(f"{args.scenario}: no link latency (fabric.hop_latency, nic_latency): "
                 f"nothing is held, so there is nothing to compare")
    file = args.scenario.resolve()
    pairs: dict[str, list[Pair]] = {}
    total, done = len(sit.seeds) * len(sit.plan), 0
    for seed in sit.seeds:
        for variant, checkout in sit.plan:
            done += 1
            held_run, err = fair.run_variant(file, variant, seed, sit.out, checkout=checkout)
            plain_run, err2 = fair.run_variant(file, variant, seed, sit.out, checkout=checkout,
                                               overrides=NO_LATENCY, label="-nolatency")
            (hc, hp, hv), (pc, pp, pv) = cost(held_run), cost(plain_run)
            ok = fair.counted([hv, pv]) and hp > 0 and pp > 0
            note = "" if ok else (f"held {hv or fair.why(err)}, without {pv or fair.why(err2)}")
            pair = Pair(variant, seed, hc, hp, pc, pp, ok, note)
            pairs.setdefault(fair.key(variant, checkout), []).append(pair)
            say(f"[{done}/{total}] seed {seed} {fair.key(variant, checkout)}: "
                + (f"{pair.held_us:.1f} / {pair.plain_us:.1f} us a packet = {pair.ratio:.3f}x"
                   if ok and pair.ratio is not None else f"no pair ({note})"))
    print(fair.header("The delay line's cost on a built fabric", sys.orig_argv))
    print(sit.lines() + f"- scenario: {args.scenario}\n")
    rows = []
    for name, mine in pairs.items():
        keep = [p.counted for p in mine]
        ratio = fair.spread([p.ratio for p in mine], keep)
        held = fair.spread([p.held_us for p in mine], keep)
        plain = fair.spread([p.plain_us for p in mine], keep)
        rows.append([name, plain.text("{:.1f}"), held.text("{:.1f}"),
                     f"{ratio.text('{:.3f}')} (n={ratio.n}/{ratio.runs})"])
    print(fair.table(["variant", "without (us/packet)", "with latency (us/packet)",
                      "with / without"], rows))
    sit.out.mkdir(parents=True, exist_ok=True)
    (sit.out / "delay_line.json").write_text(json.dumps(
        {name: [asdict(p) | {"ratio": p.ratio} for p in mine] for name, mine in pairs.items()},
        indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
