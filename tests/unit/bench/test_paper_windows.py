"""The paper bench's fault windows, in the run's emulated seconds."""
from __future__ import annotations

import pytest

from bench.paper import windows
from testbed.scenario import parse

FAULTS = ("faults:\n"
          "  - {at: %s, kind: link_down, target: {plane: 0, leaf: 0, spine: 0}, duration: %s}\n"
          "background: [{pattern: elephant, src: h0, dst: h3, at: %s, duration: %s}]\n")


def test_windows_are_emulated_seconds():
    # 100 Gbit/s over 100 Mbit/s: D = 1,000
    real = parse("name: w\nfabric: {real_rate: 100Gbit}\n"
                 + FAULTS % ("1ms", "2ms", "0.5ms", "4ms"), "t")
    spans, end = windows(real)
    assert [x for span in spans for x in span] == pytest.approx([1.0, 3.0, 0.5, 4.5])
    assert end == pytest.approx(4.5)
    emulated = parse("name: w\n" + FAULTS % ("1", "2", "0.5", "4"), "t")
    assert windows(emulated) == (spans, end)
