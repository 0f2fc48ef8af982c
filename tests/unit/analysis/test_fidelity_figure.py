"""The link-lateness CCDF from link_gaps.parquet rows, hand-computed."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from analysis import figures
from tests.unit.made_runs import run_meta


def rows(kind: str, counts: list[int], edges=(1.0, 100.0, math.inf)) -> list[dict]:
    return [{"kind": kind, "node": "h0", "ifname": "e", "bucket": b, "edge_pct": e, "gaps": n}
            for b, (e, n) in enumerate(zip(edges, counts, strict=True))]


def test_ccdf_is_the_share_later_than_each_edge():
    # two ports of one kind summed: 90 + 10 on time, 5 + 3 up to 100%, 1 + 1 beyond
    gaps = pd.DataFrame(rows("host", [90, 5, 1]) + rows("host", [10, 3, 1]))
    c = figures.link_gap_ccdf(gaps).set_index("edge_pct")
    assert c.loc[1.0, "ccdf"] == pytest.approx(10 / 110)  # later than 1%: 8 + 2
    assert c.loc[100.0, "ccdf"] == pytest.approx(2 / 110)  # later than one packet time
    assert c.loc[math.inf, "ccdf"] == 0 and (c["total"] == 110).all()


def test_kinds_apart_and_empty_ones_left_out():
    gaps = pd.DataFrame(rows("host", [1, 1, 0]) + rows("fabric", [0, 0, 0]))
    c = figures.link_gap_ccdf(gaps)
    assert set(c["kind"]) == {"host"}
    assert figures.link_gap_ccdf(gaps[gaps["kind"] == "fabric"]).empty


def test_summary_says_each_runs_verdict_loud_when_not_faithful():
    from types import SimpleNamespace

    from analysis import summary

    def view(label: str, fidelity: dict | None) -> SimpleNamespace:
        return SimpleNamespace(label=label, run=SimpleNamespace(meta=run_meta(fidelity=fidelity)))

    text = summary.fidelity([
        view("mrc", {"verdict": "faithful", "reasons": []}),
        view("rocev2", {"verdict": "not faithful", "reasons": ["links kept pace in 90%"]}),
        view("old", None)])
    assert text.splitlines() == [
        "# fidelity mrc: faithful",
        "# fidelity rocev2: NOT FAITHFUL - links kept pace in 90% (these numbers measure the "
        "CPU, not the network)",
        "# fidelity old: not judged (a run made before the monitor)"]


def test_the_cpu_panel_draws_steal_where_the_run_recorded_it():
    """A VM whose host ran other guests shows it in the plot, not only in the verdict."""
    import matplotlib
    matplotlib.use("Agg")
    cpu = pd.DataFrame({"time": [0.0, 1.0, 2.0], "busy": [0.5, 0.6, 0.5],
                        "softirq": [0.1, 0.1, 0.1], "steal": [0.2, 0.3, 0.25],
                        "psi_some": [None, None, None]})
    fig = figures.fidelity(pd.DataFrame(), cpu, pd.DataFrame(), None, 0.0, 2.0, "run")
    right = fig.axes[1]
    steal = [line for line in right.get_lines() if "steal" in str(line.get_label())]
    assert len(steal) == 1 and list(steal[0].get_ydata()) == [20.0, 30.0, 25.0]
    older = figures.fidelity(pd.DataFrame(), cpu.drop(columns="steal"), pd.DataFrame(), None,
                             0.0, 2.0, "an older run")
    assert not any("steal" in str(line.get_label()) for line in older.axes[1].get_lines())
