"""The report's figures, drawn with matplotlib from what `metrics` computed.

Every figure must survive a grayscale printer and a paper's column: series differ by line
style, marker and hatch as well as colour, every axis names its unit, legends give the
sample counts, and times are seconds since the workload's start. `save` writes each figure
as PNG (for the HTML and quick looks) and PDF (vector, for papers).
"""
from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Any, TypedDict

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from .metrics import Percentile, percentiles, together

FORMATS = ("png", "pdf")
# One style per series, in order: colour-blind-safe colours that also differ in gray level,
# plus line style, marker and hatch, so that no series is told apart by colour alone.
STYLES = (
    {"color": "#0b4f8a", "linestyle": "-", "marker": "o", "hatch": "//"},
    {"color": "#e08214", "linestyle": "--", "marker": "s", "hatch": ".."},
    {"color": "#4d9221", "linestyle": ":", "marker": "^", "hatch": "xx"},
    {"color": "#7b3294", "linestyle": "-.", "marker": "D", "hatch": "\\\\"},
    {"color": "#bdbdbd", "linestyle": (0, (5, 1, 1, 1, 1, 1)), "marker": "v", "hatch": "oo"},
    {"color": "#252525", "linestyle": (0, (8, 2)), "marker": "P", "hatch": "--"},
)
_PCT_MARKERS = {50.0: "o", 99.0: "^", 99.9: "*"}


class _Fill(TypedDict):
    """How a bar or legend patch is filled: the keyword arguments of matplotlib's Patch."""

    facecolor: str
    hatch: str
    edgecolor: str


# EV states: GOOD light, ASSUMED_BAD dark and hatched, DENIED black, crossed
_STATE_STYLE: dict[str, _Fill] = {
    "GOOD": {"facecolor": "#e6e6e6", "hatch": "", "edgecolor": "#bbbbbb"},
    "ASSUMED_BAD": {"facecolor": "#555555", "hatch": "////", "edgecolor": "white"},
    "DENIED": {"facecolor": "black", "hatch": "xx", "edgecolor": "#888888"},
}
TIME_LABEL = "time since workload start (s)"
# Transports whose QPs spread over entropy values (EVs), each with a health state; a RoCEv2 QP
# is bound to one path, and its paths table has one row per QP with nothing that changes.
EV_TRANSPORTS = frozenset({"mrc"})
NO_EV_STATES = "one path per QP: no EV states"

plt.rcParams.update({"figure.dpi": 110, "savefig.dpi": 150, "font.size": 9,
                     "axes.grid": True, "grid.alpha": 0.3, "legend.fontsize": 8,
                     "hatch.linewidth": 0.6})


def style(i: int) -> dict:
    return STYLES[i % len(STYLES)]


def rate_unit(bits_per_s: float) -> tuple[float, str]:
    """Divisor and name of the unit that shows `bits_per_s` with a few digits: emulated links
    run at Mbit/s, real ones at Gbit/s."""
    for div, name in ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")):
        if bits_per_s >= div:
            return div, name
    return 1.0, "bit/s"


def time_unit(seconds: float) -> tuple[float, str]:
    """Multiplier and name of the unit that shows `seconds` with a few digits."""
    for scale, name in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if seconds >= scale:
            return 1 / scale, name
    return 1e9, "ns"


def real_time_axis(ax, dilation: float | None, emulated_max: float, axis: str = "x",
                   emulated_unit: float = 1.0) -> None:
    """With a real fabric (`dilation` D), a second axis on top (or right, `axis` "y") giving
    the emulated times of this one (`emulated_unit` per second) in the real frame: emulated
    / D, in the unit that suits the range."""
    if dilation is None or dilation == 1:
        return
    unit, name = time_unit(emulated_max / emulated_unit / dilation)
    factor = unit / (emulated_unit * dilation)
    functions = (lambda t: t * factor, lambda u: u / factor)
    label = f"real fabric ({name}; emulated / {dilation:,.0f})"
    if axis == "x":
        ax.secondary_xaxis("top", functions=functions).set_xlabel(label)
    else:
        ax.secondary_yaxis("right", functions=functions).set_ylabel(label)


def real_rate_axis(ax, dilation: float | None, emulated_max_bps: float, div: float) -> None:
    """With a real fabric, a right-hand axis giving this axis's rates (in bit/s over `div`)
    in the real frame: emulated x D."""
    if dilation is None or dilation == 1:
        return
    real_div, name = rate_unit(emulated_max_bps * dilation)
    factor = div * dilation / real_div
    ax.secondary_yaxis("right", functions=(lambda r: r * factor, lambda u: u / factor)
                       ).set_ylabel(f"real fabric ({name}; emulated x {dilation:,.0f})")


def save(fig: Figure, out_dir: Path, name: str) -> list[Path]:
    """Write `name`.png and `name`.pdf into `out_dir`; return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.{fmt}" for fmt in FORMATS]
    for path in paths:
        fig.savefig(path, bbox_inches="tight")
    return paths


def same_window(disturbances: pd.DataFrame, t_max: float) -> list[list[Any]]:
    """The disturbances (rows) grouped by kind and window (metrics.together), in the order
    they first appear: faults applied together (a blackhole on every leaf of a spine) get
    one shaded span and one label, not a stack of boxes over the plot."""
    rows = list(disturbances.itertuples())
    return [[rows[i] for i in group] for group in together(disturbances, t_max)]


def _mark_disturbances(ax, disturbances: pd.DataFrame, reroutes: pd.Series | None,
                       t_max: float, labels: bool = True) -> list[Artist]:
    """Shade each fault or background pattern (hatched span, its label at the top) and draw
    the baseline's reroutes as dotted lines; return legend handles for them."""
    handles: list[Artist] = []
    for i, group in enumerate(same_window(disturbances, t_max)):
        d, end = group[0], group[0].end if pd.notna(group[0].end) else t_max
        fault = d.source == "fault"
        ax.axvspan(d.start, end, facecolor="#999999" if fault else "#cccccc", alpha=0.25,
                   hatch="\\\\" if fault else "++", edgecolor="#666666", linewidth=0, zorder=0)
        ax.axvline(d.start, color="black", linewidth=0.8, zorder=1)
        if labels:
            more = f" and {len(group) - 1} more" if len(group) > 1 else ""
            ax.annotate(f"{d.label}{more}\n{d.start:.2f}–{end:.2f} s", xy=(d.start, 1),
                        xycoords=("data", "axes fraction"), xytext=(3, -3 - 22 * (i % 2)),
                        textcoords="offset points", va="top", fontsize=7,
                        bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "#888888",
                              "alpha": 0.85})
    if len(disturbances):
        kinds = set(disturbances["source"])
        if "fault" in kinds:
            handles.append(Patch(facecolor="#999999", alpha=0.4, hatch="\\\\", label="fault"))
        if "background" in kinds:
            handles.append(Patch(facecolor="#cccccc", alpha=0.4, hatch="++",
                                 label="background traffic"))
    if reroutes is not None and len(reroutes):
        for t in reroutes:
            ax.axvline(t, color="black", linestyle=(0, (1, 2)), linewidth=1.0, zorder=1)
        handles.append(Line2D([], [], color="black", linestyle=(0, (1, 2)),
                                  label="baseline routing converged"))
    return handles


def cct_cdf(samples: dict[str, pd.Series], title: str, dilation: float | None = None) -> Figure:
    """CDF of collective completion times per series, p50/p99/p99.9 marked on each curve; log
    x when the times span more than a factor of 20; the real fabric's times on top."""
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    every = np.concatenate([s.to_numpy(dtype=float) for s in samples.values()])
    unit, name = (1e3, "ms") if every.size and every.max() < 10 else (1.0, "s")
    notes: list[str] = []
    for i, (label, s) in enumerate(samples.items()):
        values = np.sort(s.to_numpy(dtype=float)) * unit
        if not values.size:
            continue
        st = style(i)
        y = np.arange(1, values.size + 1) / values.size
        ax.step(np.concatenate([[values[0]], values]), np.concatenate([[0], y]),
                where="post", color=st["color"], linestyle=st["linestyle"], linewidth=1.6,
                label=f"{label} (n={values.size} iterations)")
        for p in percentiles(values):
            ax.plot(p.value, p.q / 100, marker=_PCT_MARKERS[p.q], color=st["color"],
                    markeredgecolor="black", markersize=8, linestyle="none", zorder=3)
            if p.note and p.q != 50:
                notes.append(f"{label} p{p.q:g}: n={p.n} < {p.needed}")
    if every.size and every.max() / max(every.min(), 1e-12) > 20:
        ax.set_xscale("log")
    ax.set_xlabel(f"collective completion time ({name})")
    ax.set_ylabel("fraction of iterations")
    real_time_axis(ax, dilation, float(every.max()) * unit if every.size else 1.0,
                   emulated_unit=unit)
    ax.set_ylim(0, 1.05)
    ax.set_title(title)
    handles, _ = ax.get_legend_handles_labels()
    handles += [Line2D([], [], marker=m, color="gray", markeredgecolor="black",
                           linestyle="none", label=f"p{q:g}") for q, m in _PCT_MARKERS.items()]
    ax.legend(handles=handles, loc="lower right")
    fig.tight_layout()
    if notes:  # under the plot, where no curve can hide it
        fig.text(0.01, 0.0, "too few samples for a measured tail (value interpolated): " +
                 "; ".join(notes), va="top", fontsize=7, color="#444444", wrap=True)
    return fig


def goodput(totals: dict[str, pd.Series], disturbances: pd.DataFrame,
            reroutes: pd.Series | None, title: str,
            per_host: pd.DataFrame | None = None, dilation: float | None = None) -> Figure:
    """Goodput (bytes/s series, indexed by bin start) over time: one thick line per series,
    optionally each host's thin line, with every disturbance shaded and labelled; the real
    fabric's times on top and rates on the right."""
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    peak = max([float(s.max()) for s in totals.values()] + [1.0]) * 8
    div, unit = rate_unit(peak)
    t_max = max(float(s.index.max()) for s in totals.values()) if totals else 1.0
    if per_host is not None:
        for j, (host, s) in enumerate(per_host.items()):
            ax.step(s.index, s * 8 / div, where="post", color="#777777", linewidth=0.7,
                    linestyle=STYLES[(j + 1) % len(STYLES)]["linestyle"],
                    label=f"received by {host}")
    for i, (label, s) in enumerate(totals.items()):
        st = style(i)
        ax.step(s.index, s * 8 / div, where="post", color=st["color"],
                linestyle=st["linestyle"], linewidth=1.8, label=label)
    handles = _mark_disturbances(ax, disturbances, reroutes, t_max)
    ax.set_xlabel(TIME_LABEL)
    ax.set_ylabel(f"goodput ({unit})")
    real_time_axis(ax, dilation, t_max)
    real_rate_axis(ax, dilation, peak, div)
    ax.set_xlim(0, t_max)
    ax.set_ylim(0, None)
    ax.set_title(title)
    lines, _ = ax.get_legend_handles_labels()
    beside = 1.01 if dilation is None or dilation == 1 else 1.13  # past the real-rate axis
    ax.legend(handles=lines + handles, loc="upper left", bbox_to_anchor=(beside, 1),
              borderaxespad=0)
    fig.tight_layout()
    return fig


LABELLED_ROWS = 48  # heatmap rows a panel labels one by one, and grows with


def utilisation_heatmap(panels: list[tuple[str, pd.DataFrame, list]], bin_s: float,
                        disturbances: pd.DataFrame, title: str,
                        dilation: float | None = None) -> Figure:
    """One heatmap per panel (name, grid, a group key per row; rows: planes or ports;
    columns: time bins of `bin_s`) of the share of nominal link rate sent; a white line
    between rows of different groups (planes, host or fabric ports), faults as dashed
    lines. Past LABELLED_ROWS rows a panel drops its row labels (the group lines stay) and
    stops growing: 768 ports keep 1.6 pixels a row at 150 dpi, where a panel 0.16 in a row
    tall was 123 in (18,000 pixels) and took most of a 64-host report's time to write."""
    heights = [max(1.2, 0.16 * min(len(g), LABELLED_ROWS) + 0.6) for _, g, _ in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(7.5, sum(heights) + 0.9),
                             gridspec_kw={"height_ratios": heights}, sharex=True,
                             squeeze=False, layout="constrained")
    image = None
    for ax, (name, grid, groups) in zip(axes[:, 0], panels):
        t_end = len(grid.columns) * bin_s
        image = ax.imshow(grid.to_numpy(dtype=float), aspect="auto", interpolation="nearest",
                          cmap="viridis", vmin=0, vmax=1, extent=(0, t_end, len(grid), 0))
        ax.grid(False)
        labelled = len(grid) <= LABELLED_ROWS
        ax.set_yticks(np.arange(len(grid)) + 0.5 if labelled else [])
        ax.set_yticklabels([str(r) for r in grid.index] if labelled else [],
                           fontsize=7 if len(grid) > 12 else 8)
        ax.set_title(name, fontsize=9, loc="left")
        for y in [i for i in range(1, len(groups)) if groups[i] != groups[i - 1]]:
            ax.axhline(y, color="white", linewidth=2.5)  # between planes and port groups
        for d in disturbances.itertuples():
            for t in (d.start, d.end):
                if pd.notna(t):
                    ax.axvline(t, color="white", linestyle="--", linewidth=1.0)
                    ax.axvline(t, color="black", linestyle=(3, (3, 3)), linewidth=1.0)
    axes[-1, 0].set_xlabel(TIME_LABEL + f"; {bin_s:g} s bins")
    real_time_axis(axes[0, 0], dilation, max(len(g.columns) for _, g, _ in panels) * bin_s)
    assert image is not None  # a figure has at least one panel
    bar = fig.colorbar(image, ax=axes[:, 0].tolist(), extend="max", fraction=0.04, pad=0.01)
    bar.set_label("sent, share of nominal link rate")
    bar.set_ticks([0, 0.25, 0.5, 0.75, 1.0], labels=["0%", "25%", "50%", "75%", "100%"])
    fig.suptitle(title, fontsize=10)
    return fig


def busbw_bars(rows: pd.DataFrame, title: str) -> Figure:
    """Bus bandwidth per series (`rows`: label, busbw and ideal in GB/s, `ranks` each rank's
    busbw at its own loop time, `iterations` how many were timed): bars at nccl-tests' value
    (the ranks' mean time), each rank as a dot, the ideal as a bold line with its share."""
    fig, ax = plt.subplots(figsize=(max(3.6, 1.7 * len(rows)) + 1.6, 3.8))
    peak = max(float(rows["ideal"].max()), float(rows["busbw"].max()),
               max(max(r) for r in rows["ranks"])) * 8e9
    div, unit = rate_unit(peak)
    scale = 8e9 / div
    for i, r in enumerate(rows.itertuples()):
        st = style(i)
        ax.bar(i, r.busbw * scale, width=0.6, color=st["color"], alpha=0.75,
               hatch=st["hatch"], edgecolor="black")
        dots = np.asarray(r.ranks, dtype=float) * scale
        jitter = np.linspace(-0.15, 0.15, dots.size) if dots.size > 1 else np.zeros(1)
        ax.plot(i + jitter, dots, linestyle="none", marker=st["marker"],
                markersize=4 if dots.size <= 16 else 2.5, color="black", markerfacecolor="white")
        ax.hlines(r.ideal * scale, i - 0.38, i + 0.38, colors="black", linewidth=2.2)
        ax.annotate(f"ideal {r.ideal * scale:.3g} {unit}", (i, r.ideal * scale),
                    xytext=(0, 3), textcoords="offset points", ha="center", va="bottom",
                    fontsize=7)
        ax.annotate(f"{r.busbw * scale:.3g} {unit}\n{r.busbw / r.ideal:.0%} of ideal",
                    (i, r.busbw * scale / 2), ha="center", va="center", fontsize=8,
                    bbox={"boxstyle": "round,pad=0.2", "fc": "white", "alpha": 0.9})
    ax.set_xticks(range(len(rows)), [f"{r.label}\n(n={len(r.ranks)} ranks,\n"
                                     f"{r.iterations} iterations)" for r in rows.itertuples()])
    ax.set_xlim(-0.6, len(rows) - 0.4)
    ax.set_ylabel(f"bus bandwidth ({unit})")
    ax.set_ylim(0, peak / div * 1.15)
    # the legend sits right of the axes, so a long title is wrapped to the axes' width
    ax.set_title("\n".join(textwrap.wrap(title, int(12 * (fig.get_figwidth() - 1.6)))))
    ax.legend(handles=[Line2D([], [], color="black", linewidth=2.2,
                                  label="ideal (injection rate)"),
                       Line2D([], [], marker="o", color="black", markerfacecolor="white",
                                  linestyle="none", label="one rank, at its own\ntime per "
                                  "timed iteration")],
              loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0, fontsize=7)
    fig.tight_layout()
    return fig


def ev_timeline(segments: pd.DataFrame, disturbances: pd.DataFrame, t_end: float,
                title: str, transport: str, hosts: dict[int, str],
                max_lanes: int = 40, dilation: float | None = None) -> Figure:
    """One lane per EV that was not GOOD all along (state as hatched bars), faults shaded;
    `hosts` names the peer ranks. A transport without EV states (RoCEv2: one path per QP)
    gets that line instead of a plot; an MRC run without changes says so in the plot."""
    if transport not in EV_TRANSPORTS:  # not a box of lanes that could never be there
        fig, ax = plt.subplots(figsize=(7.5, 1.0))
        ax.axis("off")
        ax.text(0.5, 0.5, NO_EV_STATES, transform=ax.transAxes,
                ha="center", va="center")
        ax.set_title(title, fontsize=9)
        fig.tight_layout()
        return fig
    key = ["host", "peer", "qpn", "ev"]
    changed = segments
    if not segments.empty:  # every segment of an EV with one segment not GOOD
        bad = segments["state"].ne("GOOD").groupby([segments[k] for k in key]).transform("any")
        changed = segments[bad]
    groups = changed.groupby(key, sort=True)
    lanes = list(groups.groups)[:max_lanes] if len(changed) else []
    n_changed = groups.ngroups if len(changed) else 0
    total = segments.groupby(key).ngroups if not segments.empty else 0
    fig, ax = plt.subplots(figsize=(7.5, max(2.2, 0.28 * len(lanes) + 1.4)))
    _mark_disturbances(ax, disturbances, None, t_end, labels=False)
    if segments.empty:
        message = f"{transport}: no EVs recorded, nothing to show"
    elif not lanes:
        message = f"all {total} EVs stayed in their state the whole run (no change)"
    else:
        message = ""
    by_lane = {lane: groups.get_group(lane) for lane in lanes}
    for y, lane in enumerate(lanes):
        for state, part in by_lane[lane].groupby("state"):
            ax.broken_barh(list(zip(part["start"], part["end"] - part["start"])),
                           (y - 0.35, 0.7), **_STATE_STYLE.get(state, _STATE_STYLE["GOOD"]),
                           linewidth=0.5)
    ax.set_yticks(range(len(lanes)), [
        f"{h}→{hosts.get(p, p)} qp{q} EV{e} (plane {int(by_lane[(h, p, q, e)]['plane'].iloc[0])})"
        for h, p, q, e in lanes], fontsize=7)
    ax.set_ylim(len(lanes) - 0.5 if lanes else 1, -0.5 if lanes else 0)
    ax.set_xlim(0, t_end)
    ax.set_xlabel(TIME_LABEL)
    real_time_axis(ax, dilation, t_end)
    if message:
        ax.text(0.5, 0.5, message, transform=ax.transAxes, ha="center", va="center")
        ax.set_yticks([])
    shown = (f"{n_changed} of {total} EVs changed state"
             + (f", first {len(lanes)} shown" if len(lanes) < n_changed else "")
             + "; the others stayed as they were") if lanes else f"{total} EVs"
    ax.set_title(f"{title} ({shown})", fontsize=9)
    ax.legend(handles=[Patch(**_STATE_STYLE[s], label=s) for s in _STATE_STYLE] +
              [Patch(facecolor="#999999", alpha=0.4, hatch="\\\\", label="fault")],
              loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)
    ax.grid(False)
    fig.tight_layout()
    return fig


def counter_bars(counts: pd.DataFrame, title: str, group_name: str) -> Figure:
    """Grouped bars: one group per row of `counts` (hosts or transports), one hatched bar
    per counter (column), each labelled with its value; symlog y when the counts span more
    than a factor of 100, so that a few timeouts stay visible next to thousands of
    retransmissions."""
    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(counts) * max(1, len(counts.columns)) /
                                        2 + 2.5), 3.8))
    width = 0.8 / max(1, len(counts.columns))
    x = np.arange(len(counts))
    for j, column in enumerate(counts.columns):
        st = style(j)
        values = counts[column].to_numpy(dtype=float)
        bars = ax.bar(x + (j - (len(counts.columns) - 1) / 2) * width, values, width,
                      color=st["color"], alpha=0.8, hatch=st["hatch"], edgecolor="black",
                      label=column.replace("_", " "))
        ax.bar_label(bars, labels=[f"{v:,.0f}" for v in values], fontsize=6, padding=1)
    nonzero = counts.to_numpy(dtype=float)
    nonzero = nonzero[nonzero > 0]
    if nonzero.size and nonzero.max() / nonzero.min() > 100:
        ax.set_yscale("symlog", linthresh=1)
    ax.set_ylim(0, max(1.0, float(counts.to_numpy().max())) * (3 if ax.get_yscale() ==
                                                                "symlog" else 1.15))
    ax.set_xticks(x, [str(i) for i in counts.index])
    ax.set_xlabel(group_name)
    ax.set_ylabel("count (packets or events)")
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)
    fig.tight_layout()
    return fig


def percentile_text(ps: list[Percentile], unit: float = 1e3, name: str = "ms") -> str:
    """'p50 357 ms, p99 399 ms*, p99.9 400 ms* (n=10; * too few samples)'"""
    cells = [f"p{p.q:g} {p.value * unit:.4g} {name}{'*' if p.note else ''}"
             for p in ps if not math.isnan(p.value)]
    n = ps[0].n if ps else 0
    star = "; * interpolated: too few samples for a measured tail" if any(
        p.note for p in ps) else ""
    return ", ".join(cells) + f" (n={n}{star})"


def link_gap_ccdf(hist: pd.DataFrame) -> pd.DataFrame:
    """From link_gaps.parquet rows (summed per `kind` and bucket): for each bucket's upper edge
    x, the share of backlogged dequeues late by at least x % of a packet time."""
    out = []
    for kind, rows in hist.groupby("kind"):
        counts = rows.groupby("bucket").agg(edge=("edge_pct", "first"), n=("gaps", "sum"))
        counts = counts.sort_index()
        total = counts["n"].sum()
        if total == 0:
            continue
        beyond = total - counts["n"].cumsum()  # strictly later than the bucket's upper edge
        out.append(pd.DataFrame({"kind": kind, "edge_pct": counts["edge"], "ccdf":
                                 beyond / total, "total": total}))
    return pd.concat(out) if out else pd.DataFrame(columns=["kind", "edge_pct", "ccdf", "total"])


def fidelity(gaps: pd.DataFrame, cpu: pd.DataFrame, disturbances: pd.DataFrame,
             verdict: dict | None, t0: float, t_max: float, title: str) -> Figure:
    """Left: the CCDF of link lateness as Mininet-HiFi plots it (log y down to 1e-3), one
    curve per link kind, with the one-packet-time bound. Right: the CPU over the traffic
    (machine busy, its softirq and steal parts, PSI), fault windows shaded. The verdict is
    the title."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2),
                                      gridspec_kw={"width_ratios": [1, 1.3]})
    ccdf = link_gap_ccdf(gaps) if not gaps.empty else pd.DataFrame()
    lowest = 1e-3
    for i, (kind, c) in enumerate(ccdf.groupby("kind") if not ccdf.empty else []):
        finite = c[np.isfinite(c["edge_pct"])]
        shown = finite["ccdf"].clip(lower=lowest / 2)
        s = style(i)
        late = float(finite["ccdf"].iloc[0]) if len(finite) else 0.0
        note = "" if late > 0 else f"; none late by {finite['edge_pct'].iloc[0]:g}%: at the floor"
        left.step(finite["edge_pct"], shown, where="post", color=s["color"],
                  linestyle=s["linestyle"], marker=s["marker"], markersize=3,
                  label=f"{kind} ports (n={int(c['total'].iloc[0]):,}{note})")
        lowest = min(lowest, float(finite["ccdf"][finite["ccdf"] > 0].min()
                                   if (finite["ccdf"] > 0).any() else lowest))
    left.axvline(100, color="black", linewidth=0.8, linestyle="--")
    left.annotate("one packet time", xy=(100, 1), xycoords=("data", "axes fraction"),
                  xytext=(3, -10), textcoords="offset points", fontsize=7)
    left.axhline(0.01, color="#888888", linewidth=0.8, linestyle=":")
    left.set(xscale="log", yscale="log", ylim=(min(1e-3, lowest) / 2, 1.5), xlim=(0.8, 1.2e4),
             xlabel="lateness of a backlogged dequeue (% of a full packet's time)",
             ylabel="share of dequeues at least this late")
    if ccdf.empty:
        left.text(0.5, 0.5, "no backlogged dequeue measured", transform=left.transAxes,
                  ha="center", fontsize=8)
    else:
        left.legend(fontsize=7, loc="lower left")
    left.set_title("link invariant (CCDF)", fontsize=9)
    if not cpu.empty:
        t = cpu["time"] - t0
        right.plot(t, 100 * cpu["busy"], label="CPU busy (all cores)", **_line(0))
        if "softirq" in cpu:
            right.plot(t, 100 * cpu["softirq"], label="of which softirq (forwarding)", **_line(1))
        if "steal" in cpu and cpu["steal"].notna().any():  # inside busy, as softirq is
            right.plot(t, 100 * cpu["steal"], label="of which steal (the host's other guests)",
                       **_line(3))
        if cpu["psi_some"].notna().any():
            right.plot(t, 100 * cpu["psi_some"], label="PSI: some task waiting for a CPU",
                       **_line(2))
    handles = _mark_disturbances(right, disturbances, None, t_max, labels=False)
    right.axhline(90, color="#888888", linewidth=0.8, linestyle=":")
    right.set(ylim=(0, 105), xlim=(0, max(t_max, 1e-3)), xlabel=TIME_LABEL,
              ylabel="share of the interval (%)")
    # below the axes: the low lines (softirq, steal, PSI) lie where a legend inside would be
    right.legend(handles=right.get_legend_handles_labels()[0] + handles, fontsize=7,
                 loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False)
    right.set_title("CPU over the traffic", fontsize=9)
    v = verdict or {}
    head = f"{title}: fidelity {v.get('verdict', 'not judged (an older run)')}"
    reasons = "; ".join(v.get("reasons", []))
    if reasons:
        head += "\n" + "\n".join(_wrap(reasons, 140))
    fig.suptitle(head, fontsize=9)
    fig.tight_layout()
    return fig


def _line(i: int) -> dict:
    s = style(i)
    return {"color": s["color"], "linestyle": s["linestyle"], "linewidth": 1.2}


def _wrap(text: str, width: int) -> list[str]:
    lines, line = [], ""
    for word in text.split(" "):
        if len(line) + len(word) + 1 > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return [*lines, line][:4]
