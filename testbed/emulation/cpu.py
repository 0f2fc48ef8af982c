"""The CPU side of the fidelity monitor: how busy the machine was while the workload ran.

Every period, the machine-wide busy share (from /proc/stat: everything but idle and iowait,
softirq included, where the fabric's forwarding runs) and the share of the interval in which
some task waited for a CPU (PSI, /proc/pressure/cpu, where the kernel has it). Both are
cumulative counters, so a starved sampler loses resolution, not time: each row covers the
interval since the previous one.
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

PROC_STAT = Path("/proc/stat")
PSI_CPU = Path("/proc/pressure/cpu")


def parse_stat(text: str) -> tuple[int, int, int]:
    """(busy, softirq, total) jiffies of all cores from /proc/stat's first line."""
    fields = [int(v) for v in text.splitlines()[0].split()[1:]]
    # user nice system idle iowait irq softirq steal [guest guest_nice: inside user already]
    total = sum(fields[:8])
    idle = fields[3] + fields[4]
    return total - idle, fields[6], total


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
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Idempotent; a sampler never started has nothing to stop."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        busy0, soft0, total0 = parse_stat(PROC_STAT.read_text())
        psi0, t0 = _read_psi(), time.time()
        while True:
            stopping = self._stop.wait(self.period)
            busy, soft, total = parse_stat(PROC_STAT.read_text())
            psi, now = _read_psi(), time.time()
            if total > total0:
                self.rows.append({
                    "time": now, "interval_s": now - t0,
                    "busy": (busy - busy0) / (total - total0),
                    "softirq": (soft - soft0) / (total - total0),
                    "psi_some": (None if psi is None or psi0 is None or now <= t0
                                 else min(1.0, (psi - psi0) / 1e6 / (now - t0)))})
            busy0, soft0, total0, psi0, t0 = busy, soft, total, psi, now
            if stopping:
                return

    def summary(self) -> dict:
        """Busy share and PSI over the whole phase, weighted by each interval's length."""
        if not self.rows:
            return {"busy_mean": None, "busy_max": None, "psi_some": None, "softirq": None}
        span = sum(r["interval_s"] for r in self.rows)
        busy = sum(r["busy"] * r["interval_s"] for r in self.rows) / span
        soft = sum(r["softirq"] * r["interval_s"] for r in self.rows) / span
        psi_rows = [r for r in self.rows if r["psi_some"] is not None]
        psi = (sum(r["psi_some"] * r["interval_s"] for r in psi_rows) / span
               if psi_rows and len(psi_rows) == len(self.rows) else None)
        return {"busy_mean": round(busy, 4),
                "busy_max": round(max(r["busy"] for r in self.rows), 4),
                "psi_some": None if psi is None else round(psi, 4), "softirq": round(soft, 4)}
