"""A server's clock against the runner's: NTP's four-timestamp exchange, pure arithmetic.

One sample is (t1, t2, t3, t4) in ns: the runner's clock when it sent the request, the
server's when it read it and when it answered, the runner's when the answer arrived. Then
    offset = ((t2 - t1) + (t3 - t4)) / 2      (server clock minus runner clock)
    rtt    = (t4 - t1) - (t3 - t2)            (time on the wire, both ways)
and the offset is exact when the two directions take equally long; however they split, its
error is at most rtt / 2. The sample with the smallest RTT is the one least delayed by queues
or scheduling, so it is kept (NTP's clock filter does the same).
"""
from __future__ import annotations

from dataclasses import dataclass

Sample = tuple[int, int, int, int]  # t1 (runner), t2, t3 (server), t4 (runner), ns


@dataclass(frozen=True)
class ClockOffset:
    """A server's clock minus the runner's, with the uncertainty of that number."""

    offset_ns: int
    rtt_ns: int
    samples: int

    @property
    def error_ns(self) -> int:
        """Bound on how wrong `offset_ns` can be (half the RTT of the sample it came from)."""
        return (self.rtt_ns + 1) // 2

    def worst_ns(self) -> int:
        """How far apart the two clocks may be, at most: |offset| plus its error."""
        return abs(self.offset_ns) + self.error_ns

    def to_json(self) -> dict[str, float | int]:
        return {"offset_us": round(self.offset_ns / 1e3, 3), "rtt_us": round(self.rtt_ns / 1e3, 3),
                "error_us": round(self.error_ns / 1e3, 3), "samples": self.samples}


def offset_of(samples: list[Sample]) -> ClockOffset:
    """The offset from the minimum-RTT sample. Samples whose times run backwards on one side,
    or that spent longer on the server than on the round trip (a clock stepped during the
    exchange), are dropped; none left is an error. The two clocks may differ by anything."""
    good = [s for s in samples if s[3] >= s[0] and s[2] >= s[1]
            and (s[3] - s[0]) >= (s[2] - s[1])]
    if not good:
        raise ValueError(f"no usable clock sample among {len(samples)}")
    t1, t2, t3, t4 = min(good, key=lambda s: (s[3] - s[0]) - (s[2] - s[1]))
    return ClockOffset(offset_ns=((t2 - t1) + (t3 - t4)) // 2,
                       rtt_ns=(t4 - t1) - (t3 - t2), samples=len(samples))


def bound_ns(ack_timeout_s: float) -> int:
    """How far a server's clock may be from the runner's for a run to start: a tenth of the
    transport's ACK timeout (the shortest time the results compare across hosts: an agent's
    timer lag, a fault's effect against its scheduled time), and never more than 1 ms."""
    return int(min(ack_timeout_s / 10, 1e-3) * 1e9)
