"""Which path each packet of a QP takes: the EV set, its spraying policy and its health.

Every EV takes one physical path (plane, spine) of the fabric; several may share one
(`mrc.evs_per_path`), and each is judged on its own. A QP sprays over its
*active* EVs, `active_per_plane` of each plane (a seeded choice, so that QPs spread over the
spines); the rest of a plane are spares. States and events are ev_states.py's table (the
spec's GOOD / ASSUMED_BAD / DENIED); every change goes through `_apply` and is recorded with
its time and reason. The numbers are constants.py's.

An EV is marked ASSUMED_BAD in `on_loss`, which every loss reaches:
- a gap NACK (mrc.py) condemns only if the EV's recent losses stand out from the QP's other
  EVs' (`stands_out`, a count test): random loss that every path sees alike is no path's
  fault, and condemning for it only shrinks the spray;
  the policy's `untrimmed_loss: condemn` drops that test, as the MRC paper describes its NICs
  ("when a packet is not trimmed but actually lost, MRC assumes the path has failed and
  immediately stops using the corresponding EV"): a stated variant, not the default;
- a timeout (`on_timeouts`) condemns a silent EV (nothing sent after the packet arrived), as
  the spec says; on an EV that delivered later packets it is judged like a gap. More than
  half the active EVs timing out with the receiver silent is a host stall: it condemns
  nothing and gives back what the burst condemned (event STALL);
- a loss RACK found (`on_losses_found`) is judged like a gap until the EV has been silent
  through SILENT_LOSSES losses in a row: then it is dead;
- every active EV of a plane silent while another plane delivers is the plane's port, leaf or
  plane gone (`_condemn_if_gone`): all its EVs, spares included, are condemned at once.
A loss congestion explains (`explained_by_congestion`: a mark or trim on the EV within
`congestion_memory_rtts` RTTs, or its queueing delay above target) holds the EV off instead.
`ev_min_active` is the spec's floor: while only that many EVs are GOOD, none is condemned.

A condemned EV leaves the active set at once and a GOOD spare of its plane takes its place
(`_fill_plane`: "the EV goes inactive at once, a backup takes over"). It is probed
(`probes_due`, `on_probe_reply`) and is GOOD again after `probe_successes` answered probes in
a row; a run the path breaks (it answers, then loses one: lossy) doubles the run it needs, a
clean return (silent, then a whole run: a port back up) does not.

Congestion is not failure: an ECN mark or a trim holds the EV off (`on_congestion`), longer
for an EV marked `hot_ratio` times more often than the others; an active EV whose own RTT
stays the delay target above its plane's best is swapped for a spare (`_cool_if_hot`).

Spraying (`pick`): the usable plane with the fewest of the QP's packets in flight (an ACK
clock per plane: each takes packets at the rate it delivers them), then that plane's next EV
in turn (a path's later packets are what reveal a loss on it by gap NACK). DENIED EVs (the
scenario or a controller) are never used.
"""
from __future__ import annotations

import math
import random
from collections.abc import Collection
from dataclasses import dataclass, field

from hostagent.protocol.constants import (
    CONGESTION_HOLDOFF,
    CONGESTION_MEMORY_RTTS,
    FLAP_MEMORY,
    HELD_SHIFT,
    HOT_MEMORY_RTTS,
    HOT_RATIO,
    HOT_RTTS,
    HOT_SAMPLES,
    LATE_PROBES_KEPT,
    LOSS_MIN,
    LOSS_RATE_FLOOR,
    LOSS_SIGMAS,
    LOSS_WINDOW,
    MARK_FLOOR,
    MARK_GAIN,
    MAX_PROBE_RTTS,
    MAX_PROBE_RUN,
    NO_EV,
    PROBE_INTERVAL,
    PROBE_RUN_GROWTH,
    PROBE_SUCCESSES,
    PROBE_TIMEOUT_INTERVALS,
    RTTVAR_WEIGHT,
    SILENT_LOSSES,
)
from hostagent.protocol.ev_states import EVEvent, EVState, next_state
from hostagent.protocol.nscc import smoothed

__all__ = ["EV", "EVEvent", "EVPolicy", "EVSet", "EVState", "Transition"]

@dataclass
class EV:
    index: int  # index in the pair's EV table: what goes on the wire
    plane: int
    state: EVState = EVState.GOOD
    active: bool = False
    bad_since: float = 0.0
    good_since: float = 0.0  # when it last came back from ASSUMED_BAD (0: never left GOOD)
    holdoff_until: float = 0.0
    next_probe: float = 0.0
    sent: int = 0
    losses: int = 0  # losses that condemned it (or would have, but for the floor)
    congestion_losses: int = 0  # losses explained by congestion: it was held off instead
    random_losses: int = 0  # gap losses no worse than the other EVs': not the path's fault
    floor_holds: int = 0  # losses that did not condemn it because of ev_min_active
    timeouts: int = 0  # timeouts of packets sent on it
    stall_timeouts: int = 0  # of those, timeouts that were part of a host stall
    last_timeout: float = -1.0  # when a packet on it last timed out
    timeout_condemned: float = -1.0  # when a timeout last condemned it
    delivered_sent: float = -1.0  # send time of the newest packet on it known to have arrived
    silent_losses: int = 0  # losses (timeouts, RACK) in a row, nothing delivered between
    silent_since: float = 0.0  # send time of the first of those losses
    silent_queued: bool = False  # congestion (delay, marks) explained one of those losses
    srtt: float | None = None  # its own smoothed RTT (RFC 6298), from the ACKs' echoed times
    rttvar: float = 0.0
    acked_after: float | None = None  # how long its last packet acknowledged took to be: at
    # least its RTT (behind a hole, more), what RACK waits by before it has an srtt
    condemned: int = 0  # times it went GOOD -> ASSUMED_BAD
    trims: int = 0
    ecn: int = 0
    last_congestion: float = -1.0  # time of its last ECN mark or trim
    marked: float = 0.0  # moving average of the share of its ACKs that came back marked
    recent_packets: float = 0.0  # decayed count of its packets judged: delivered or lost
    recent_losses: float = 0.0  # decayed count of its random-or-worse losses
    probe_run: int = 0  # answered probes in a row since it went bad or lost a probe
    probe_required: int = 0  # the run it needs to come back
    runs_broken: int = 0  # probes lost after an answer since it went bad: it is lossy
    clean_return: bool = True  # it last came back with no broken run (silent, then a run)
    probes_sent: int = 0
    probes_answered: int = 0
    probe_rtts: list[float] = field(default_factory=list)
    outstanding: dict[int, float] = field(default_factory=dict)  # probe seq -> sent at
    overdue: dict[int, float] = field(default_factory=dict)  # timed out, reply still counts
    probe_srtt: float | None = None  # smoothed RTT of its answered probes (RFC 6298)
    probe_rttvar: float = 0.0
    inflight: int = 0  # the QP's packets on it not yet acknowledged nor resent elsewhere
    rtt_samples: int = 0  # RTT samples since it last became active (the hot rule waits for some)
    hot_until: float = 0.0  # swapped out as a hot path: not swapped back in before this
    hot_swaps: int = 0  # times it was swapped out for a spare as a hot path

    def start_afresh(self, replacing: EV | None = None) -> None:
        """Back in the active set: its RTT is what it measures from now (seeded with the RTT
        of the EV whose place it takes, if any), not what it measured when last active."""
        self.srtt, self.rttvar = (None, 0.0) if replacing is None else (replacing.srtt,
                                                                        replacing.rttvar)
        self.rtt_samples, self.acked_after = 0, None


@dataclass(frozen=True)
class Transition:
    time: float
    ev: int
    old: EVState
    new: EVState
    reason: str


@dataclass
class EVPolicy:
    active_per_plane: int | None = None  # None: every EV of the table is active (no spares)
    ev_min_active: int = 1
    spray: str = "round_robin"  # or "random"
    probe_interval: float = PROBE_INTERVAL  # seconds between probes of an ASSUMED_BAD EV
    # seconds a probe waits at least; None: PROBE_TIMEOUT_INTERVALS probe intervals
    probe_timeout: float | None = None
    probe_successes: int = PROBE_SUCCESSES  # answered probes in a row before it is GOOD again
    congestion_holdoff: float = CONGESTION_HOLDOFF  # seconds a marked or trimmed EV is skipped
    congestion_memory_rtts: float = CONGESTION_MEMORY_RTTS  # a mark this recent explains a loss
    hot_ratio: float = HOT_RATIO  # an EV marked this many times more often than others is hot
    hot_rtts: float = HOT_RTTS  # a hot EV is skipped this many smoothed RTTs when marked
    # "judge": a loss on an EV that delivers later packets condemns it only when its losses
    # stand out from the QP's other EVs'; "condemn": every loss that was not trimmed condemns
    # its EV unless congestion explains it (the MRC paper's rule, section 2.1)
    untrimmed_loss: str = "judge"


def _least(loads: list[int], taken: int) -> int:
    """The turn with the fewest packets in flight among those not `taken` (a bit each), the
    first in turn among ties: the order a stable sort by load gives, one turn at a time, since
    the first plane tried nearly always has an EV."""
    best = -1
    for k in range(len(loads)):
        if not taken >> k & 1 and (best < 0 or loads[k] < loads[best]):
            best = k
    return best


@dataclass
class EVSet:
    evs: list[EV]
    policy: EVPolicy
    rng: random.Random
    transitions: list[Transition] = field(default_factory=list)
    # by EV index (None: no such EV), a list since it is read for nearly every packet
    _by_index: list[EV | None] = field(default_factory=list)
    _planes: dict[int, list[EV]] = field(default_factory=dict)
    _usable: dict[int, list[EV]] = field(default_factory=dict)  # plane -> active GOOD EVs
    _plane_order: list[int] = field(default_factory=list)  # planes with a usable EV
    _plane_cursor: int = 0
    # by plane number, lists, since they are read at every pick: the next EV's turn in the
    # plane, and the packets in flight
    _ev_cursor: list[int] = field(default_factory=list)
    _plane_inflight: list[int] = field(default_factory=list)
    _bad: list[EV] = field(default_factory=list)  # the ASSUMED_BAD EVs: what probes look at

    @classmethod
    def build(cls, table: list[tuple[int, int]], policy: EVPolicy, rng: random.Random,
              denied: frozenset[int] = frozenset()) -> EVSet:
        """`table`: (EV index, plane) for every path of the pair."""
        evs = [EV(i, plane, EVState.DENIED if i in denied else EVState.GOOD,
                  probe_required=policy.probe_successes) for i, plane in table]
        ev_set = cls(evs, policy, rng)
        if any(e.plane < 0 for e in evs):
            raise ValueError("a plane number is negative")
        if any(e.index < 0 for e in evs):
            raise ValueError("an EV index is negative")
        ev_set._by_index = [None] * (max((e.index for e in evs), default=-1) + 1)
        for e in evs:
            ev_set._by_index[e.index] = e
        planes = max((e.plane for e in evs), default=-1) + 1
        ev_set._plane_inflight, ev_set._ev_cursor = [0] * planes, [0] * planes
        for e in evs:
            ev_set._planes.setdefault(e.plane, []).append(e)
        for plane in ev_set._planes:
            ev_set._fill_plane(plane)
        ev_set._refresh()
        if not ev_set._plane_order:
            raise ValueError("no usable EV: every path of this pair is DENIED")
        return ev_set

    def _per_plane_target(self, plane: int) -> int:
        want = self.policy.active_per_plane
        n = len(self._planes[plane])
        return n if want is None else min(want, n)

    def _fill_plane(self, plane: int, replacing: EV | None = None) -> None:
        """Activate GOOD spares until the plane has its target of active EVs (a seeded pick,
        so that QPs sharing a leaf do not all leave the same spine idle). A spare starts
        fresh: what it measured before it was last active (a hot path's srtt) would have it
        swapped out again at its first sample. It starts from the RTT of `replacing`, the EV
        whose place it takes: RACK then judges its packets by it, where an EV with no RTT
        waits for the ACK timeout (mrc.py). Measured on the simnet with a plane gone: a spare
        with no RTT took the dead plane's whole share into the void for a full ACK timeout,
        and the QP's goodput fell to a tenth."""
        in_plane = self._planes[plane]
        missing = self._per_plane_target(plane) - sum(e.active for e in in_plane)
        spares = [e for e in in_plane if not e.active and e.state is EVState.GOOD]
        if missing > 0 and spares:
            for e in self.rng.sample(spares, min(missing, len(spares))):
                e.active = True
                e.start_afresh(replacing)

    def _refresh(self) -> None:
        self._bad = [e for e in self.evs if e.state is EVState.ASSUMED_BAD]
        self._usable = {}
        for plane, in_plane in self._planes.items():
            good = [e for e in in_plane if e.active and e.state is EVState.GOOD]
            if good:
                self._usable[plane] = good
        self._plane_order = sorted(self._usable)

    def _apply(self, ev: EV, event: EVEvent, now: float, reason: str) -> None:
        """One event of the state machine, and what entering the new state entails."""
        old = ev.state
        new = next_state(old, event)
        if new is old:
            return
        ev.state = new
        self.transitions.append(Transition(now, ev.index, old, new, reason))
        if new is EVState.ASSUMED_BAD:
            if ev.good_since and now - ev.good_since < FLAP_MEMORY and not ev.clean_return:
                ev.probe_required = min(PROBE_RUN_GROWTH * ev.probe_required, MAX_PROBE_RUN)
            else:
                ev.probe_required = self.policy.probe_successes
            ev.runs_broken = 0
            ev.active = False
            ev.condemned += 1
            ev.bad_since = now
            ev.probe_run = 0
            ev.outstanding.clear()
            ev.overdue.clear()
            ev.next_probe = now + self.policy.probe_interval
        elif new is EVState.GOOD:
            ev.good_since = now
            ev.clean_return = ev.runs_broken == 0
            ev.outstanding.clear()
            ev.overdue.clear()
            ev.recent_packets = ev.recent_losses = 0.0  # the losses that condemned it are
            # judged: counting them again would condemn it at its next random loss
            ev.silent_losses, ev.silent_queued = 0, False  # so is its silence: the probes
            # were answered
        else:  # DENIED
            ev.active = False
        self._fill_plane(ev.plane, replacing=None if new is EVState.GOOD else ev)
        self._refresh()

    # ---- choosing ----
    def pick(self, now: float, avoid: int | None = None) -> EV:
        """The EV for the next packet: the usable plane with the fewest packets in flight (ties
        in turn, or at random), then that plane's next EV that is not held off (nor `avoid`).
        A plane whose every EV is held off (marked or trimmed: congested) is passed over for
        the next, but only while that one has at most HELD_SHIFT x its packets in flight (+1),
        so that a burst of marks on one plane does not move the QP's whole window onto the
        others' ports; then its next held EV in turn is taken. A resend (`avoid`: the EV it
        was lost on) also passes over suspect EVs, whose last loss was silent, as if held off:
        a write waits for its resends, and such a path may be dead."""
        order = self._plane_order
        if not order:
            raise RuntimeError("no usable EV")
        n = len(order)
        rand = self.policy.spray == "random"
        resend = avoid is not None
        avoid_ev = NO_EV if avoid is None else avoid  # a native int: compared at every EV
        start = self.rng.randrange(n) if rand else self._plane_cursor % n
        load = self._plane_inflight
        loads = [load[order[(start + k) % n]] for k in range(n)]  # in turn from `start`
        taken = 0  # a bit per turn already tried
        held = None  # the least loaded plane whose every EV is held off
        for _ in range(n):
            k = _least(loads, taken)
            taken |= 1 << k
            plane = order[(start + k) % n]
            if (held is not None and
                    load[plane] > HELD_SHIFT * load[order[(start + held) % n]] + 1):
                break
            ev = self._pick_in(plane, now, avoid_ev, rand, held_ok=False, resend=resend)
            if ev is not None:
                if not rand:
                    self._plane_cursor = (start + k + 1) % n
                return ev
            if held is None and any(e.index != avoid_ev for e in self._usable[plane]):
                held = k
        if held is not None:
            ev = self._pick_in(order[(start + held) % n], now, avoid_ev, rand, held_ok=True,
                              resend=resend)
            if ev is not None:
                if not rand:
                    self._plane_cursor = (start + held + 1) % n
                return ev
        return self._usable[order[start]][0]  # only `avoid` is usable: use it anyway

    def _pick_in(self, plane: int, now: float, avoid: int, rand: bool,
                 held_ok: bool, resend: bool) -> EV | None:
        """The plane's next usable EV in turn (or at random) that is not held off (for a
        `resend`, nor suspect), else (if `held_ok`) the first such one, never `avoid`; None if
        there is none."""
        usable = self._usable[plane]
        m = len(usable)
        first = self.rng.randrange(m) if rand else self._ev_cursor[plane] % m
        held, held_j = None, 0
        for j in range(m):
            ev = usable[(first + j) % m]
            if ev.index == avoid:
                continue
            if ev.holdoff_until <= now and not (resend and ev.silent_losses):
                held, held_j = ev, j
                break
            if held is None and held_ok:
                held, held_j = ev, j
        if held is not None and not rand:  # the next pick starts after this one, so that
            self._ev_cursor[plane] = (first + held_j + 1) % m  # a held EV's turns spread
        return held

    def launched(self, ev: EV) -> None:
        """A packet of the QP went out on `ev` (new, or resent there)."""
        ev.inflight += 1
        self._plane_inflight[ev.plane] += 1

    def landed(self, index: int) -> None:
        """A packet sent on EV `index` left flight: acknowledged, or resent elsewhere."""
        ev = self.by_index(index)
        if ev is not None and ev.inflight > 0:
            ev.inflight -= 1
            self._plane_inflight[ev.plane] -= 1

    def plane_inflight(self) -> dict[int, int]:
        """Packets in flight per plane (what the spray balances)."""
        return {plane: self._plane_inflight[plane] for plane in self._planes}

    def usable_indexes(self) -> list[int]:
        return [e.index for plane in self._plane_order for e in self._usable[plane]]

    def good_count(self) -> int:
        return sum(e.state is EVState.GOOD for e in self.evs)

    def by_index(self, index: int) -> EV | None:
        evs = self._by_index
        return evs[index] if 0 <= index < len(evs) else None

    def index_limit(self) -> int:
        """One past the highest EV index: the length of a list by EV index."""
        return len(self._by_index)

    def _known(self, index: int) -> EV:
        """The EV of an index this set gave out (KeyError otherwise, as the dict's was)."""
        ev = self.by_index(index)
        if ev is None:
            raise KeyError(index)
        return ev

    # ---- health ----
    def explained_by_congestion(self, ev: EV, now: float, rtt: float | None,
                                delay_high: bool) -> bool:
        """A loss on `ev` is congestion if the QP's queueing delay is above its target, or the
        EV itself was ECN-marked or trimmed within the last `congestion_memory_rtts` RTTs."""
        if delay_high:
            return True
        if ev.last_congestion < 0:
            return False
        memory = self.policy.congestion_memory_rtts * (rtt or 0.0)
        return now - ev.last_congestion <= max(memory, self.policy.congestion_holdoff)

    def stands_out(self, ev: EV) -> bool:
        """Its recent losses are more than chance at the QP's other usable EVs' loss rate
        allows (a Poisson bound, LOSS_SIGMAS deviations, at least LOSS_MIN losses): a lossy
        path, not random loss that every path sees alike."""
        if ev.recent_losses < LOSS_MIN:
            return False
        others = [e for plane in self._plane_order for e in self._usable[plane] if e is not ev]
        packets = sum(e.recent_packets for e in others)
        rate = sum(e.recent_losses for e in others) / packets if packets else 0.0
        expected = ev.recent_packets * max(rate, LOSS_RATE_FLOOR)
        return bool(ev.recent_losses > expected + LOSS_SIGMAS * math.sqrt(expected))

    def on_loss(self, index: int, now: float, reason: str, rtt: float | None = None,
                delay_high: bool = False, gap: bool = False) -> EVEvent | None:
        """A packet on this EV was lost (`gap`: a GAP NACK; else a timeout). Returns the
        event applied: CONGESTION (held off), LOSS_AT_FLOOR (the floor kept it), LOSS
        (condemned), or None when a gap loss does not make the EV stand out from the others
        (random loss on every path: condemning would only shrink the spray), unless the
        policy condemns every untrimmed loss (`untrimmed_loss: condemn`)."""
        ev = self.by_index(index)
        if ev is None or ev.state is not EVState.GOOD:
            return None
        if gap:
            self._judged(ev, lost=True)
        if self.explained_by_congestion(ev, now, rtt, delay_high):
            ev.congestion_losses += 1
            ev.holdoff_until = max(ev.holdoff_until,
                                   now + max(self.policy.congestion_holdoff,
                                             self.policy.hot_rtts * (rtt or 0.0)))
            self._apply(ev, EVEvent.CONGESTION, now, reason)
            return EVEvent.CONGESTION
        if gap and self.policy.untrimmed_loss == "judge" and not self.stands_out(ev):
            ev.random_losses += 1
            return None
        ev.losses += 1
        if self.good_count() <= self.policy.ev_min_active:
            ev.floor_holds += 1
            self._apply(ev, EVEvent.LOSS_AT_FLOOR, now, reason)
            return EVEvent.LOSS_AT_FLOOR
        self._apply(ev, EVEvent.LOSS, now, reason)
        return EVEvent.LOSS

    def on_rtt(self, index: int, rtt: float, now: float = 0.0,
               target: float | None = None) -> None:
        """An RTT sample of this EV: the copy an ACK answered, by its echoed send time
        (mrc.py). `target`: the QP's queueing delay target, for the hot-path rule (None: not
        applied)."""
        ev = self.by_index(index)
        if ev is not None:
            ev.srtt, ev.rttvar = smoothed(ev.srtt, ev.rttvar, rtt)
            ev.rtt_samples += 1
            if target is not None and ev.rtt_samples >= HOT_SAMPLES and ev.active:
                self._cool_if_hot(ev, now, target)

    def _cool_if_hot(self, ev: EV, now: float, target: float) -> None:
        """The hot-path rule by delay. An active EV whose smoothed RTT is more than `target`
        above the best of its plane's other active EVs crosses a queue they do not (another
        flow's, on one spine -> leaf link). It is swapped for a spare of its plane that was not
        itself swapped out in the last HOT_MEMORY_RTTS of the plane's best RTT, and stays GOOD,
        a spare: this is congestion, not failure. With no such spare it is held off for
        `hot_rtts` of its RTTs, so that its siblings take its turns. The spare starts with no
        RTT of its own (RACK waits the ACK timeout for its first packets rather than judge
        them by another path's RTT) and is judged after HOT_SAMPLES samples. By delay, not by
        marks: in the incast every EV's ACKs came back marked alike (by the receiver's own
        port), while one spine -> leaf link held the TCP incast's bursts, and a plane sprayed
        in turn ran at the pace of that path."""
        assert ev.srtt is not None
        best = None
        for e in self._usable.get(ev.plane, ()):
            if e is not ev and e.srtt is not None and e.rtt_samples >= HOT_SAMPLES and (
                    best is None or e.srtt < best):
                best = e.srtt
        if best is None or ev.srtt - best <= target or ev.state is not EVState.GOOD:
            return
        spares = [e for e in self._planes[ev.plane]
                  if not e.active and e.state is EVState.GOOD and e.hot_until <= now]
        if not spares:
            ev.holdoff_until = max(ev.holdoff_until, now + self.policy.hot_rtts * ev.srtt)
            return
        spare = self.rng.choice(spares)
        ev.active = False
        ev.hot_swaps += 1
        ev.hot_until = now + HOT_MEMORY_RTTS * best
        spare.active = True
        spare.start_afresh()
        self._refresh()

    def queued(self, index: int, base_rtt: float | None, target: float) -> bool:
        """Its own smoothed RTT is more than `target` above the QP's base RTT: a queue on
        this path (the QP's average may not show it when the other paths are fast)."""
        ev = self.by_index(index)
        return (ev is not None and ev.srtt is not None and base_rtt is not None
                and ev.srtt - base_rtt > target)

    def on_delivered(self, index: int, sent_at: float, packet: bool = True,
                     acked_after: float | None = None) -> None:
        """A packet sent on this EV at `sent_at` arrived (acknowledged): the path works.
        `packet`: one acknowledged packet, a sample of the EV's loss share (an ACK covers
        several: sampling per ACK counted a 1%-lossy path's losses 4 times against its
        deliveries, with coalescing every 4 packets). False: the send time of an ACK's
        trigger, already counted. `acked_after`: seconds from its send to its ACK."""
        ev = self.by_index(index)
        if ev is None:
            return
        if acked_after is not None:
            ev.acked_after = acked_after
        if sent_at > ev.delivered_sent:
            ev.delivered_sent = sent_at
        ev.silent_losses, ev.silent_queued = 0, False
        if packet:
            self._judged(ev, lost=False)

    @staticmethod
    def _judged(ev: EV, lost: bool) -> None:
        keep = 1.0 - 1.0 / LOSS_WINDOW
        ev.recent_packets = ev.recent_packets * keep + 1.0
        ev.recent_losses = ev.recent_losses * keep + (1.0 if lost else 0.0)

    def on_timeouts(self, timed_out: list[tuple[int, float, str]], now: float, window: float,
                    rtt: float | None = None, queued: Collection[int] = ()) -> bool:
        """Packets that timed out together: (EV index, its send time, reason). Returns True
        when they are a stall: with the timeouts of the last `window` s (one timeout), more
        than half the active EVs timed out (only active ones count: the late timeouts of a
        spare swapped out or of an EV condemned earlier say nothing of the host), and the
        receiver is silent (no EV delivered a
        packet sent after the newest of them: a plane or a leaf gone silences half the EVs
        while the others deliver, and that is a path failure, not a stall). A stall condemns
        nothing and gives back the EVs its earlier timeouts condemned. Otherwise each timeout
        is judged on its own: on an EV that delivered a packet sent after it, as a gap
        (against the other EVs); on a silent EV, as a loss (condemned unless congestion or
        the floor explain it). `queued`: the EVs whose own queueing delay is above target,
        which excuses their own timeouts only."""
        for index, _, _ in timed_out:
            ev = self.by_index(index)
            if ev is not None:
                ev.timeouts += 1
                ev.last_timeout = now
        active = {e.index for plane in self._plane_order for e in self._usable[plane]}
        active |= {e.index for e in self.evs if e.state is EVState.ASSUMED_BAD
                   and e.timeout_condemned >= 0 and now - e.timeout_condemned <= window}
        recent = [e for e in self.evs if e.index in active
                  and e.last_timeout >= 0 and now - e.last_timeout <= window]
        newest = max(sent_at for _, sent_at, _ in timed_out)
        heard = any(e.delivered_sent > newest for e in self.evs)
        if len(recent) >= 2 and 2 * len(recent) > len(active) and not heard:
            for e in recent:
                e.stall_timeouts += 1
                if e.state is EVState.ASSUMED_BAD and now - e.timeout_condemned <= window:
                    self._apply(e, EVEvent.STALL, now, f"{len(recent)} of {len(active)} "
                                "active EVs timed out within one timeout: a host stall")
            return True
        for index, event in zip((i for i, _, _ in timed_out), self._judge_losses(
                [(i, sent_at, reason, i in queued) for i, sent_at, reason in timed_out],
                now, rtt, silent_condemns=True)):
            if event is EVEvent.LOSS:
                self._known(index).timeout_condemned = now
        return False

    def on_losses_found(self, lost: list[tuple[int, float, str, bool]], now: float,
                        rtt: float | None = None, queued: bool = False) -> None:
        """Packets RACK found lost together (a later packet arrived): (EV index, send time,
        reason, the EV's queueing delay above target). Each is judged like a gap, against
        the QP's other EVs, until its EV has been silent for SILENT_LOSSES losses in a row:
        then the EV is dead and condemned, whatever the other EVs lose, unless congestion
        (its own delay, recent marks) explains the loss: RACK passes come milliseconds
        apart, and a queue can hold a path's packets that long (the incast's victim). Judged
        only against the pool, dead EVs of a plane gone are judged against each other and
        none stands out. `queued`: the QP as a whole sees queueing delay above its target; no
        plane is then taken for gone (_condemn_if_gone)."""
        self._judge_losses(lost, now, rtt, silent_condemns=False, queued=queued)

    def _judge_losses(self, lost: list[tuple[int, float, str, bool]], now: float,
                      rtt: float | None, silent_condemns: bool,
                      queued: bool = False) -> list[EVEvent | None]:
        """Losses found together (a timer pass, a RACK pass): (EV index, send time, reason,
        delay high). A silent EV (nothing sent after the packet came back on it) counts one
        loss in a row per call (one burst is one event); at SILENT_LOSSES it is dead. A loss
        on an EV that delivered later packets is random: judged like a gap. A silent, not yet
        dead EV's loss condemns it if `silent_condemns` (a timeout: the spec's rule), else it
        is judged like a gap (RACK: a path that lost one packet and has not yet delivered the
        next is not silent for long). A dead EV's timeout is condemned whatever the delay
        says (SILENT_LOSSES timeouts outlast any queue); a dead EV's RACK loss is not, when
        congestion explains it."""
        first_sent: dict[int, float] = {}
        for i, sent_at, _, _ in lost:
            ev = self.by_index(i)
            if ev is not None and ev.delivered_sent <= sent_at:
                first_sent[i] = min(sent_at, first_sent.get(i, sent_at))
        for index, sent_at in first_sent.items():
            fell = self._known(index)
            if not fell.silent_losses:
                fell.silent_since = sent_at
            fell.silent_losses += 1
        events: list[EVEvent | None] = []
        for index, sent_at, reason, delay_high in lost:
            ev = self.by_index(index)
            if ev is None:
                events.append(None)
                continue
            works = ev.delivered_sent > sent_at
            dead = not works and ev.silent_losses >= SILENT_LOSSES
            if not works and self.explained_by_congestion(ev, now, rtt, delay_high):
                ev.silent_queued = True
            events.append(self.on_loss(
                index, now, reason + (" (random: the path delivered later packets)"
                                      if works else "") +
                (f" ({ev.silent_losses} losses in a row, nothing delivered: dead, not "
                 "congested)" if dead else ""),
                rtt=rtt, delay_high=delay_high and not (dead and silent_condemns),
                gap=works or not (dead or silent_condemns)))
        for plane in set() if queued else {self._known(i).plane for i in first_sent}:
            self._condemn_if_gone(plane, now, rtt)
        return events

    def _condemn_if_gone(self, plane: int, now: float, rtt: float | None) -> None:
        """Every active EV of `plane` (at least two) silent, while another plane delivered
        packets sent after each of them fell silent: what they share (the plane's NIC port,
        its leaf or the plane) is gone, unless congestion explains any of their losses (a
        queue toward the receiver's leaf can hold every path of a plane). All are condemned
        now, not each after SILENT_LOSSES losses of its own, and so are the plane's spares,
        which share it too: a spare swapped in would take the plane's share of packets into
        the void. Probes bring them all back with the plane. The floor (ev_min_active)
        holds as for any loss."""
        usable = self._usable.get(plane, [])
        if len(usable) < 2 or not all(e.silent_losses and not e.silent_queued
                                      and not self.explained_by_congestion(e, now, rtt, False)
                                      for e in usable):
            return
        since = max(e.silent_since for e in usable)
        if not any(e.delivered_sent > since for p, others in self._usable.items()
                   if p != plane for e in others):
            return
        reason = (f"every active EV of plane {plane} silent while another plane delivers: "
                  "the plane's port, leaf or plane is gone")
        for ev in list(usable):
            self.on_loss(ev.index, now, reason, rtt=rtt)
        for ev in self._planes[plane]:
            if ev.state is not EVState.GOOD or ev in usable:
                continue
            if self.good_count() <= self.policy.ev_min_active:
                ev.floor_holds += 1
                self._apply(ev, EVEvent.LOSS_AT_FLOOR, now, reason)
            else:
                self._apply(ev, EVEvent.LOSS, now, reason + " (a spare of that plane)")

    def on_feedback(self, index: int, marked: bool) -> None:
        """An ACK for a packet on this EV: update its share of marked ACKs."""
        ev = self.by_index(index)
        if ev is not None:
            ev.marked += MARK_GAIN * ((1.0 if marked else 0.0) - ev.marked)

    def is_hot(self, ev: EV) -> bool:
        others = [e.marked for plane in self._plane_order for e in self._usable[plane]
                  if e is not ev]
        return bool(others) and ev.marked > self.policy.hot_ratio * max(
            sum(others) / len(others), MARK_FLOOR)

    def on_congestion(self, index: int, now: float, trimmed: bool,
                      rtt: float | None = None) -> None:
        ev = self.by_index(index)
        if ev is None:
            return
        ev.last_congestion = now
        if trimmed:
            ev.trims += 1
            ev.marked += MARK_GAIN * (1.0 - ev.marked)  # a trim is a mark its ACK never bears
        else:
            ev.ecn += 1
        holdoff = self.policy.congestion_holdoff
        if rtt and self.is_hot(ev):
            holdoff = max(holdoff, self.policy.hot_rtts * rtt)
        ev.holdoff_until = max(ev.holdoff_until, now + holdoff)
        self._apply(ev, EVEvent.CONGESTION, now, "ECN mark or trim")

    # ---- probes of ASSUMED_BAD EVs ----
    def probe_timeout(self, ev: EV) -> float:
        """How long a probe of `ev` waits for its reply before it counts as lost: srtt + 4
        rttvar (RFC 6298's RTO) of its probes, or before any is answered of its data, and at
        least the policy's probe timeout (PROBE_TIMEOUT_INTERVALS probe intervals where it
        gives none). A fixed 4 intervals (20 ms) lost every probe of a path slower than that,
        and it never came back."""
        policy = self.policy
        floor = (PROBE_TIMEOUT_INTERVALS * policy.probe_interval if policy.probe_timeout is None
                 else policy.probe_timeout)
        srtt, rttvar = ((ev.probe_srtt, ev.probe_rttvar) if ev.probe_srtt is not None
                        else (ev.srtt, ev.rttvar))
        return floor if srtt is None else max(floor, srtt + RTTVAR_WEIGHT * rttvar)

    def probes_due(self, now: float) -> list[int]:
        """EVs to probe now. A probe unanswered after `probe_timeout` is lost: the EV's run
        of answered probes starts again. Its reply, if it comes after all, still counts
        (`overdue`, the newest LATE_PROBES_KEPT): it gives the probe RTT the timeout lacked."""
        due = []
        for ev in list(self._bad):  # _probe_lost may change the states
            if ev.state is not EVState.ASSUMED_BAD or ev.next_probe > now:
                continue
            timeout = self.probe_timeout(ev)
            stale = [s for s, sent in ev.outstanding.items() if now - sent >= timeout]
            for s in stale:
                ev.overdue[s] = ev.outstanding.pop(s)
            for s in sorted(ev.overdue)[:-LATE_PROBES_KEPT]:
                del ev.overdue[s]
            if stale:
                self._probe_lost(ev, now)
            ev.next_probe = now + self.policy.probe_interval
            due.append(ev.index)
        return due

    def probe_sent(self, index: int, seq: int, now: float) -> None:
        ev = self.by_index(index)
        if ev is not None:
            ev.outstanding[seq] = now
            ev.probes_sent += 1

    def _probe_lost(self, ev: EV, now: float) -> None:
        """A probe of `ev` went unanswered: the run starts again, and a run it broke (the
        path had answered since it went bad or last lost one) doubles the run it needs."""
        if ev.probe_run and ev.state is EVState.ASSUMED_BAD:
            ev.runs_broken += 1
            ev.probe_required = min(PROBE_RUN_GROWTH * ev.probe_required, MAX_PROBE_RUN)
        ev.probe_run = 0
        self._apply(ev, EVEvent.PROBE_LOST, now, "probe lost")

    def on_probe_reply(self, index: int, seq: int, now: float) -> float | None:
        """A reply to probe `seq` on this EV: its RTT, or None if it matches no probe we sent
        on that EV (duplicated or foreign replies change nothing). A reply to a probe that
        timed out counts too. Earlier probes of the same EV still unanswered are lost (a path
        keeps control packets in order)."""
        ev = self.by_index(index)
        if ev is None:
            return None
        sent = ev.outstanding.pop(seq, None)
        if sent is None:
            sent = ev.overdue.pop(seq, None)
        if sent is None:
            return None
        rtt = now - sent
        ev.probes_answered += 1
        if len(ev.probe_rtts) < MAX_PROBE_RTTS:
            ev.probe_rtts.append(rtt)
        ev.probe_srtt, ev.probe_rttvar = smoothed(ev.probe_srtt, ev.probe_rttvar, rtt)
        for s in [s for s in ev.overdue if s < seq]:
            del ev.overdue[s]  # counted lost already
        earlier = [s for s in ev.outstanding if s < seq]
        for s in earlier:
            del ev.outstanding[s]
        if earlier:
            self._probe_lost(ev, now)
        ev.probe_run += 1
        if ev.state is EVState.ASSUMED_BAD and ev.probe_run >= ev.probe_required:
            self._apply(ev, EVEvent.PROBES_ANSWERED, now,
                        f"{ev.probe_run} probes answered in a row")
        elif ev.state is EVState.ASSUMED_BAD:
            ev.next_probe = now  # the run's next probe leaves at once: paced by replies
        return rtt

    def next_probe_time(self) -> float | None:
        first = None  # asked at every kick of an MRC QP: nothing to scan while all are GOOD
        for e in self._bad:
            if first is None or e.next_probe < first:
                first = e.next_probe
        return first

    # ---- the controller ----
    def deny(self, index: int, now: float, reason: str = "denied") -> None:
        ev = self.by_index(index)
        if ev is not None:
            self._apply(ev, EVEvent.DENY, now, reason)

    def allow(self, index: int, now: float, reason: str = "allowed") -> None:
        ev = self.by_index(index)
        if ev is not None:
            self._apply(ev, EVEvent.ALLOW, now, reason)
