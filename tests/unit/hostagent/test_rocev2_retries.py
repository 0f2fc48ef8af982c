"""What counts as a RoCEv2 retry and what starts its timer over, as soft-RoCE's completer has it
(drivers/infiniband/sw/rxe/rxe_comp.c): a NAK acknowledges the PSNs below the one it names and
starts a retry that counts like a timeout, once per retry sequence; a CNP is no response and
leaves the timer alone. Also the RC QP's timeout unit, and a QP without a base RTT."""
from __future__ import annotations

import pytest

from hostagent.protocol import wire
from hostagent.protocol.qp import (
    QPConfig,
    WriteDone,
    timeout_seconds,
    timeout_unit,
)
from hostagent.protocol.rocev2 import NoBaseRtt, RoceQP, dcqcn

T = 0.010  # s: the ACK timeout
MSS = 256
RETRIES = 3  # retry_cnt: retries at the fixed interval T, none doubling


PACED = 1e-6  # s: the pacing lets a few packets out at a time; all ten leave within 10 us


def sender(retries: int = RETRIES) -> RoceQP:
    """A QP with two writes out: PSNs 0-1 (write 0), then 2-9 (write 1), all sent by 10 us."""
    cfg = QPConfig(mss=MSS, max_cwnd=64 * 1024, timeout=T, linear_cnt=retries, exp_cnt=0,
                   base_rtt=1e-3)
    qp = RoceQP(1, 2, memoryview(bytearray(0)), cfg, 1)
    qp.post_write(0, memoryview(bytes(2 * MSS)), 0, None, 0.0, peer=1)
    qp.post_write(1, memoryview(bytes(8 * MSS)), 2 * MSS, None, 0.0, peer=1)
    now = 0.0
    while qp.counters.data_sent < 10:
        qp.poll_transmit(now)
        now += PACED
    assert now < 10 * PACED + 1e-9
    return qp


def nak(psn: int) -> bytes:
    return wire.control_datagram(wire.NACK, wire.GAP, 0, 1, psn)


NOT_SENT = 1000  # the PSN an ACK says triggered it: none in flight, so no RTT sample


def ack(cum: int, flags: int = 0) -> bytes:
    """An ACK of the cumulative point, answering no packet in flight (no RTT sample to move
    the timeout)."""
    return wire.control_datagram(wire.ACK, flags, 0, 1, cum, 0, NOT_SENT, cum + 1, 0)


def cnp(cum: int) -> bytes:
    """How the notification point's CNP travels here: an ACK with the ECN flag."""
    return ack(cum, wire.ECN)


def timeouts_until_failed(qp: RoceQP, now: float) -> int:
    """Let the QP's timer run out until it fails; how many timeouts that took."""
    for _ in range(100):
        deadline = qp.next_deadline()
        assert deadline is not None and deadline > now
        now = deadline
        qp.on_timer(now)
        qp.poll_transmit(now)
        if qp.failed:
            return qp.counters.timeouts
    raise AssertionError("never failed")


def test_timeouts_alone_fail_after_the_retries():
    """retry_cnt retries, each after a timeout: the (retry_cnt + 1)-th timeout fails."""
    assert timeouts_until_failed(sender(), 0.0) == RETRIES + 1


def test_a_nak_acknowledges_the_psns_below_it_and_counts_as_a_retry():
    """A NAK naming PSN 2 completes write 0 (PSNs 0-1) and is the first retry: the QP fails
    at its retry_cnt-th timeout, one sooner than with timeouts alone."""
    qp = sender()
    qp.receive(nak(2), 0.001)
    assert [e.msg_id for e in qp.events if isinstance(e, WriteDone)] == [0]
    assert timeouts_until_failed(qp, 0.001) == RETRIES
    assert "NAK" not in (qp.failed or ""), "the timeout found the retries used up"


def test_naks_alone_use_up_the_retries_when_each_starts_a_sequence():
    """With no retry left after the NAK's own (retry_cnt 0), the NAK fails the QP at once."""
    qp = sender(retries=0)
    qp.receive(nak(2), 0.001)
    assert qp.failed is not None and "NAK" in qp.failed and qp.counters.timeouts == 0


def test_a_second_nak_within_a_retry_sequence_counts_nothing():
    """rxe's started_retry: a NAK while a retry is under way (no ACK since) is no new retry."""
    qp = sender()
    qp.receive(nak(2), 0.001)
    qp.receive(nak(4), 0.002)
    assert timeouts_until_failed(qp, 0.002) == RETRIES


def test_a_cnp_does_not_start_the_timer_over():
    """Packets sent at 0, a CNP (acknowledging nothing new) at 0.6 T: the timer expires at T,
    counted from the send."""
    qp = sender()
    qp.receive(cnp(0), 0.6 * T)
    assert qp.next_deadline() == pytest.approx(T, abs=10 * PACED)
    qp.on_timer(T + 10 * PACED)
    assert qp.counters.timeouts == 1


def test_an_ack_of_nothing_new_starts_the_timer_over():
    """The same ACK without the ECN flag (a duplicate's) is a response: the timer counts T from
    it, so nothing times out at T (the peer is alive)."""
    qp = sender()
    qp.receive(ack(0), 0.6 * T)
    qp.on_timer(T + 10 * PACED)
    assert qp.counters.timeouts == 0
    assert qp.next_deadline() == pytest.approx(1.6 * T)


def test_the_rc_qps_timeout_unit_is_4096_ns():
    """An RC QP's local ACK timeout is 4.096 us x 2^timeout (NCCL's 20: 4.29 s); MRC's is
    1.024 us x 2^timeout (the OCP MRC API's example 8: 262 us)."""
    assert timeout_seconds(20, timeout_unit("rocev2")) == pytest.approx(4.294967296)
    assert timeout_seconds(8, timeout_unit("mrc")) == pytest.approx(262.144e-6)


def test_a_qp_without_a_base_rtt_is_an_error():
    with pytest.raises(NoBaseRtt, match="base RTT"):
        dcqcn(QPConfig())
