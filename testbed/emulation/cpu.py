"""The CPU side of the fidelity monitor: how busy the machine was while the workload ran.

Every period, the machine-wide busy share (from /proc/stat: everything but idle and iowait,
softirq included, where the fabric's forwarding runs), the share a hypervisor ran something
else while this machine's virtual CPUs wanted to run (steal: inside the busy share, not this
machine's work), the share of the interval in which some task waited for a CPU (PSI,
/proc/pressure/cpu, where the kernel has it), and the share
of all cores the sampling process itself used, every thread of it (the runner: its telemetry,
fault injector and this monitor; in the cluster mode a server's agent). All are cumulative
counters, so a starved sampler loses resolution, not time: each row covers the interval since
the previous one.
"""
from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

PROC_STAT = Path("/proc/stat")
PSI_CPU = Path("/proc/pressure/cpu")
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def boot_id() -> str:
    """This kernel's boot id: processes (a server's agent, the runner) that report the same one
    share a machine and its cores (emulated servers do)."""
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return socket.gethostname()


def parse_stat(text: str) -> tuple[int, int, int, int]:
    """(busy, softirq, steal, total) jiffies of all cores from /proc/stat's first line."""
    fields = [int(v) for v in text.splitlines()[0].split()[1:]]
    # user nice system idle iowait irq softirq steal [guest guest_nice: inside user already]
    total = sum(fields[:8])
    idle = fields[3] + fields[4]
    return total - idle, fields[6], fields[7], total


def parse_psi(text: str) -> int | None:
    """Microseconds some task waited for a CPU (the `some` line's total)."""
    for line in text.splitlines():
        if line.startswith("some "):
            for item in line.split()[1:]:
                key, _, value = item.partition("=")
                if key == "total":
                    return int(value)
    return None


def _read_psi() -> int | None:
    try:
        return parse_psi(PSI_CPU.read_text())
    except OSError:  # no PSI on this kernel (CONFIG_PSI off, or psi=0)
        return None


class CpuSampler:
    """`start()` before the traffic, `stop()` after; `rows` hold one interval each."""

    def __init__(self, period: float) -> None:
        self.period = period
        self.cores = os.cpu_count() or 1
        self.psi_available = _read_psi() is not None
        self.rows: list[dict] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """The first counters are read here, so the first interval starts at this call."""
        self._thread = threading.Thread(target=self._run, args=(self._read(),),
                                        name="cpu-sampler", daemon=True)
        self._thread.start()

    @staticmethod
    def _read() -> tuple[int, int, int, int, int | None, float, float]:
        """(busy, softirq, steal, total jiffies, PSI us, wall clock, this process's CPU s):
        every thread of this process, those that ended included (CLOCK_PROCESS_CPUTIME_ID)."""
        busy, soft, steal, total = parse_stat(PROC_STAT.read_text())
        return busy, soft, steal, total, _read_psi(), time.time(), time.process_time()

    def stop(self) -> None:
        """Idempotent; a sampler never started has nothing to stop."""
        self._stop.set()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join()

    def _run(self, first: tuple[int, int, int, int, int | None, float, float]) -> None:
        busy0, soft0, steal0, total0, psi0, t0, own0 = first
        while True:
            stopping = self._stop.wait(self.period)
            busy, soft, steal, total, psi, now, own = self._read()
            if total > total0 and now > t0:
                self.rows.append({
                    "time": now, "interval_s": now - t0,
                    "busy": (busy - busy0) / (total - total0),
                    "softirq": (soft - soft0) / (total - total0),
                    "steal": (steal - steal0) / (total - total0),
                    "psi_some": (None if psi is None or psi0 is None
                                 else min(1.0, (psi - psi0) / 1e6 / (now - t0))),
                    "process": (own - own0) / (now - t0) / self.cores})
            busy0, soft0, steal0, total0, psi0, t0, own0 = busy, soft, steal, total, psi, now, own
            if stopping:
                return

    def summary(self) -> dict:
        return summarize(self.rows)


def summarize(rows: list[dict], since: float | None = None) -> dict:
    """Busy share, softirq, steal, PSI and the sampling process's share of all cores, each
    weighted by its interval's length, over the rows that end after `since` (the workload's
    start, on the rows' clock; None: all of them)."""
    rows = [r for r in rows if since is None or r["time"] > since]
    if not rows:
        return {"busy_mean": None, "busy_max": None, "psi_some": None, "softirq": None,
                "steal": None, "process": None}
    span = sum(r["interval_s"] for r in rows)

    def mean(key: str) -> float | None:
        known = [r for r in rows if r.get(key) is not None]
        if len(known) < len(rows):  # a gap in a counter: no mean over a part
            return None
        return round(sum(r[key] * r["interval_s"] for r in known) / span, 4)

    return {"busy_mean": mean("busy"), "busy_max": round(max(r["busy"] for r in rows), 4),
            "psi_some": mean("psi_some"), "softirq": mean("softirq"), "steal": mean("steal"),
            "process": mean("process")}
