"""Which path each packet of a QP takes: the EV set, its spraying policy and its health.

Every EV is one physical path (plane, spine) from the fabric's EV table. A QP sprays its packets
over its *active* EVs, spread evenly over the planes. Health, as in MRC:
- GOOD: usable;
- ASSUMED_BAD: a packet on it was lost without a trim (or timed out); it leaves the active set
  at once, a spare GOOD EV of the same plane takes its place, and it is probed in the
  background until a probe comes back, which makes it GOOD again;
- DENIED: never used (set by the scenario or a controller).
Congestion (an ECN mark or a trim) is not failure: the EV stays GOOD but is skipped for
`congestion_holdoff` seconds, so the next packets go elsewhere. An EV marked much more often
than the QP's other EVs (its share of marked ACKs, a moving average, at least
`hot_ratio` times theirs) is a slow or hot path rather than a busy fabric: it is skipped for
`hot_rtts` smoothed RTTs instead. Under even load (every EV marked now and then) a long holdoff
would idle good paths; on one degraded path a 1 ms holdoff skips nothing, being shorter than
the gap between two packets on one EV at these rates.
`ev_min_active` is a floor: when fewer GOOD EVs remain active, the QP also sprays on
ASSUMED_BAD ones (longest-failed first), because a QP that stops sending cannot learn that a
path came back, and a falsely condemned fabric is worse than a few lost packets.
Every state change is recorded with its time.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from enum import Enum


class EVState(str, Enum):
    GOOD = "GOOD"
    ASSUMED_BAD = "ASSUMED_BAD"
    DENIED = "DENIED"


MARK_GAIN = 1 / 16  # weight of one ACK in an EV's share of marked ACKs
MARK_FLOOR = 0.02  # below this share the other EVs count as unmarked (no 2x of nothing)


@dataclass
class EV:
    index: int  # index in the pair's EV table: what goes on the wire
    plane: int
    state: EVState = EVState.GOOD
    active: bool = False
    bad_since: float = 0.0
    holdoff_until: float = 0.0
    next_probe: float = 0.0
    sent: int = 0
    losses: int = 0
    trims: int = 0
    ecn: int = 0
    marked: float = 0.0  # moving average of the share of its ACKs that came back marked


@dataclass(frozen=True)
class Transition:
    time: float
    ev: int
    old: EVState
    new: EVState
    reason: str


@dataclass
class EVPolicy:
    active_per_plane: int | None = None  # None: every EV of the table is active
    ev_min_active: int = 1
    spray: str = "round_robin"  # or "random"
    probe_interval: float = 0.005  # seconds between probes of an ASSUMED_BAD EV
    congestion_holdoff: float = 0.001  # seconds an ECN-marked or trimmed EV is skipped
    hot_ratio: float = 1.5  # an EV marked this many times more often than the others is hot
    hot_rtts: float = 4.0  # a hot EV is skipped this many smoothed RTTs when marked


@dataclass
class EVSet:
    evs: list[EV]
    policy: EVPolicy
    rng: random.Random
    transitions: list[Transition] = field(default_factory=list)
    _usable: list[EV] = field(default_factory=list)
    _cursor: int = 0

    @classmethod
    def build(cls, table: list[tuple[int, int]], policy: EVPolicy, rng: random.Random,
              denied: frozenset[int] = frozenset()) -> EVSet:
        """`table`: (EV index, plane) for every path of the pair."""
        evs = [EV(i, plane, EVState.DENIED if i in denied else EVState.GOOD)
               for i, plane in table]
        ev_set = cls(evs, policy, rng)
        for plane in {e.plane for e in evs}:
            ev_set._fill_plane(plane)
        ev_set._refresh()
        if not ev_set._usable:
            raise ValueError("no usable EV: every path of this pair is DENIED")
        return ev_set

    def _per_plane_target(self, plane: int) -> int:
        in_plane = [e for e in self.evs if e.plane == plane]
        want = self.policy.active_per_plane
        return len(in_plane) if want is None else min(want, len(in_plane))

    def _fill_plane(self, plane: int) -> None:
        in_plane = [e for e in self.evs if e.plane == plane]
        missing = self._per_plane_target(plane) - sum(e.active for e in in_plane)
        for e in in_plane:
            if missing <= 0:
                break
            if not e.active and e.state is EVState.GOOD:
                e.active = True
                missing -= 1

    def _refresh(self) -> None:
        good = [e for e in self.evs if e.active and e.state is EVState.GOOD]
        if len(good) < self.policy.ev_min_active:
            bad = sorted((e for e in self.evs if e.state is EVState.ASSUMED_BAD),
                         key=lambda e: e.bad_since)
            good += bad[:self.policy.ev_min_active - len(good)]
        self._usable = good

    def _set(self, ev: EV, state: EVState, now: float, reason: str) -> None:
        if ev.state is not state:
            self.transitions.append(Transition(now, ev.index, ev.state, state, reason))
            ev.state = state

    # ---- choosing ----
    def pick(self, now: float, avoid: int | None = None) -> EV:
        """The EV for the next packet: the next usable one not held off (nor `avoid`)."""
        usable = self._usable
        n = len(usable)
        if n == 0:
            raise RuntimeError("no usable EV")
        if self.policy.spray == "random":
            start = self.rng.randrange(n)
        else:
            start = self._cursor
            self._cursor = (self._cursor + 1) % n
        fallback = None
        for k in range(n):
            ev = usable[(start + k) % n]
            if ev.index == avoid:
                continue
            if ev.holdoff_until <= now:
                if self.policy.spray != "random":  # the next pick starts after this one, so
                    self._cursor = (start + k + 1) % n  # a held EV's turns spread evenly
                return ev
            fallback = fallback or ev
        return fallback or usable[start % n]

    def usable_indexes(self) -> list[int]:
        return [e.index for e in self._usable]

    def by_index(self, index: int) -> EV | None:
        for e in self.evs:
            if e.index == index:
                return e
        return None

    # ---- health ----
    def on_loss(self, index: int, now: float, reason: str) -> None:
        """An untrimmed loss or a timeout on this EV: condemn it, bring in a spare."""
        ev = self.by_index(index)
        if ev is None or ev.state is not EVState.GOOD:
            return
        ev.losses += 1
        ev.active = False
        ev.bad_since = now
        ev.next_probe = now + self.policy.probe_interval
        self._set(ev, EVState.ASSUMED_BAD, now, reason)
        self._fill_plane(ev.plane)
        self._refresh()

    def on_feedback(self, index: int, marked: bool) -> None:
        """An ACK for a packet on this EV: update its share of marked ACKs."""
        ev = self.by_index(index)
        if ev is not None:
            ev.marked += MARK_GAIN * ((1.0 if marked else 0.0) - ev.marked)

    def is_hot(self, ev: EV) -> bool:
        others = [e.marked for e in self._usable if e is not ev]
        return bool(others) and ev.marked > self.policy.hot_ratio * max(
            sum(others) / len(others), MARK_FLOOR)

    def on_congestion(self, index: int, now: float, trimmed: bool,
                      rtt: float | None = None) -> None:
        ev = self.by_index(index)
        if ev is None:
            return
        if trimmed:
            ev.trims += 1
            ev.marked += MARK_GAIN * (1.0 - ev.marked)  # a trim is a mark its ACK never bears
        else:
            ev.ecn += 1
        holdoff = self.policy.congestion_holdoff
        if rtt and self.is_hot(ev):
            holdoff = max(holdoff, self.policy.hot_rtts * rtt)
        ev.holdoff_until = now + holdoff

    def on_probe_reply(self, index: int, now: float) -> None:
        ev = self.by_index(index)
        if ev is None or ev.state is not EVState.ASSUMED_BAD:
            return
        self._set(ev, EVState.GOOD, now, "probe answered")
        self._fill_plane(ev.plane)
        self._refresh()

    def deny(self, index: int, now: float, reason: str = "denied") -> None:
        ev = self.by_index(index)
        if ev is None:
            return
        ev.active = False
        self._set(ev, EVState.DENIED, now, reason)
        self._fill_plane(ev.plane)
        self._refresh()

    def probes_due(self, now: float) -> list[int]:
        due = []
        for ev in self.evs:
            if ev.state is EVState.ASSUMED_BAD and ev.next_probe <= now:
                ev.next_probe = now + self.policy.probe_interval
                due.append(ev.index)
        return due

    def next_probe_time(self) -> float | None:
        times = [e.next_probe for e in self.evs if e.state is EVState.ASSUMED_BAD]
        return min(times) if times else None
