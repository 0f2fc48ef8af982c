"""The EV health state machine, written as data: (state, event) -> next state.

States are the spec's `mrc_ctl_ev_state` (OCP MRC, mrc_ctl.h): GOOD, ASSUMED_BAD, DENIED.
The events are what the transport and the controller can observe about one EV:

- LOSS: a packet on it was lost and nothing explains the loss by congestion (a GAP NACK or a
  timeout with no recent ECN mark or trim on that EV and no rising delay);
- LOSS_AT_FLOOR: the same, while only `ev_min_active` EVs are GOOD: the spec's floor says no
  further EV is marked ASSUMED_BAD then, so the EV stays as it is;
- CONGESTION: an ECN mark, a trim, or a loss explained by congestion; a busy path is slowed
  down or skipped for a while (evs.py), never condemned;
- PROBE_LOST: a probe of the EV went unanswered (resets its run of answered probes);
- PROBES_ANSWERED: enough probes in a row came back (the re-admission hysteresis, evs.py);
- DENY / ALLOW: the controller's MODIFY_EV_STATE to DENIED, or back to GOOD;
- STALL: the timeout that condemned it was one of a burst across more than half the QP's
  active EVs within one timeout: the host or the receiver stalled, no path failed, so an EV
  condemned by that burst is GOOD again (evs.py).

Whatever the table does not change stays: `next_state` returns the same state. The table is
complete (every state x every event has an entry) and a unit test checks each cell.
"""
from __future__ import annotations

from enum import Enum
from typing import Final


class EVState(str, Enum):
    GOOD = "GOOD"
    ASSUMED_BAD = "ASSUMED_BAD"
    DENIED = "DENIED"


class EVEvent(str, Enum):
    LOSS = "LOSS"
    LOSS_AT_FLOOR = "LOSS_AT_FLOOR"
    CONGESTION = "CONGESTION"
    PROBE_LOST = "PROBE_LOST"
    PROBES_ANSWERED = "PROBES_ANSWERED"
    DENY = "DENY"
    ALLOW = "ALLOW"
    STALL = "STALL"


G, B, D = EVState.GOOD, EVState.ASSUMED_BAD, EVState.DENIED
E: Final = EVEvent

TRANSITIONS: Final[dict[tuple[EVState, EVEvent], EVState]] = {
    (G, E.LOSS): B,
    (G, E.LOSS_AT_FLOOR): G,
    (G, E.CONGESTION): G,
    (G, E.PROBE_LOST): G,
    (G, E.PROBES_ANSWERED): G,
    (G, E.DENY): D,
    (G, E.ALLOW): G,
    (G, E.STALL): G,
    (B, E.LOSS): B,
    (B, E.LOSS_AT_FLOOR): B,
    (B, E.CONGESTION): B,
    (B, E.PROBE_LOST): B,
    (B, E.PROBES_ANSWERED): G,
    (B, E.DENY): D,
    (B, E.ALLOW): G,
    (B, E.STALL): G,
    (D, E.LOSS): D,
    (D, E.LOSS_AT_FLOOR): D,
    (D, E.CONGESTION): D,
    (D, E.PROBE_LOST): D,
    (D, E.PROBES_ANSWERED): D,  # a DENIED EV is never probed; a stray reply changes nothing
    (D, E.DENY): D,
    (D, E.ALLOW): G,
    (D, E.STALL): D,  # the controller's word stands
}


def next_state(state: EVState, event: EVEvent) -> EVState:
    return TRANSITIONS[(state, event)]
