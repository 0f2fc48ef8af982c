"""DCQCN's gains for a run: the paper's in the real frame, the small regime's otherwise (pure).

With fabric.real_rate a run lasts as many base RTTs as the real fabric's would, so DCQCN runs
with the values the DCQCN paper states (Zhu et al., SIGCOMM 2015; hostagent/protocol/dcqcn.py
`CONSTANTS`, the `_real` entries): g = 1/256, additive increase 0.1% of the line rate, hyper
increase 1%, a 10 MB byte counter. Without it, a run lasts a few hundred base RTTs, and at
those values alpha would stay near 1 and a cut rate would never come back: the small regime
keeps the values chosen for it, and each is reported as a departure from the paper's.
"""
from __future__ import annotations

from dataclasses import dataclass

from hostagent.protocol.dcqcn import CONSTANTS
from testbed.fabric.departures import Departure
from testbed.scenario import Scenario


@dataclass(frozen=True)
class DcqcnGains:
    """DcqcnConfig's gains: rate steps as shares of the line rate; byte_counter in bytes
    (0: DCQCN's own default, `byte_counter_periods` timer periods of line rate)."""

    g: float
    rate_ai: float
    rate_hai: float
    byte_counter: int


PAPER = DcqcnGains(CONSTANTS["g_real"].value, CONSTANTS["rate_ai_real"].value,
                   CONSTANTS["rate_hai_real"].value, int(CONSTANTS["byte_counter_real"].value))
SMALL_REGIME = DcqcnGains(CONSTANTS["g"].value, CONSTANTS["rate_ai"].value,
                          CONSTANTS["rate_hai"].value, 0)


def _share(x: float) -> str:
    return f"{x:.3g} of the line rate per step"


def gains(scenario: Scenario) -> tuple[DcqcnGains, list[Departure]]:
    """The gains a RoCEv2 run's DCQCN uses, and how they depart from the paper's."""
    if scenario.fabric.real_rate is not None:
        return PAPER, []
    why = "no fabric.real_rate (a run of a few hundred base RTTs): "
    counter = CONSTANTS["byte_counter_periods"]
    return SMALL_REGIME, [
        Departure("dcqcn.g", f"{PAPER.g:.4g}", f"{SMALL_REGIME.g:.4g}",
                  why + CONSTANTS["g"].source),
        Departure("dcqcn.rate_ai", _share(PAPER.rate_ai), _share(SMALL_REGIME.rate_ai),
                  why + CONSTANTS["rate_ai"].source),
        Departure("dcqcn.rate_hai", _share(PAPER.rate_hai), _share(SMALL_REGIME.rate_hai),
                  why + CONSTANTS["rate_hai"].source),
        Departure("dcqcn.byte_counter", f"{PAPER.byte_counter / 1e6:g} MB",
                  f"{counter.value:g} {counter.unit}", why + counter.source),
    ]
