"""Utilisation heatmaps: bins that each hold a telemetry sample, panels of bounded height."""
from __future__ import annotations

from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import numpy as np
import pandas as pd
import pytest

from analysis.figures import utilisation_heatmap
from analysis.report import RunView

NO_FAULTS = pd.DataFrame(columns=["source", "kind", "label", "start", "end"])


def rates(period: float, ports: int = 3, seconds: float = 6.0) -> pd.DataFrame:
    times = np.arange(period, seconds, period)
    return pd.DataFrame([{"label": f"port{p}", "time": t + 0.01 * p, "util": 0.5}
                         for p in range(ports) for t in times])


def test_the_bin_widens_to_whole_goodput_bins_that_hold_a_sample():
    bin_of = RunView.heatmap_bin
    assert bin_of(SimpleNamespace(port_rates=rates(0.63), bin_s=0.1)) == pytest.approx(0.7)
    assert bin_of(SimpleNamespace(port_rates=rates(0.1), bin_s=0.1)) == pytest.approx(0.1)
    # a sampler a little late (10 Hz, 105 ms apart) keeps the goodput's bins
    assert bin_of(SimpleNamespace(port_rates=rates(0.105), bin_s=0.1)) == pytest.approx(0.1)
    assert bin_of(SimpleNamespace(port_rates=rates(0.115), bin_s=0.1)) == pytest.approx(0.2)
    assert bin_of(SimpleNamespace(port_rates=rates(0.05), bin_s=0.1)) == pytest.approx(0.1)
    empty = pd.DataFrame(columns=["label", "time", "util"])
    assert bin_of(SimpleNamespace(port_rates=empty, bin_s=0.1)) == 0.1
    assert bin_of(SimpleNamespace(port_rates=pd.DataFrame(), bin_s=0.1)) == 0.1  # no columns


def grid(rows: int) -> pd.DataFrame:
    return pd.DataFrame(np.full((rows, 10), 0.5), index=[f"r{i}" for i in range(rows)])


def test_a_panel_of_many_rows_stops_growing_and_drops_its_labels():
    fig = utilisation_heatmap([("ports", grid(768), [0] * 768)], 0.5, NO_FAULTS, "t")
    # 0.16 in a row up to 48 rows, + 0.6 in for the panel, + 0.9 in for the figure
    assert fig.get_figheight() == pytest.approx(0.16 * 48 + 0.6 + 0.9)
    assert list(fig.axes[0].get_yticks()) == []
    fig = utilisation_heatmap([("planes", grid(4), [0, 1, 2, 3])], 0.5, NO_FAULTS, "t")
    assert fig.get_figheight() == pytest.approx(0.16 * 4 + 0.6 + 0.9)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["r0", "r1", "r2", "r3"]
