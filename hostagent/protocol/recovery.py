"""Tail-loss recovery for MRC: a lost packet found without waiting for the ACK timeout.

A gap NACK (mrc.py) finds a loss on an EV when a later packet on the same EV arrives. The last
packets a QP sends on each EV before it falls silent (the tail of a message: with 32 packets
of a 128 KB ring step over 6 EVs, about one loss in five) have nothing after them on their EV,
and so waited for the spec's ACK timeout. On the emulated fabric that timeout is 70 ms (it
must outlast a 100 KB queue at 25 Mbit/s), 2.5 ring steps: measured on the simnet at 2% loss
per path, 13-16 timeouts per 100 messages made up most of the 2.4x slowdown.

Two mechanisms of TCP's RACK-TLP (RFC 8985), read for a sprayed connection:
- RACK: once a packet sent *after* p (on any EV; in one burst, a higher PSN) is
  acknowledged, p is lost as soon as it has been out longer than the RTT almost every packet
  beats: srtt + 4 rttvar + the receiver's ACK delay, plus RFC 8985's reordering window of a
  quarter RTT (all at most the ACK timeout). Paths are compared by send time, not PSN, and
  the slack covers the delay differences between EVs (without the quarter RTT, a third of
  RACK's losses on the simnet at 2% loss and 2 ms of jitter were packets still on their
  way). Each packet waits by the RTT of its own EV where that is longer than the QP's (an
  EV no ACK has answered yet: by how long its last packet took to be acknowledged): in
  the incast, the victim's plane-0 paths ran far behind its plane-1 paths, and with the QP's
  RTT alone most of RACK's 212 "losses" were packets still queued there (the receivers
  counted 202 duplicates, against 212 RACK resends and 34 tail probes).
- TLP: when no ACK has come for `pto` = 2 srtt + the receiver's ACK delay (RFC 8985's PTO,
  at most the ACK timeout) after the last ACK or packet sent, and packets are out, the newest
  of them is resent once (on another EV). Its ACK carries the SACK of everything
  the receiver holds, and its send time lets RACK find the other tail losses.
Neither is a timeout: nothing counts towards the retry schedule, no EV is condemned by a
probe, and a loss RACK finds is judged like a gap (against the QP's other EVs, evs.py).
The ACK timeout stays the last resort (a path that is silent, or the probe lost too).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from mypy_extensions import mypyc_attr

from hostagent.protocol.constants import RACK_REORDER_SHARE, RTTVAR_WEIGHT, TLP_SRTTS


def probe_timeout(srtt: float | None, rttvar: float, ack_delay: float,
                  timeout: float) -> float | None:
    """TLP's wait, s: 2 srtt + the ACK delay, never beyond the ACK timeout; None before the
    first RTT sample (only the timeout applies then)."""
    if srtt is None:
        return None
    return min(TLP_SRTTS * srtt + ack_delay, timeout)


def rack_wait(srtt: float | None, rttvar: float, ack_delay: float,
              timeout: float) -> float | None:
    """RACK's wait, s: srtt + 4 rttvar + the ACK delay, plus a reordering window of
    srtt / 4 (RFC 8985's min_rtt / 4), never beyond the ACK timeout."""
    if srtt is None:
        return None
    return min(srtt + RTTVAR_WEIGHT * rttvar + ack_delay + RACK_REORDER_SHARE * srtt, timeout)


def _after(sent: float, psn: int, other_sent: float, other_psn: int) -> bool:
    """Whether the copy (sent, psn) was sent after (other_sent, other_psn): send time first,
    PSN among copies of one instant. The tuples' order, without building two per packet."""
    return sent > other_sent or (sent == other_sent and psn > other_psn)


# Compiled by mypyc, a class may be subclassed by interpreted code only where it says so: tests
# turn RACK or the tail probe off in a subclass.
@mypyc_attr(allow_interpreted_subclasses=True)
@dataclass
class TailRecovery:
    """RACK-TLP state of one MRC QP (the QP owns the packets; this holds the clocks)."""

    rack_sent: float = -1.0  # send time of the newest copy known to have arrived
    rack_psn: int = -1  # its PSN: packets sent in one burst share a time, and PSN orders them
    last_activity: float = 0.0  # the last ACK received or new packet sent
    probed: bool = False  # the tail probe of this silence was sent
    deadline: float | None = None  # when the oldest RACK candidate becomes lost
    probes: int = 0
    losses: int = 0

    def delivered(self, sent_at: float, psn: int) -> None:
        if _after(sent_at, psn, self.rack_sent, self.rack_psn):
            self.rack_sent, self.rack_psn = sent_at, psn

    def heard(self, now: float) -> None:
        """An ACK arrived: the silence a tail probe waits for restarts, and a new probe may
        follow it."""
        self.last_activity = now
        self.probed = False

    def sent(self, now: float) -> None:
        """A packet went out (new or resent): the tail is now that packet; at most one probe
        per silence still."""
        self.last_activity = now

    def lost(self, outstanding: Iterable[tuple[int, float, float]],
             now: float) -> list[int]:
        """The PSNs among `outstanding` (psn, send time, its RACK wait) that RACK finds lost
        now; sets `deadline` to when the next candidate (sent before a delivered packet) will
        be."""
        out: list[int] = []
        deadline = None
        rack_sent, rack_psn = self.rack_sent, self.rack_psn
        for psn, sent_at, wait in outstanding:
            if not _after(rack_sent, rack_psn, sent_at, psn):
                continue
            due = sent_at + wait
            if due <= now:
                out.append(psn)
            elif deadline is None or due < deadline:
                deadline = due
        self.deadline = deadline
        self.losses += len(out)
        return out

    def probe_due(self, now: float, pto: float, outstanding: bool) -> bool:
        if not outstanding or self.probed or now < self.last_activity + pto:
            return False
        self.probed = True
        self.probes += 1
        return True

    def next_time(self, pto: float | None, outstanding: bool) -> float | None:
        if pto is None or self.probed or not outstanding:
            return self.deadline
        probe = self.last_activity + pto
        return probe if self.deadline is None else min(self.deadline, probe)
