"""How similar the emulated fabric is to the real one it stands for (meta.json `similarity`).

Time dilation by D (every rate divided by D, every time multiplied by D) keeps every size in
bytes and every ratio of times what it is in the real fabric, and with them the dynamics. The
record holds the ratios a reader checks a result against (packets in flight over a path,
buffers and thresholds in BDPs, the ACK timeout in round trips, the message in BDPs), the
same numbers in both frames when the emulation is similar, and the `departures`: each
quantity the run did not scale by D, with what the real fabric has, what the run used and why.
"""
from __future__ import annotations

from typing import Literal

from runcontract.record import Record


def _rate(bits: float) -> str:
    for unit, scale in (("Tbit/s", 1e12), ("Gbit/s", 1e9), ("Mbit/s", 1e6)):
        if bits >= scale:
            return f"{bits / scale:g} {unit}"
    return f"{bits / 1e3:g} kbit/s"


class PathRatios(Record):
    """One kind of path between two hosts, every queue empty."""

    path: str  # "same leaf" or "across a spine"
    links: int
    rtt_s: float  # the round trip in the real frame (the emulated one without real_rate)
    bdp_packets: float  # full data packets a sender at line rate has in flight over it


class Departure(Record):
    """A quantity the run did not scale by the time dilation: what the real fabric (or the
    scenario) states, what the run used, both in the real frame, and why."""

    quantity: str
    stated: str
    used: str
    why: str

    def line(self) -> str:
        """The departure in a summary's line: the reason's first clause (meta.json keeps it
        whole)."""
        reason = self.why.split(": ")[0]
        return f"{self.quantity}: {self.used}, real fabric {self.stated} ({reason})"


class Similarity(Record):
    """The run's similarity to the real fabric. Times are the real frame's; without
    `fabric.real_rate` there is no real fabric (`frame` "emulated", `dilation` 1) and the ratios
    describe the emulated fabric as a real one of its own rates would be."""

    frame: Literal["real", "emulated"]
    dilation: float  # D: real rate over the emulated host link's rate (1: no real_rate)
    real_rate: float | None  # bit/s of the real host link
    emulated_rate: float  # bit/s of the emulated host link
    paths: list[PathRatios]
    bdp_packets: float  # across a spine: the longest path, the one the ratios below use
    buffer_bdp: float  # a fabric port's buffer over that BDP in bytes
    ecn_kmin_bdp: float | None  # RED's K_min over it (None: ports do not mark)
    trim_bdp: float | None  # the trimming threshold over it (None: ports do not trim)
    ack_timeout_rtts: dict[str, float]  # transport -> its ACK timeout over the base round trip
    # transport -> its QP's window cap (qp.max_cwnd) over the BDP of the ports the QP spans
    # (MRC: every plane; RoCEv2: one): under 1, a QP cannot fill its path
    window_bdp: dict[str, float]
    message_bdp: float  # the workload's largest message over the BDP in bytes
    departures: list[Departure]

    def lines(self) -> list[str]:
        """The record in a few lines, for the summary."""
        if self.frame == "real":
            head = (f"D = {self.dilation:,.0f}: real {_rate(self.real_rate or 0.0)} host links, "
                    f"emulated {_rate(self.emulated_rate)}; times in the real frame")
        else:
            head = "emulated frame (no fabric.real_rate: no real fabric named, D = 1)"
        timeouts = ", ".join(f"{t} {r:.3g}" for t, r in sorted(self.ack_timeout_rtts.items()))
        windows = ", ".join(f"{t} {r:.3g}" for t, r in sorted(self.window_bdp.items()))
        out = [head, f"per path: BDP {self.bdp_packets:.1f} packets across a spine; buffer "
               f"{self.buffer_bdp:.3g} BDP, ECN K_min "
               + ("off" if self.ecn_kmin_bdp is None else f"{self.ecn_kmin_bdp:.3g} BDP")
               + ", trimming " + ("off" if self.trim_bdp is None else f"{self.trim_bdp:.3g} BDP")
               + f"; message {self.message_bdp:.3g} BDP; ACK timeout in RTTs: {timeouts}; "
               f"window cap in its QP's BDPs: {windows}"]
        out += [f"departure: {d.line()}" for d in self.departures]
        return out
