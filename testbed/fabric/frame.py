"""The frame of a scenario's times: the real fabric's, run D times slower, or the emulation's.

An emulated link of 25 Mbit/s stands in for a real one of 100-400 Gbit/s: time dilation by
D = fabric.real_rate / the host link's emulated rate. Dividing every rate by D and multiplying
every time by D keeps every size in bytes (buffers, thresholds, messages, windows, the BDP)
what it is in the real fabric, and with them the dynamics (see the manual's Fidelity page).
With `real_rate`, the times a scenario states (testbed/scenario/real_times.py) are the real
fabric's, and this module is the one place where they become emulated seconds: `Frame.emulated`
multiplies by D. Without `real_rate`, D is 1 and every time is emulated seconds, as written.

Transport timers (qp.timeout and the retry schedule, MRC's probe interval, probe timeout and
holdoff) are in the scenario's frame too; testbed/fabric/timers.py converts them, compressing
those a scenario asks to. Routing's convergence delay stays emulated seconds.
"""
from __future__ import annotations

from dataclasses import dataclass

from testbed.errors import ScenarioError
from testbed.scenario import Scenario
from testbed.scenario.background import Background
from testbed.scenario.faults import Fault
from testbed.scenario.limits import MIN_FLAP_PERIOD
from testbed.scenario.real_times import BACKGROUND_TIMES, FAULT_TIMES
from testbed.scenario.units import format_rate, format_time


def dilation(scenario: Scenario) -> float | None:
    """real_rate / the host link's emulated rate: how many times slower than the real fabric
    this one runs (None without fabric.real_rate)."""
    real = scenario.fabric.real_rate
    return None if real is None else real / scenario.fabric.host_link.rate


@dataclass(frozen=True)
class Frame:
    """What a scenario's stated times mean: real-fabric seconds, times `dilation` in the
    emulation (`real`), or emulated seconds (`dilation` 1)."""

    dilation: float
    real: bool

    @classmethod
    def of(cls, scenario: Scenario) -> Frame:
        d = dilation(scenario)
        return cls(1.0, False) if d is None else cls(d, True)

    def emulated(self, seconds: float) -> float:
        """A time as the scenario states it, in emulated seconds."""
        return seconds * self.dilation

    def in_real(self, emulated: float) -> float:
        """An emulated time as the real fabric's (the same number without real_rate)."""
        return emulated / self.dilation

    def hop_latency(self, scenario: Scenario) -> float:
        """Emulated seconds a datagram spends in one link's latency."""
        return self.emulated(scenario.fabric.hop_latency)

    def nic_latency(self, scenario: Scenario) -> float:
        """Emulated seconds a datagram spends in one host NIC's latency."""
        return self.emulated(scenario.fabric.nic_latency)

    def compute_gap(self, scenario: Scenario) -> float:
        """Emulated seconds of compute between two iterations of the looped collective."""
        return self.emulated(scenario.workload.compute_gap)

    def faults(self, faults: list[Fault]) -> list[Fault]:
        """The faults with every time in emulated seconds, for the timeline and the agents."""
        return [f.model_copy(update={k: self.emulated(getattr(f, k)) for k in FAULT_TIMES
                                     if getattr(f, k) is not None}) for f in faults]

    def background(self, patterns: list[Background]) -> list[Background]:
        """The background patterns with their times in emulated seconds; in the real frame a
        duration is rounded to whole emulated seconds (at least 1), which iperf3 -t counts."""
        out = []
        for b in patterns:
            times = {k: self.emulated(getattr(b, k)) for k in BACKGROUND_TIMES}
            if self.real:
                times["duration"] = float(max(1, round(times["duration"])))
            out.append(b.model_copy(update=times))
        return out

    def line(self, scenario: Scenario) -> str:
        """The frame in a line, for `validate`."""
        f = scenario.fabric
        if not self.real:
            return "frame: emulated (no fabric.real_rate): every time as written, D = 1"
        return (f"frame: real, D = {self.dilation:,.0f} (fabric.real_rate "
                f"{format_rate(f.real_rate or 0)} / host links {format_rate(f.host_link.rate)}): "
                f"stated times run {self.dilation:,.0f}x longer")


def check(scenario: Scenario, source: str) -> None:
    """Stated times the emulation cannot apply once dilated: a flap cycle shorter than
    MIN_FLAP_PERIOD emulated. Raises `ScenarioError` naming each."""
    frame = Frame.of(scenario)
    short = [f"faults.{k}: a flap period of {format_time(f.period)} runs "
             f"{format_time(frame.emulated(f.period))} emulated, under "
             f"{format_time(MIN_FLAP_PERIOD)}"
             for k, f in enumerate(scenario.faults)
             if f.period is not None and frame.emulated(f.period) < MIN_FLAP_PERIOD]
    if short:
        raise ScenarioError(f"{source}: " + "; ".join(short),
                            "lengthen the period: each half of a cycle rewrites the link's "
                            "nftables rules")
