"""The NTP-style offset, with samples made by hand: a server whose clock runs a known amount
ahead, exchanges with known one-way delays, the minimum-RTT sample kept."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from testbed.cluster.network import ClusterNetwork
from testbed.errors import EnvironmentProblem
from testbed.fabric.clock import ClockOffset, bound_ns, offset_of

MS = 1_000_000
US = 1_000


def exchange(sent: int, ahead: int, there: int, held: int, back: int) -> tuple[int, ...]:
    """A request sent at `sent` (runner clock) to a server `ahead` ns ahead, `there` ns on
    the way, answered after `held` ns, `back` ns on the way back."""
    t1 = sent
    t2 = sent + there + ahead
    t3 = t2 + held
    t4 = sent + there + held + back
    return (t1, t2, t3, t4)


def test_symmetric_delays_give_the_exact_offset():
    got = offset_of([exchange(1000 * MS, ahead=250 * US, there=40 * US, held=5 * US,
                              back=40 * US)])
    assert got == ClockOffset(offset_ns=250 * US, rtt_ns=80 * US, samples=1)
    assert got.error_ns == 40 * US and got.worst_ns() == 290 * US


def test_a_server_behind_gives_a_negative_offset():
    got = offset_of([exchange(5 * MS, ahead=-3 * MS, there=100 * US, held=0, back=100 * US)])
    assert got.offset_ns == -3 * MS and got.rtt_ns == 200 * US


def test_the_least_delayed_sample_wins_and_asymmetry_stays_within_half_its_rtt():
    samples = [
        exchange(0, ahead=1 * MS, there=900 * US, held=10 * US, back=50 * US),  # queued going
        exchange(10 * MS, ahead=1 * MS, there=30 * US, held=10 * US, back=50 * US),  # best
        exchange(20 * MS, ahead=1 * MS, there=60 * US, held=10 * US, back=700 * US),
    ]
    got = offset_of(samples)
    assert got.rtt_ns == 80 * US and got.samples == 3
    # (30 - 50) / 2 = -10 us off the true 1 ms: within the sample's error of 40 us
    assert got.offset_ns == 1 * MS - 10 * US
    assert abs(got.offset_ns - 1 * MS) <= got.error_ns


def test_samples_that_run_backwards_are_dropped():
    bad = (100, 500, 400, 300)  # the server answered before it read the request
    good = exchange(1000, ahead=0, there=10, held=1, back=10)
    assert offset_of([bad, good]).rtt_ns == 20
    with pytest.raises(ValueError, match="no usable clock sample among 1"):
        offset_of([bad])


def test_the_bound_is_a_tenth_of_the_ack_timeout_at_most_a_millisecond():
    assert bound_ns(0.004) == 400 * US
    assert bound_ns(0.5) == 1 * MS


class FakeSession:
    def __init__(self, clock: ClockOffset) -> None:
        self._clock = clock

    def clock(self) -> ClockOffset:
        return self._clock


def check(clocks: dict[str, ClockOffset], bound: int) -> SimpleNamespace:
    fake = SimpleNamespace(sessions={n: FakeSession(c) for n, c in clocks.items()},
                           clocks={}, clock_bound_ns=bound)
    ClusterNetwork._check_clocks(fake)  # type: ignore[arg-type]
    return fake


def test_a_server_off_by_more_than_the_bound_is_refused_with_the_fix():
    ok = ClockOffset(offset_ns=20 * US, rtt_ns=100 * US, samples=16)
    off = ClockOffset(offset_ns=-2 * MS, rtt_ns=120 * US, samples=16)
    assert check({"a": ok}, 1 * MS).clocks == {"a": ok}
    with pytest.raises(EnvironmentProblem) as err:
        check({"a": ok, "b": off}, 1 * MS)
    assert err.value.exit_code == 3
    text = str(err.value)
    assert "the clock of server b is -2000 us from this machine's (+-60 us, RTT 120 us)" in text
    assert "within 1000 us" in text and "chrony" in text and "PTP" in text


def test_an_offset_too_uncertain_to_tell_is_refused_too():
    # |offset| 0.9 ms is inside 1 ms, but its RTT of 400 us leaves up to 1.1 ms possible
    vague = ClockOffset(offset_ns=900 * US, rtt_ns=400 * US, samples=16)
    with pytest.raises(EnvironmentProblem, match="server a"):
        check({"a": vague}, 1 * MS)
