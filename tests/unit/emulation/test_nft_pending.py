"""An action's nftables changes are done when every node it touches has reported."""
from __future__ import annotations

from testbed.emulation.nft_workers import Pending


def test_an_action_without_nftables_changes_is_done_at_once():
    """A `routed` or `degrade` action touches no node's ruleset: waiting for it must not cost
    the injector's 30 s timeout (each such apply did)."""
    assert Pending(0).wait(0)


def test_done_when_the_last_node_reports_skipped_or_applied():
    p = Pending(2)
    p.report(1.0, 1.5, None)
    assert not p.wait(0)
    p.report(None, None, None)  # the workload ended first: skipped, still reported
    assert p.wait(0) and p.skipped == 1 and p.finished == [1.5]
