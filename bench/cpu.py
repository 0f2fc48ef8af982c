"""CPU accounting shared by the benches: what the agents' processes spent (exact, from their own
result.json) and what the kernel spent in softirq on the whole machine (network receive and
forwarding through the emulated hops; /proc/stat, so other work on the machine adds to it)."""
from __future__ import annotations

import os
from pathlib import Path

from testbed.emulation.calibration import agents_cpu  # noqa: F401 (the benches' import)

_TICK = os.sysconf("SC_CLK_TCK")


def machine() -> dict[str, float]:
    """Seconds of CPU since boot, by kind, summed over every core."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, idle, iowait, irq, softirq = (int(x) / _TICK for x in fields[:7])
    return {"user": user + nice, "system": system, "softirq": softirq + irq,
            "idle": idle + iowait}


def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before[k] for k in before}


def children() -> tuple[float, float]:
    """User and system CPU seconds of this process's children that have been waited for (the
    agents, once run_agents returned: their whole lives, start-up included). The system part is
    mostly sendmmsg carrying each packet through the emulated hops in the sender's call."""
    t = os.times()
    return t.children_user, t.children_system


def kernel_share(before: tuple[float, float], after: tuple[float, float]) -> float:
    user, system = after[0] - before[0], after[1] - before[1]
    return system / (user + system) if user + system > 0 else 0.0
