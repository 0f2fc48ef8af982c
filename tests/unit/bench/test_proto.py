"""bench/proto.py's regimes: both deliver every byte, and the paced one lets one data packet
leave a QP per step."""
from __future__ import annotations

import pytest

from bench import proto

SIZE, MESSAGE = 256 * 1024, 64 * 1024


@pytest.mark.parametrize("transport", ["mrc", "rocev2"])
def test_the_paced_regime_takes_a_step_per_packet_and_lands_every_byte(transport):
    per_side = SIZE // proto.CFG.mss
    paced = proto.run(transport, SIZE, MESSAGE, paced=True)  # raises if a byte landed wrong
    assert paced["packets"] == 2 * per_side and paced["retransmits"] == 0
    assert paced["virtual_s"] >= per_side * proto.STEP  # at most one packet a step per side
    full = proto.run(transport, SIZE, MESSAGE)
    assert full["packets"] == 2 * per_side
    assert full["virtual_s"] < paced["virtual_s"] / 2  # whole windows a step
