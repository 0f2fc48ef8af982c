"""The EV-state figure draws one lane per EV that left GOOD, and counts the rest."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import pandas as pd

from analysis.figures import ev_timeline

NO_FAULTS = pd.DataFrame(columns=["source", "kind", "label", "start", "end"])


def segment(host: str, peer: int, ev: int, state: str, start: float) -> dict:
    return {"host": host, "peer": peer, "qpn": 7, "ev": ev, "plane": ev % 2, "state": state,
            "start": start, "end": start + 1.0}


def test_lanes_are_the_evs_with_a_segment_not_good():
    rows = [segment("h0", 1, ev, "GOOD", 0.0) for ev in range(4)]
    rows += [segment("h0", 1, 2, "ASSUMED_BAD", 1.0), segment("h0", 1, 2, "GOOD", 2.0),
             segment("h1", 0, 3, "DENIED", 0.0), segment("h1", 0, 0, "GOOD", 0.0)]
    fig = ev_timeline(pd.DataFrame(rows), NO_FAULTS, 3.0, "EV states", "mrc", {0: "h0", 1: "h1"})
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "h0→h1 qp7 EV2 (plane 0)", "h1→h0 qp7 EV3 (plane 1)"]
    assert ax.get_title() == ("EV states (2 of 6 EVs changed state; the others stayed as they "
                              "were)")


def test_only_the_first_lanes_are_drawn_and_the_title_says_so():
    rows = [segment("h0", 1, ev, "ASSUMED_BAD", 0.0) for ev in range(5)]
    fig = ev_timeline(pd.DataFrame(rows), NO_FAULTS, 1.0, "t", "mrc", {}, max_lanes=3)
    ax = fig.axes[0]
    assert len(ax.get_yticklabels()) == 3
    assert "5 of 5 EVs changed state, first 3 shown" in ax.get_title()


def test_a_transport_without_ev_states_says_so_instead_of_an_empty_box():
    """RoCEv2's paths table has one row per QP (all GOOD): no lane can ever be drawn."""
    rows = [segment(h, p, 0, "GOOD", 0.0) for h, p in (("h0", 1), ("h1", 0))]
    fig = ev_timeline(pd.DataFrame(rows), NO_FAULTS, 3.0, "EV states, rocev2", "rocev2", {})
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert texts == ["one path per QP: no EV states"]
    assert not ax.axison and ax.get_legend() is None
    assert ax.get_title() == "EV states, rocev2"
