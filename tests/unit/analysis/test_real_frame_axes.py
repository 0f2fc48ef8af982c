"""Figures of a run with a real fabric carry its frame on second axes: emulated time / D, rate
x D; a run without one gets none."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from analysis import figures


def _secondary(fig) -> list:
    """The secondary axes matplotlib attached to the figure's axes (child axes)."""
    return [c for ax in fig.axes for c in ax.child_axes]


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_cct_in_the_real_frame_on_top():
    """400 ms emulated at D = 4,000 is 100 us of the real fabric."""
    fig = figures.cct_cdf({"mrc": pd.Series([0.4, 0.5])}, "t", dilation=4_000)
    (top,) = _secondary(fig)
    assert top.get_xlabel() == "real fabric (us; emulated / 4,000)"
    f, _ = top._functions
    assert f(400.0) == pytest.approx(100.0)  # the primary axis is in ms here
    assert _secondary(figures.cct_cdf({"mrc": pd.Series([0.4, 0.5])}, "t")) == []


def test_goodput_gives_real_times_and_rates():
    """2 s emulated at D = 4,000 is 500 us; 100 Mbit/s emulated is 400 Gbit/s."""
    s = pd.Series([100e6 / 8, 100e6 / 8], index=[0.0, 2.0])  # bytes/s
    fig = figures.goodput({"mrc": s}, pd.DataFrame(columns=["label", "start", "end"]), None,
                          "t", dilation=4_000)
    labels = {c.get_xlabel() or c.get_ylabel(): c for c in _secondary(fig)}
    top = labels["real fabric (us; emulated / 4,000)"]
    right = labels["real fabric (Gbit/s; emulated x 4,000)"]
    assert top._functions[0](2.0) == pytest.approx(500.0)
    assert right._functions[0](100.0) == pytest.approx(400.0)  # the primary is in Mbit/s
