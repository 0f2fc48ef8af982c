"""NSCC's reaction to queueing delay without ECN (nscc.py): the window keeps its fair increase
above the target; only an ECN mark with the delay above target, or quick adapt, shrinks it."""
from __future__ import annotations

from hostagent.protocol.nscc import NsccCC, NsccConfig

MSS, TARGET, BASE = 1000, 0.002, 0.001


def window_after(delay: float, ecn: bool, quick_adapt: bool = False) -> tuple[float, float]:
    """(start, end) window over 200 ACKs of one MSS, every one `delay` above the base RTT."""
    cc = NsccCC(NsccConfig(MSS, init_cwnd=50 * MSS, max_cwnd=100 * MSS, target_delay=TARGET,
                           disable_qa=not quick_adapt))
    cc.on_ack(0.0, MSS, BASE, False)
    start = cc.cwnd
    for k in range(1, 201):
        cc.on_ack(k * 0.0005, MSS, BASE + delay, ecn)
    return start, cc.cwnd


def test_delay_past_twice_the_target_without_ecn_does_not_shrink_the_window():
    start, end = window_after(3 * TARGET, ecn=False)
    assert end >= start, (start, end)
    start, end = window_after(3 * TARGET, ecn=True)
    assert end < start / 2, "the same delay with ECN marks cuts it"


def test_quick_adapt_is_what_shrinks_it_past_its_threshold():
    start, end = window_after(5 * TARGET, ecn=False, quick_adapt=True)
    assert end < start, "past 4 x target, quick adapt sets the window to what was ACKed"
    start, end = window_after(3 * TARGET, ecn=False, quick_adapt=True)
    assert end >= start, "below its threshold it does not"
