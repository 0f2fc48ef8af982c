"""A quantity a run does not take from its real fabric scaled by the dilation, and why (pure).

Time dilation keeps a run similar to the real fabric it stands for only where every time is the
real one times D (testbed/fabric/frame.py). Where the testbed uses another value (a timer
compressed so that the run stays feasible, a constant chosen for the small regime), it says so
with a `Departure`, so that a run's results can list what is not the real fabric's.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Departure:
    """`quantity` (a scenario field or a constant's name), the value the specification or the
    scenario states in the real frame, the value used (in the real frame too), and why."""

    quantity: str
    stated: str
    used: str
    why: str
