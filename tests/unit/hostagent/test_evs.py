"""The EV set: the state machine as a table (every state x every event, through the EVSet's own
API), the ev_min_active floor, spares, spraying by plane, congestion that is not failure, and
probes that re-admit a path only after a run of answers."""
from __future__ import annotations

import heapq
import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostagent.protocol import evs
from hostagent.protocol.constants import (
    FLAP_MEMORY,
    HOT_MEMORY_RTTS,
    PROBE_TIMEOUT_INTERVALS,
    SILENT_LOSSES,
)
from hostagent.protocol.ev_states import TRANSITIONS, EVEvent, EVState
from hostagent.protocol.evs import EVPolicy, EVSet

G, B, D = EVState.GOOD, EVState.ASSUMED_BAD, EVState.DENIED
TABLE = [(i, i // 4) for i in range(8)]  # 8 EVs: 2 planes x 4 spines
RUN = 4  # probe_successes in these tests

# The expected table, written out by hand from the spec's states and the rules
# ev_states.py states in words.
EXPECTED = {
    G: {"LOSS": B, "LOSS_AT_FLOOR": G, "CONGESTION": G, "PROBE_LOST": G,
        "PROBES_ANSWERED": G, "DENY": D, "ALLOW": G, "STALL": G},
    B: {"LOSS": B, "LOSS_AT_FLOOR": B, "CONGESTION": B, "PROBE_LOST": B,
        "PROBES_ANSWERED": G, "DENY": D, "ALLOW": G, "STALL": G},
    D: {"LOSS": D, "LOSS_AT_FLOOR": D, "CONGESTION": D, "PROBE_LOST": D,
        "PROBES_ANSWERED": D, "DENY": D, "ALLOW": G, "STALL": D},
}


def evset(**kw) -> EVSet:
    policy = EVPolicy(**{"probe_interval": 0.001, "probe_successes": RUN, **kw})
    return EVSet.build(TABLE, policy, random.Random(0))


def put_in(s: EVSet, state: EVState, now: float = 1.0) -> None:
    if state is B:  # a timeout on a silent EV: what a stall may take back
        s.on_timeouts([(0, now - 0.5, "setup")], now, window=0.1)
    elif state is D:
        s.deny(0, now)
    assert s.by_index(0).state is state


def answer_probes(s: EVSet, ev: int, n: int, start: float, seq0: int = 0) -> float:
    """Send and answer n probes of `ev`, one per probe interval; the time after the last."""
    now = start
    for k in range(n):
        now += s.policy.probe_interval
        s.probe_sent(ev, seq0 + k, now)
        s.on_probe_reply(ev, seq0 + k, now + 0.0001)
    return now


def fire(s: EVSet, event: EVEvent, now: float = 2.0) -> None:
    """Produce `event` on EV 0 through the API a QP or controller uses."""
    if event is EVEvent.LOSS:
        s.on_loss(0, now, "loss")
    elif event is EVEvent.LOSS_AT_FLOOR:
        s.policy.ev_min_active = s.good_count()
        s.on_loss(0, now, "loss at the floor")
    elif event is EVEvent.CONGESTION:
        s.on_congestion(0, now, trimmed=True)
    elif event is EVEvent.PROBE_LOST:
        s.probe_sent(0, 99, now)
        s.probe_sent(0, 100, now)
        s.on_probe_reply(0, 100, now + 0.0001)  # 99 never answered: lost
    elif event is EVEvent.PROBES_ANSWERED:
        answer_probes(s, 0, RUN, now, seq0=200)
    elif event is EVEvent.DENY:
        s.deny(0, now)
    elif event is EVEvent.ALLOW:
        s.allow(0, now)
    elif event is EVEvent.STALL:  # the other EVs time out too, within one timeout of EV 0
        s.on_timeouts([(i, now - 0.5, "stall") for i in range(1, 8)], now, window=5.0)


def test_the_table_is_complete_and_as_specified():
    assert set(TRANSITIONS) == {(s, e) for s in EVState for e in EVEvent}
    for (state, event), new in TRANSITIONS.items():
        assert EXPECTED[state][event.value] is new, (state, event)


@pytest.mark.parametrize("state", [G, B, D])
@pytest.mark.parametrize("event", list(EVEvent))
def test_every_state_and_event_through_the_evset(state, event):
    s = evset()
    put_in(s, state)
    fire(s, event)
    assert s.by_index(0).state is EXPECTED[state][event.value]
    usable = s.usable_indexes()
    assert all(s.by_index(i).state is G for i in usable), "only GOOD EVs are sprayed on"


def test_the_floor_stops_condemning_and_nothing_bad_is_sprayed():
    """ev_min_active is a floor on GOOD EVs, not a licence to spray on bad
    ones."""
    s = evset(ev_min_active=6)
    for ev in (0, 1, 2):
        s.on_loss(ev, 1.0, "loss")
    states = [s.by_index(i).state for i in range(3)]
    assert states == [B, B, G], "two condemned, the third held by the floor of 6 GOOD"
    assert s.by_index(2).floor_holds == 1
    assert sorted(s.usable_indexes()) == [2, 3, 4, 5, 6, 7]
    picked = {s.pick(1.0 + k * 1e-6).index for k in range(100)}
    assert picked == {2, 3, 4, 5, 6, 7}


def test_a_condemned_ev_is_replaced_by_a_spare_of_its_plane():
    """With spares (3 active of 4 per plane), a condemned EV's plane keeps 3 active."""
    s = evset(active_per_plane=3)
    active0 = [e.index for e in s.evs if e.active and e.plane == 0]
    assert len(active0) == 3
    s.on_loss(active0[0], 1.0, "loss")
    now_active = [e.index for e in s.evs if e.active and e.plane == 0]
    assert len(now_active) == 3 and active0[0] not in now_active
    spare = (set(range(4)) - set(active0)).pop()
    assert spare in now_active


def test_spares_differ_between_qps():
    """The spare of each QP is a seeded pick: QPs sharing a leaf do not all idle one spine."""
    spares = set()
    for seed in range(20):
        s = EVSet.build(TABLE, EVPolicy(active_per_plane=3), random.Random(seed))
        spares.add(next(e.index for e in s.evs if not e.active and e.plane == 0))
    assert len(spares) > 1


@pytest.mark.parametrize("spray", ["round_robin", "random"])
def test_spraying_gives_each_plane_its_share_when_a_plane_loses_a_path(spray):
    """One plane-0 path out of 4 gone; each plane (NIC port) still gets half."""
    s = evset(spray=spray)
    s.on_loss(1, 1.0, "loss")
    n = 7000
    planes = Counter(s.pick(2.0).plane for _ in range(n))
    assert abs(planes[0] - n / 2) < 0.03 * n, planes


def test_a_loss_explained_by_congestion_holds_the_ev_off_instead():
    """A loss on an EV marked (or trimmed) within the last few RTTs, or while delay is
    above target, is congestion: held off, not condemned. Only unexplained loss condemns."""
    s = evset(congestion_memory_rtts=8.0, hot_rtts=4.0)
    rtt = 0.002
    s.on_congestion(0, 1.0, trimmed=False, rtt=rtt)
    assert s.on_loss(0, 1.0 + 5 * rtt, "timeout", rtt=rtt) is EVEvent.CONGESTION
    ev = s.by_index(0)
    assert ev.state is G and ev.congestion_losses == 1
    assert ev.holdoff_until >= 1.0 + 5 * rtt + 4 * rtt, "skipped as a hot path"
    assert s.on_loss(1, 1.0, "timeout", rtt=rtt, delay_high=True) is EVEvent.CONGESTION
    assert s.on_loss(0, 1.0 + 20 * rtt, "timeout", rtt=rtt) is EVEvent.LOSS, (
        "a mark long ago explains nothing")
    assert ev.state is B


def test_probes_re_admit_only_after_a_run_of_matched_answers():
    """One answered probe does not restore GOOD; replies must match a probe sent on that
    EV; a lost probe restarts the run; the RTTs are recorded."""
    s = evset()
    s.on_loss(0, 1.0, "loss")
    ev = s.by_index(0)
    s.probe_sent(0, 1, 1.001)
    assert s.on_probe_reply(0, 7, 1.0012) is None, "a reply to no probe of ours"
    assert s.on_probe_reply(1, 1, 1.0012) is None, "a reply on another EV"
    assert s.on_probe_reply(0, 1, 1.0015) == pytest.approx(0.0005)
    assert ev.state is B and ev.probe_run == 1
    now = answer_probes(s, 0, RUN - 2, 1.002, seq0=2)
    assert ev.state is B and ev.probe_run == RUN - 1
    s.probe_sent(0, 10, now + 0.001)  # lost: never answered
    s.probe_sent(0, 11, now + 0.002)
    s.on_probe_reply(0, 11, now + 0.0021)
    assert ev.state is B and ev.probe_run == 1, "a lost probe restarts the run"
    assert ev.probe_required == 2 * RUN, "a probe lost after answers: lossy, twice the run"
    now = answer_probes(s, 0, 2 * RUN - 2, now + 0.003, seq0=20)
    assert ev.state is B
    answer_probes(s, 0, 1, now, seq0=40)
    assert ev.state is G
    assert ev.probes_answered == len(ev.probe_rtts) == 1 + (RUN - 2) + 1 + (2 * RUN - 1)
    assert s.transitions[-1].reason == f"{2 * RUN} probes answered in a row"


def test_a_probe_unanswered_for_long_is_lost_when_the_next_is_due():
    s = evset()
    s.on_loss(0, 1.0, "loss")
    ev = s.by_index(0)
    now = answer_probes(s, 0, RUN - 1, 1.0)
    s.probe_sent(0, 50, now)
    for k in range(1, 6):
        s.probes_due(now + k * s.policy.probe_interval)
    assert ev.probe_run == 0 and 50 not in ev.outstanding


def lose_a_probe(s: EVSet, ev: int, now: float, seq: int) -> float:
    """Probe `seq` is lost: the next one (seq + 1) is answered, which shows it."""
    s.probe_sent(ev, seq, now)
    s.probe_sent(ev, seq + 1, now + 0.001)
    s.on_probe_reply(ev, seq + 1, now + 0.0011)
    return now + 0.0011


def test_a_lossy_path_that_comes_back_and_fails_again_needs_a_longer_run():
    """Hysteresis: a path that loses probes between answers is lossy; each broken run
    doubles the run it needs, and condemned again soon after it came back, it needs twice the
    run it passed. Only much later does it start afresh."""
    s = evset()
    s.on_loss(0, 1.0, "loss")
    now = answer_probes(s, 0, 1, 1.0)
    now = lose_a_probe(s, 0, now, seq=10)  # lost after an answer: a broken run
    assert s.by_index(0).probe_required == 2 * RUN
    now = answer_probes(s, 0, 2 * RUN - 1, now, seq0=20)
    assert s.by_index(0).state is G and not s.by_index(0).clean_return
    s.on_loss(0, now + 0.1, "loss again")
    assert s.by_index(0).probe_required == 4 * RUN
    now = answer_probes(s, 0, 2 * RUN, now + 0.1, seq0=100)
    assert s.by_index(0).state is B, "the last run's length is no longer enough"
    now = answer_probes(s, 0, 2 * RUN, now, seq0=200)
    assert s.by_index(0).state is G
    s.on_loss(0, now + FLAP_MEMORY + 0.1, "much later")
    assert s.by_index(0).probe_required == RUN, "a loss long after coming back starts afresh"


def test_a_port_that_flaps_cleanly_comes_back_after_the_base_run_each_time():
    """A path silent while its port is down (every probe lost), then answering a whole run
    (the port back up), came back cleanly: condemned again 0.2 s later (the port flaps), it
    needs the base run again, not twice it (measured in drill host-flap: 16, 32, then 64
    probes, 90, 180 and 370 ms, before a port flapping every 0.4 s was used again)."""
    s = evset()
    now = 1.0
    for cycle in range(4):
        s.on_loss(0, now, "the port went down")
        ev = s.by_index(0)
        assert ev.probe_required == RUN, f"cycle {cycle}"
        for k in range(3):  # down: every probe lost
            now += s.policy.probe_interval * (PROBE_TIMEOUT_INTERVALS + 1)
            s.probes_due(now)
            s.probe_sent(0, 1000 * cycle + k, now)
        now = answer_probes(s, 0, RUN, now, seq0=1000 * cycle + 10)  # up: a clean run
        assert ev.state is G and ev.clean_return, f"cycle {cycle}"
        now += 0.2


def test_a_run_of_probes_is_paced_by_the_replies():
    """Once a bad EV answers a probe, the next leaves at once (due now), not a probe interval
    later: a path back up is re-admitted within its run of round trips (the MRC paper: a few
    RTTs), where a fixed 5 ms interval made a run of 16 take 80 ms."""
    s = evset(probe_interval=0.005)
    s.on_loss(0, 1.0, "loss")
    assert s.probes_due(1.0) == [] and s.probes_due(1.005) == [0], "silent: one per interval"
    s.probe_sent(0, 1, 1.005)
    assert s.probes_due(1.0055) == [], "no second probe before the first is answered"
    s.on_probe_reply(0, 1, 1.0055)
    assert s.next_probe_time() == 1.0055 and s.probes_due(1.0055) == [0]
    now = 1.0055
    for seq in range(2, RUN + 1):  # the rest of the run, one round trip (0.5 ms) each
        s.probe_sent(0, seq, now)
        now += 0.0005
        s.on_probe_reply(0, seq, now)
        s.probes_due(now)
    assert s.by_index(0).state is G and now - 1.005 == pytest.approx(RUN * 0.0005)


def test_a_timeout_on_a_path_that_delivered_later_packets_is_judged_against_the_others():
    """A timed-out packet whose EV has since delivered a packet sent after it was a random
    loss, judged like a gap (with 1% loss on every link, condemning for such tail losses
    condemned healthy paths); only a silent EV is condemned at once, as the spec says."""
    s = evset()
    s.on_delivered(0, 1.5)  # EV 0 delivered a packet sent after the one that timed out
    assert not s.on_timeouts([(0, 1.0, "timed out"), (1, 1.0, "timed out")], 2.0, window=0.1)
    assert s.by_index(0).state is G and s.by_index(0).random_losses == 1
    assert s.by_index(1).state is B, "EV 1 delivered nothing since: silent, condemned"


def test_a_burst_of_timeouts_on_most_evs_is_a_stall_not_a_path_failure():
    """When the emulated host stalls, most EVs' packets time out at once. More than half the
    active EVs timing out within one timeout is a stall: nothing is condemned, and EVs
    condemned by the burst's first timeouts come back."""
    s = evset()
    window = 0.05
    assert not s.on_timeouts([(0, 0.9, "t"), (1, 0.9, "t")], 1.0, window)
    assert [s.by_index(i).state for i in (0, 1)] == [B, B], "2 of 8: two dead paths, maybe"
    assert s.on_timeouts([(i, 0.9, "t") for i in (2, 3, 4)], 1.01, window), "5 of 8: a stall"
    assert all(e.state is G for e in s.evs), [e.state for e in s.evs]
    assert [t.new for t in s.transitions[-2:]] == [G, G]
    assert "a host stall" in s.transitions[-1].reason
    assert all(s.by_index(i).stall_timeouts == 1 for i in range(5))
    # half is not more than half: a plane of 4 paths down is 4 dead paths
    s2 = evset()
    assert not s2.on_timeouts([(i, 0.9, "t") for i in range(4)], 1.0, window)
    assert [e.state for e in s2.evs[:4]] == [B, B, B, B]
    # timeouts further apart than one timeout are separate events
    s3 = evset()
    s3.on_timeouts([(i, 0.9, "t") for i in range(3)], 1.0, window)
    assert not s3.on_timeouts([(i, 1.5, "t") for i in (3, 4)], 1.0 + 2 * window, window)
    assert sum(e.state is B for e in s3.evs) == 5


def test_random_loss_makes_no_ev_stand_out_but_a_lossy_one_does():
    """The loss test of a gap: counts against the other EVs' pooled rate. Random loss at 2% on
    every EV condemns none over 20,000 packets; one EV at 5% among clean ones is found."""
    rng = random.Random(5)
    s = evset()
    condemned = 0
    for _ in range(20_000):
        ev = rng.randrange(8)
        if rng.random() < 0.02:
            condemned += s.on_loss(ev, 1.0, "gap", gap=True) is EVEvent.LOSS
        else:
            s.on_delivered(ev, 1.0)
    assert condemned == 0
    s = evset()
    for k in range(2_000):
        ev = k % 8
        if ev == 3 and rng.random() < 0.05:
            if s.on_loss(ev, 1.0, "gap", gap=True) is EVEvent.LOSS:
                break
        else:
            s.on_delivered(ev, 1.0)
    assert s.by_index(3).state is B
    assert all(e.state is G for e in s.evs if e.index != 3)
    # and one at 20% among EVs losing 2%: its rate is judged against theirs, packet by packet
    s = evset()
    for k in range(4_000):
        ev = k % 8
        if rng.random() < (0.2 if ev == 3 else 0.02):
            s.on_loss(ev, 1.0, "gap", gap=True)
        else:
            s.on_delivered(ev, 1.0)
        if s.by_index(3).state is B:
            break
    assert s.by_index(3).state is B, "found"
    assert all(e.state is G for e in s.evs if e.index != 3)


def test_a_silent_path_is_dead_whatever_the_delay_says():
    """Congestion delays packets; it does not swallow every one. Timeouts on an EV while the
    QP's delay is high are congestion, until SILENT_LOSSES of them come in a row with nothing
    delivered between: then the path is dead and condemned. A delivery in between starts the
    count again (a congested path still delivers)."""
    s = evset()
    for k in range(1, SILENT_LOSSES):
        s.on_timeouts([(0, k - 0.5, "t"), (0, k - 0.4, "t")], float(k), window=0.1,
                      queued={0})  # two packets of one burst: one timeout in a row
        assert s.by_index(0).state is G, f"timeout {k}: congestion, held off"
    s.on_delivered(0, SILENT_LOSSES - 0.9)  # it delivered: the count starts again
    for k in range(SILENT_LOSSES, 2 * SILENT_LOSSES - 1):
        s.on_timeouts([(0, k - 0.5, "t")], float(k), window=0.1, queued={0})
        assert s.by_index(0).state is G
    k = 2 * SILENT_LOSSES - 1
    s.on_timeouts([(0, k - 0.5, "t")], float(k), window=0.1, queued={0})
    ev = s.by_index(0)
    # held off per packet: 2 packets in each of the first bursts, 1 in each of the next
    assert ev.state is B and ev.congestion_losses == 3 * (SILENT_LOSSES - 1)


def test_a_path_silent_through_losses_rack_found_is_dead_whatever_the_others_lose():
    """A plane going down silences half a QP's EVs at once. RACK finds their losses (later
    packets arrived on the other plane); judged as gaps against a pool that holds the other
    dead EVs, none stood out, and each took 10-30 losses and 0.1-0.5 s to condemn (measured,
    plane-down drill). Losses RACK finds on an EV that delivers nothing in between count in a
    row, once per RACK pass; at SILENT_LOSSES the EV is dead. A delivery restarts the count,
    so a path that loses a packet now and then is still judged against the others."""
    s = evset()
    for k in range(SILENT_LOSSES):
        now = 1.0 + 0.01 * k
        for ev in (2, 3, 4, 5, 6, 7):  # the others keep delivering packets sent after these
            s.on_delivered(ev, now)
        assert all(s.by_index(i).state is G for i in range(8)), f"pass {k}: not yet"
        s.on_losses_found([(ev, now - 0.005, "rack", False) for ev in (0, 1)]
                          + [(0, now - 0.004, "rack", False)], now)  # two of EV 0: one pass
    assert [s.by_index(i).state for i in range(8)] == [B, B] + [G] * 6
    assert "dead" in s.transitions[-1].reason
    # a path that delivers between its losses is not silent: judged against the others
    s = evset()
    for k in range(3 * SILENT_LOSSES):
        now = 1.0 + 0.01 * k
        s.on_losses_found([(0, now - 0.005, "rack", False)], now)
        s.on_delivered(0, now - 0.001)
        for ev in range(1, 8):
            for _ in range(8):
                s.on_delivered(ev, now)
    ev0 = s.by_index(0)
    assert ev0.state is B and "dead" not in s.transitions[-1].reason, "stood out, not dead"
    assert ev0.random_losses >= 2


def test_a_plane_lost_with_its_spare_is_not_a_stall():
    """With spares (3 active of a plane's 4), a plane's 3 active EVs time out, are condemned,
    the spare takes over and times out too, within one timeout: 4 EVs of the 7 counted
    active, more than half. It is a path failure, not a host stall: the other plane
    delivered packets sent after all of them, so the receiver is not silent, and nothing
    condemned is given back."""
    s = evset(active_per_plane=3)
    plane0 = [e.index for e in s.evs if e.active and e.plane == 0]
    spare = next(e.index for e in s.evs if not e.active and e.plane == 0)
    for ev in range(4, 8):
        s.on_delivered(ev, 1.02)
    assert not s.on_timeouts([(i, 0.95, "t") for i in plane0], 1.02, window=0.05)
    assert all(s.by_index(i).state is B for i in plane0)
    assert s.by_index(spare).active
    for ev in range(4, 8):
        s.on_delivered(ev, 1.03)
    assert not s.on_timeouts([(spare, 0.99, "t")], 1.03, window=0.05), "not a stall"
    assert all(s.by_index(i).state is B for i in plane0 + [spare])
    # the same timeouts with nothing delivered after them: the receiver is silent, a stall
    s = evset(active_per_plane=3)
    assert not s.on_timeouts([(i, 0.95, "t") for i in plane0], 1.02, window=0.05)
    assert s.on_timeouts([(spare, 0.99, "t")], 1.03, window=0.05)
    assert all(e.state is G for e in s.evs)


def test_a_spare_taking_a_condemned_evs_place_starts_from_its_rtt():
    """An EV with no RTT of its own waits for the ACK timeout before RACK judges its packets
    (mrc.py). A spare that takes a condemned EV's place starts from that EV's RTT, so a
    spare as dead as the EV it replaces (a plane gone) is found by RACK within RTTs, not
    after a full ACK timeout with the plane's whole share of packets."""
    s = evset(active_per_plane=3)
    plane0 = [e.index for e in s.evs if e.active and e.plane == 0]
    spare = next(e.index for e in s.evs if not e.active and e.plane == 0)
    s.on_rtt(plane0[0], 0.004)
    s.on_loss(plane0[0], 1.0, "loss")
    assert s.by_index(spare).active and s.by_index(spare).srtt == 0.004
    assert s.by_index(spare).rttvar == s.by_index(plane0[0]).rttvar


def test_a_resend_passes_over_an_ev_whose_last_loss_was_silent():
    """A write waits for its resends. A resend is not put on an EV whose last loss was silent
    (nothing delivered on it since: it may be dead), unless nothing else is usable; new data
    still is (its losses are what condemns a dead EV). Measured in the leaf-down drill before
    this: a tail probe went to another EV of the dead plane and the write waited for the
    ACK timeout."""
    s = evset()
    s.on_losses_found([(1, 0.9, "rack", False)], 1.0)
    assert s.by_index(1).state is G and s.by_index(1).silent_losses == 1
    resent_on = {s.pick(1.0, avoid=0).index for _ in range(50)}
    assert 1 not in resent_on and resent_on == {2, 3, 4, 5, 6, 7}
    assert 1 in {s.pick(1.0).index for _ in range(50)}, "new data still goes there"
    s.on_delivered(1, 0.95)
    assert 1 in {s.pick(1.0, avoid=0).index for _ in range(50)}, "it delivered: not suspect"


def test_a_plane_whose_every_active_ev_falls_silent_is_condemned_at_once():
    """A NIC port, a leaf or a plane gone silences every EV of one plane at once, while the
    other plane delivers packets sent after them. Each EV's first silent loss is evidence
    enough then: all the plane's EVs are condemned together, not each after SILENT_LOSSES
    RACK passes of its own (in the leaf-down drill, 3 ring steps that each lost packets on
    them). Not when the other plane delivered nothing sent after them (a silent receiver),
    nor while one EV of the plane still delivers."""
    s = evset()
    for ev in range(4, 8):
        s.on_delivered(ev, 0.98)
    s.on_losses_found([(0, 0.99, "rack", False), (1, 0.99, "rack", False)], 1.0)
    assert all(s.by_index(i).state is G for i in range(8)), "2 and 3 have not fallen silent"
    s.on_losses_found([(2, 0.995, "rack", False), (3, 0.995, "rack", False)], 1.001)
    assert all(s.by_index(i).state is G for i in range(8)), "nothing sent after 0.995 arrived"
    s.on_delivered(5, 0.998)
    s.on_losses_found([(3, 0.996, "rack", False)], 1.002)
    assert [s.by_index(i).state for i in range(8)] == [B] * 4 + [G] * 4
    assert "plane 0" in s.transitions[-1].reason
    # the plane's spares share what is gone: condemned with it, not swapped in
    s = evset(active_per_plane=3)
    plane0 = [e.index for e in s.evs if e.active and e.plane == 0]
    spare = next(e.index for e in s.evs if not e.active and e.plane == 0)
    for ev in range(4, 8):
        s.on_delivered(ev, 1.0)
    s.on_losses_found([(i, 0.99, "rack", False) for i in plane0], 1.0)
    assert [s.by_index(i).state for i in range(4)] == [B] * 4
    assert s.by_index(spare).probes_sent == 0 and s.probes_due(1.01) == [0, 1, 2, 3]
    assert {s.by_index(i).plane for i in s.usable_indexes()} == {1}
    # one EV of the plane still delivering: no plane verdict, each EV on its own count
    s = evset()
    for ev in (3, 4, 5, 6, 7):
        s.on_delivered(ev, 1.0)
    s.on_losses_found([(i, 0.99, "rack", False) for i in (0, 1, 2)], 1.0)
    assert all(e.state is G for e in s.evs)


def test_a_queue_holding_every_path_of_a_plane_is_congestion_not_a_plane_gone():
    """The incast: TCP flows fill the queues toward the receiver's leaf on plane 0, and every
    plane-0 path of the victim goes quiet while plane 1 delivers. Its losses come with its
    own delay above target (or recent marks): congestion, held off, not a plane gone and not
    dead, however many RACK passes find them (measured: the plane rule and the RACK dead
    rule, with the delay overridden, condemned the victim's whole plane 0 twice per run and
    took it from 86% to 70% of its control)."""
    s = evset()
    for k in range(2 * SILENT_LOSSES):
        now = 1.0 + 0.002 * k
        for ev in range(4, 8):
            s.on_delivered(ev, now)
        s.on_losses_found([(i, now - 0.01, "rack", True) for i in range(4)], now)
    assert all(e.state is G for e in s.evs)
    assert all(s.by_index(i).congestion_losses == 2 * SILENT_LOSSES for i in range(4))
    # marks as recent as the losses explain them too
    s = evset()
    for ev in range(4):
        s.on_congestion(ev, 0.999, trimmed=False, rtt=0.002)
    for ev in range(4, 8):
        s.on_delivered(ev, 1.0)
    s.on_losses_found([(i, 0.99, "rack", False) for i in range(4)], 1.0, rtt=0.002)
    assert all(e.state is G for e in s.evs)


def test_no_plane_is_taken_for_gone_while_the_qp_sees_queueing_delay():
    """The incast again: the QP's own delay above target says a queue, not a cut, may be
    what holds a plane's paths. The plane verdict waits; each EV keeps its own count
    (measured: with this gate the victim kept 74% of its control, without it 62-70%)."""
    s = evset()
    for ev in range(4, 8):
        s.on_delivered(ev, 1.0)
    s.on_losses_found([(i, 0.99, "rack", False) for i in range(4)], 1.0, rtt=0.01,
                      queued=True)
    assert all(e.state is G for e in s.evs)
    s.on_losses_found([(i, 0.995, "rack", False) for i in range(4)], 1.001, rtt=0.01)
    assert [s.by_index(i).state for i in range(8)] == [B] * 4 + [G] * 4


def test_a_plane_with_more_packets_in_flight_waits_for_its_acks():
    """The plane chosen is the one with the fewest packets in flight (ties in turn):
    a plane whose packets come back slower takes fewer new ones, and one catches up as soon
    as its packets land."""
    s = evset()
    for _ in range(3):
        s.launched(s.by_index(0))  # plane 0: three packets out, not yet acknowledged
    assert [s.pick(1.0).plane for _ in range(1)] == [1]
    picks = []
    for _ in range(6):
        ev = s.pick(1.0)
        s.launched(ev)
        picks.append(ev.plane)
    assert picks.count(1) == 4 and picks.count(0) == 2, picks
    assert s.plane_inflight() == {0: 5, 1: 4}
    for _ in range(3):
        s.landed(0)
    assert s.plane_inflight() == {0: 2, 1: 4}
    assert s.pick(1.0).plane == 0


def test_a_plane_whose_paths_are_all_held_off_cedes_packets_within_a_bound():
    """When every EV of a plane is held off (marked, trimmed), the next plane takes its
    packets, but only up to 2x its packets in flight (+1): beyond that the held plane's EVs
    are used anyway: marks on one plane do not move the QP's whole window onto the others."""
    s = evset()
    for i in range(4):
        s.by_index(i).holdoff_until = 5.0  # plane 0: every path congested until t = 5
    s.launched(s.by_index(0))  # one packet in flight on plane 0
    planes = []
    for _ in range(5):
        ev = s.pick(1.0)
        s.launched(ev)
        planes.append(ev.plane)
    assert planes == [1, 1, 1, 1, 0], planes  # plane 1 while it has <= 2 x 1 + 1 in flight
    assert s.pick(6.0).plane == 0, "hold-off over: the plane with fewer in flight again"


def rtts(s: EVSet, samples: dict[int, float], now: float, target: float = 0.008,
         n: int = 4) -> None:
    """`n` RTT samples of each EV in `samples`, in turn in its order, at `now`: an EV listed
    last is judged once the others have their samples."""
    for _ in range(n):
        for ev, rtt in samples.items():
            s.on_rtt(ev, rtt, now, target)


def test_a_path_much_slower_than_its_planes_others_is_swapped_for_a_spare():
    """One active EV of plane 0 runs 30 ms behind its siblings (a TCP incast's queue on its
    spine): it is swapped for the plane's spare, stays GOOD (congestion is not failure) and is
    not swapped back in while the plane's best RTT times HOT_MEMORY_RTTS has not passed."""
    s = evset(active_per_plane=3)
    plane0 = [e.index for e in s.evs if e.active and e.plane == 0]
    spare = next(e.index for e in s.evs if not e.active and e.plane == 0)
    hot, calm = plane0[0], plane0[1:]
    rtts(s, dict.fromkeys(calm, 0.001) | {hot: 0.031}, now=1.0)
    assert not s.by_index(hot).active and s.by_index(hot).state is G
    assert s.by_index(spare).active and s.by_index(hot).hot_swaps == 1
    assert s.by_index(spare).srtt is None, "judged by its own RTT, not the hot one's"
    assert hot not in {s.pick(1.0).index for _ in range(40)}
    # now the spare is hot too: the one swapped out is still remembered, nothing to swap
    rtts(s, {spare: 0.031}, now=1.0 + HOT_MEMORY_RTTS * 0.001 / 2)
    assert s.by_index(spare).active and not s.by_index(hot).active
    # later it may come back in
    rtts(s, {spare: 0.031}, now=1.0 + 2 * HOT_MEMORY_RTTS * 0.001)
    assert s.by_index(hot).active and not s.by_index(spare).active


def test_a_plane_slow_alike_swaps_nothing_and_delay_within_the_target_is_not_hot():
    """The rule compares an EV with its plane's other EVs: a plane whose paths are all slow
    (its port shared, its leaf congested) has no better path to swap in; a path a few ms
    behind its siblings, within the delay target, is not hot."""
    s = evset(active_per_plane=3)
    plane0 = [e.index for e in s.evs if e.active and e.plane == 0]
    rtts(s, dict.fromkeys(plane0, 0.03) | dict.fromkeys(range(4, 8), 0.001), now=1.0)
    rtts(s, {plane0[0]: 0.037}, now=1.0)
    assert all(s.by_index(i).active for i in plane0)
    assert all(s.by_index(i).hot_swaps == 0 for i in range(8))


def test_a_hot_path_with_no_spare_is_held_off():
    """With every path of the plane active there is nothing to swap in: the hot EV is held
    off for hot_rtts of its RTTs, and its siblings take its turns."""
    s = evset()
    rtts(s, {1: 0.001, 2: 0.001, 3: 0.001, 0: 0.031}, now=1.0)
    assert s.by_index(0).active and s.by_index(0).holdoff_until >= 1.0 + 4 * 0.02
    assert 0 not in {s.pick(1.01).index for _ in range(40)}


def test_a_spare_brought_back_starts_fresh_and_is_not_swapped_again_at_once():
    """A hot EV swapped out keeps its 31 ms srtt as a spare. When an active EV of its plane is
    condemned and it takes that place, it starts from the condemned EV's RTT with no samples
    of its own: its first calm samples do not find it hot again."""
    s = evset(active_per_plane=3)
    plane0 = [e.index for e in s.evs if e.active and e.plane == 0]
    hot, calm = plane0[0], plane0[1:]
    rtts(s, dict.fromkeys(calm, 0.001) | {hot: 0.031}, now=1.0)
    assert not s.by_index(hot).active and s.by_index(hot).hot_swaps == 1
    spare = next(e.index for e in s.evs if e.active and e.plane == 0 and e.index not in calm)
    s.on_rtt(calm[0], 0.001)
    s.on_loss(calm[0], 2.0, "loss")
    back = s.by_index(hot)
    assert back.active and back.srtt == s.by_index(calm[0]).srtt and back.rtt_samples == 0
    rtts(s, {spare: 0.001, calm[1]: 0.001, hot: 0.001}, now=2.0)
    assert back.active and back.hot_swaps == 1 and back.holdoff_until <= 2.0


def test_only_active_evs_count_towards_a_stall():
    """A stall is more than half the active EVs timing out together. Timeouts of EVs outside
    the active set (a spare swapped out with packets still out, an EV condemned earlier)
    do not count: one active EV and two spares timing out is one path's timeout, which
    condemns that silent path."""
    s = evset(active_per_plane=2)
    active = s.usable_indexes()
    spares = [e.index for e in s.evs if not e.active]
    assert len(active) == 4
    assert not s.on_timeouts([(active[0], 0.9, "t")] + [(i, 0.9, "t") for i in spares[:2]],
                             1.0, window=0.05)
    assert s.by_index(active[0]).state is B


def probe_a_path(s: EVSet, ev: int, rtt: float, start: float, until: float) -> float | None:
    """Probe `ev` as a QP does (probes when due, each answered `rtt` later) from `start`: the
    time it is GOOD again, or None if not by `until`."""
    replies: list[tuple[float, int]] = []
    seq, now = 0, start
    while s.by_index(ev).state is B:
        due = s.next_probe_time()
        now = min(due if due is not None else until, replies[0][0] if replies else until)
        if now >= until:
            return None
        if replies and replies[0][0] <= now:
            s.on_probe_reply(ev, heapq.heappop(replies)[1], now)
            continue
        for index in s.probes_due(now):
            seq += 1
            s.probe_sent(index, seq, now)
            heapq.heappush(replies, (now + rtt, seq))
    return now


@pytest.mark.parametrize("rtt", [0.025, 0.030, 0.066])
def test_a_path_whose_probe_rtt_exceeds_the_fixed_probe_timeout_comes_back(rtt):
    """Probes every 5 ms, answered after 25, 30 or 66 ms (slow links: 8 hops of one MTU at
    10 Mbit/s are about 27 ms), the EV with no RTT of its own: its probes time out after 4
    intervals (20 ms) at first, their late replies still count and give the probe RTT, and
    the timeout follows it. The run completes within about one RTT plus RUN replies (RUN
    probes are out at once by then): 2 RTTs + RUN intervals."""
    s = evset(probe_interval=0.005)
    s.on_loss(0, 1.0, "loss")
    back = probe_a_path(s, 0, rtt, 1.0, until=6.0)
    assert back is not None and back - 1.0 <= 2 * rtt + RUN * 0.005, back
    assert s.by_index(0).runs_broken == 0, "no answered path is taken for lossy"


def test_a_late_reply_counts_and_the_probe_timeout_follows_the_probe_rtt():
    s = evset(probe_interval=0.005)
    s.on_loss(0, 1.0, "loss")
    ev = s.by_index(0)
    s.probe_sent(0, 1, 1.005)
    s.probes_due(1.005 + PROBE_TIMEOUT_INTERVALS * 0.005)  # timed out: counted lost
    assert 1 not in ev.outstanding
    assert s.on_probe_reply(0, 1, 1.035) == pytest.approx(0.030), "its late reply counts"
    assert ev.probe_run == 1
    s.probe_sent(0, 2, 1.035)
    s.probes_due(1.035 + 0.040)  # 40 ms: past 4 intervals, within 30 ms + 4 x 15 ms
    assert 2 in ev.outstanding and ev.probe_run == 1
    s.probes_due(1.035 + 0.091)
    assert 2 not in ev.outstanding and ev.probe_run == 0


@given(st.lists(st.integers(0, 5), min_size=1, max_size=12))
def test_planes_are_tried_by_load_ties_in_turn(loads: list[int]):
    # one turn at a time, the order a stable sort by load gives (the least loaded plane
    # first, ties in the turn's order from the cursor)
    taken, order = 0, []
    for _ in loads:
        k = evs._least(loads, taken)
        taken |= 1 << k
        order.append(k)
    assert order == sorted(range(len(loads)), key=loads.__getitem__)


def test_a_negative_plane_number_is_refused():
    # planes index the per-plane load: a negative one would count on another plane's
    with pytest.raises(ValueError, match="negative"):
        EVSet.build([(0, 0), (1, -1)], EVPolicy(), random.Random(0))


def test_a_negative_ev_index_is_refused():
    # EVs are looked up in a list by index: a negative one would find another EV
    with pytest.raises(ValueError, match="EV index is negative"):
        EVSet.build([(0, 0), (-1, 0)], EVPolicy(), random.Random(0))


def test_evs_are_found_by_index_and_unknown_indexes_are_not():
    s = EVSet.build([(0, 0), (3, 1)], EVPolicy(), random.Random(0))
    assert [s.by_index(i) for i in (0, 3)] == s.evs
    assert [s.by_index(i) for i in (1, 2, 4, 70_000)] == [None] * 4


@pytest.mark.parametrize("given, floor", [(None, 4 * 0.005), (0.5, 0.5)])
def test_a_probe_waits_at_least_the_policys_probe_timeout(given, floor):
    """Before any RTT is known, a probe waits the policy's probe timeout, or 4 probe intervals
    where it gives none."""
    s = EVSet.build(TABLE, EVPolicy(probe_interval=0.005, probe_timeout=given),
                    random.Random(0))
    assert s.probe_timeout(s.evs[0]) == floor
