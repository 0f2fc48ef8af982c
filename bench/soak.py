#!/usr/bin/env python3
"""Soak: drills in a loop, faults every few seconds, watching the runner and the agents.

    sudo flock /tmp/mrc-testbed.lock .venv/bin/python -m bench.soak [--minutes 10]
        [--drill-seconds 60] [--fault-every 3]

Each drill is one `mrc-testbed run` of a quickstart-sized fabric over MRC whose workload lasts
about --drill-seconds, with a link going down for a second every --fault-every seconds and a
host port flapping throughout. While it runs, the runner's and every agent's resident memory
and open file descriptors are sampled each second, and each agent's CPU time.

It fails (exit 1) when:
- a drill exits non-zero, or leaves processes, namespaces or registry entries behind;
- within a drill, the runner's or an agent's memory grows by more than --max-growth (default
  25%) or its descriptors by more than 8 from the first quarter of the drill to the last;
- an agent is stuck: alive while its CPU time does not move for 10 s;
- across drills, a drill's runner peaks more than --max-growth above the first drill's.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import ROOT

CLI = [sys.executable, "-P", "-m", "testbed.cli"]
STUCK_S = 10.0
FD_SLACK = 8
TICKS = os.sysconf("SC_CLK_TCK")


def scenario(seconds: float, every: float) -> str:
    iterations = max(5, int(seconds / 0.3))  # 1 MiB all-reduce at 25 Mbit/s: about 0.3 s each
    faults = [f"  - {{at: {t:g}, kind: link_down, target: {{plane: {k % 2}, leaf: {k % 2}, "
              f"spine: {(k // 2) % 2}}}, duration: 1.0}}"
              for k, t in enumerate(x * every for x in range(1, int(seconds / every)))]
    faults.append(f"  - {{at: 0.5, kind: flap, target: {{host: h3, plane: 1}}, period: 2, "
                  f"until: {max(1.0, seconds - 1):g}}}")
    return (f"name: soak\ntransport: [mrc]\nseed: 7\n"
            f"fabric: {{host_link: {{rate: 25Mbit}}, fabric_link: {{rate: 25Mbit}}, mtu: 4200}}\n"
            f"qp: {{mss: 4096}}\n"
            f"workload: {{size: 1MiB, iterations: {iterations}, warmup: 0}}\n"
            f"faults:\n" + "\n".join(faults) + "\n")


def _status(pid: int) -> tuple[int, int, int] | None:
    """(RSS KiB, open fds, CPU ticks) of a live process, or None."""
    try:
        rss = next(int(line.split()[1]) for line in
                   Path(f"/proc/{pid}/status").read_text().splitlines()
                   if line.startswith("VmRSS:"))
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return rss, fds, int(stat[11]) + int(stat[12])
    except (OSError, StopIteration, ValueError, IndexError):
        return None


def _agents() -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if b"hostagent.runtime.agent" in (entry / "cmdline").read_bytes():
                    out.append(int(entry.name))
            except OSError:
                pass
    return out


@dataclass
class Series:
    samples: list[tuple[float, int, int, int]] = field(default_factory=list)  # t, rss, fds, cpu

    def growth(self) -> tuple[float, int]:
        """Memory growth (fraction) and descriptor growth, first quarter to last quarter."""
        n = len(self.samples)
        if n < 8:
            return 0.0, 0
        q = n // 4
        first, last = self.samples[:q], self.samples[-q:]
        rss0 = sum(s[1] for s in first) / q
        rss1 = sum(s[1] for s in last) / q
        return rss1 / rss0 - 1, max(s[2] for s in last) - max(s[2] for s in first)

    def stuck_for(self) -> float:
        """Longest span during which the CPU time did not move."""
        longest, since = 0.0, None
        for (t0, *_, c0), (t1, *_, c1) in zip(self.samples, self.samples[1:]):
            since = (since if since is not None else t0) if c1 == c0 else None
            if since is not None:
                longest = max(longest, t1 - since)
        return longest


def snapshot() -> dict[str, set]:
    from tests.integration.helpers import snapshot as snap
    return snap()


def drill(k: int, text: str, results: Path, limit: float) -> tuple[Series, dict[int, Series],
                                                                   list[str]]:
    file = results / f"soak-{k}.yaml"
    file.write_text(text)
    before = snapshot()
    proc = subprocess.Popen(CLI + ["run", str(file), "--no-report", "--quiet", "--results",
                                   str(results / f"d{k}")], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    runner, agents = Series(), {}
    t0 = time.monotonic()
    problems: list[str] = []
    while proc.poll() is None:
        now = time.monotonic() - t0
        if now > limit:
            proc.terminate()
            problems.append(f"drill {k}: still running after {limit:.0f} s (stuck); ended")
            break
        st = _status(proc.pid)
        if st:
            runner.samples.append((now, *st))
        for pid in _agents():
            st = _status(pid)
            if st:
                agents.setdefault(pid, Series()).samples.append((now, *st))
        time.sleep(1.0)
    _, err = proc.communicate(timeout=120)
    if proc.returncode != 0:
        problems.append(f"drill {k}: exit {proc.returncode}: {err.strip()[-400:]}")
    from tests.integration.helpers import leftovers
    left = leftovers(before)
    if left:
        problems.append(f"drill {k}: left behind {left}")
    return runner, agents, problems


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--drill-seconds", type=float, default=60.0)
    p.add_argument("--fault-every", type=float, default=3.0)
    p.add_argument("--max-growth", type=float, default=0.25)
    args = p.parse_args()
    text = scenario(args.drill_seconds, args.fault_every)
    end = time.monotonic() + args.minutes * 60
    peaks: list[int] = []
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="mrc-soak-") as tmp:
        results = Path(tmp)
        k = 0
        while time.monotonic() < end or k == 0:
            runner, agents, found = drill(k, text, results, limit=args.drill_seconds * 4 + 60)
            problems += found
            growth, fds = runner.growth()
            peak = max((s[1] for s in runner.samples), default=0)
            peaks.append(peak)
            line = (f"drill {k}: {len(runner.samples)} s, runner peak {peak / 1024:.0f} MiB "
                    f"(growth {growth:+.0%}, fds {fds:+d})")
            if growth > args.max_growth or fds > FD_SLACK:
                problems.append(f"drill {k}: the runner grew: memory {growth:+.0%}, "
                                f"fds {fds:+d}")
            for pid, series in sorted(agents.items()):
                g, f = series.growth()
                stuck = series.stuck_for()
                rss = max((s[1] for s in series.samples), default=0)
                line += (f"\n  agent {pid}: peak {rss / 1024:.0f} MiB, growth {g:+.0%}, "
                         f"fds {f:+d}, longest without CPU {stuck:.0f} s")
                if g > args.max_growth or f > FD_SLACK:
                    problems.append(f"drill {k}: agent {pid} grew: memory {g:+.0%}, fds {f:+d}")
                if stuck >= STUCK_S:
                    problems.append(f"drill {k}: agent {pid} stuck {stuck:.0f} s without CPU")
            print(line, flush=True)
            k += 1
    if peaks and peaks[0] and max(peaks) > peaks[0] * (1 + args.max_growth):
        problems.append(f"runner peaks grew across drills: {[p // 1024 for p in peaks]} MiB")
    print(json.dumps({"drills": len(peaks), "problems": problems}, indent=1))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
