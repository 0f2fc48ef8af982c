"""The report of a training-step run: the per-rank timeline figure, the Perfetto trace
(`trace.json` in the run folder) and the step table of the summary, from steps.parquet.

Fault windows are the network faults as the injector applied them (metrics.disturbances) and
the stragglers as the scenario scheduled them (their agents apply them; no fault action
records them), both in seconds since the workload's start.

A fault run shown beside a healthy control of its scenario (the same file without its faults
and background traffic, over the same transport: what a drill's control run is, or a second
scenario file that differs only there) is also read as a ratio to it: its step time p50 and
p99 and each group's exposed communication over the control's. Name, description, seed and
the number of iterations (and warmup iterations) may differ: a fault run needs iterations to
cover its fault's window, a control does not; anything else (fabric, the step itself,
transport settings) must be the same, or the ratio would measure that difference too.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from . import figures, metrics, steps
from .report import RunView, who

FAULT_RING = "#c0392b"  # the ring around a step that overlaps a fault window

TRACE = "trace.json"
_LANE_STYLE = {  # compute solid dark, communication light and hatched, waiting crossed gray
    "compute": {"facecolor": figures.style(0)["color"], "hatch": ""},
    "communication": {"facecolor": figures.style(1)["color"], "hatch": "////"},
    "waiting": {"facecolor": "#d9d9d9", "hatch": "xx"},
}


def is_step_run(view: RunView) -> bool:
    return "steps" in view.run.tables and not view.run.steps.empty


def windows(view: RunView) -> pd.DataFrame:
    """Every fault's window, network and straggler, s since the workload's start."""
    stragglers = steps.straggler_windows(view.run.scenario, view.t_end)
    faults = view.disturbances[view.disturbances["source"] == "fault"]
    return pd.concat([faults, stragglers], ignore_index=True) if len(stragglers) else faults


def hosts(view: RunView) -> dict[int, str]:
    return {int(r): str(h) for r, h in
            view.run.steps.groupby("rank")["host"].first().items()}


def write_trace(view: RunView, fallback: Path) -> Path:
    """The run's timeline as a Chrome/Perfetto trace (ui.perfetto.dev opens it): `trace.json`
    in the run folder, or `trace-LABEL.json` in `fallback` where this user may not write
    there."""
    folder = view.run.dir
    path = folder / TRACE if os.access(folder, os.W_OK) else fallback / f"trace-{view.label}.json"
    events = steps.trace_events(view.run.steps, view.run.t0, windows(view), hosts(view))
    path.write_text(json.dumps(events))
    return path


def timeline_figure(view: RunView) -> Figure:
    """Per rank three lanes over the run: compute, communication, waiting (inside an
    iteration, not computing); fault windows shaded and labelled."""
    lanes = steps.rank_lanes(view.run.steps, view.run.t0)
    names = hosts(view)
    ranks = sorted(names)
    fig = Figure(figsize=(10, 1.2 + 0.42 * len(ranks)))
    ax = fig.add_subplot()
    height = 0.28
    for i, rank in enumerate(ranks):
        top = len(ranks) - 1 - i
        for k, lane in enumerate(steps.LANES):
            spans = lanes[(lanes["rank"] == rank) & (lanes["lane"] == lane)]
            ax.broken_barh(list(zip(spans["start"], spans["end"] - spans["start"],
                                    strict=True)),
                           (top + 0.64 - k * 0.32 - height / 2, height), edgecolor="white",
                           linewidth=0.3, **_LANE_STYLE[lane])
    ax.set_yticks([k + 0.32 for k in range(len(ranks))],
                  [f"rank {r} ({names[r]})" for r in reversed(ranks)])
    starts = steps.iteration_times(view.run.steps)["start"] - view.run.t0
    for t in starts:  # where each iteration begins (its first node on any rank)
        ax.axvline(t, color="#444444", linestyle=(0, (1, 3)), linewidth=0.8, zorder=0)
    ax.set_ylim(-0.1, len(ranks))
    t_max = float(lanes["end"].max()) if len(lanes) else view.t_end
    handles = figures._mark_disturbances(ax, windows(view), None, t_max)
    ax.set_xlim(0, t_max * 1.01)
    ax.set_xlabel(figures.TIME_LABEL)
    ax.grid(axis="y", visible=False)
    lane_handles = [Patch(edgecolor="white", label=lane, **_LANE_STYLE[lane])
                    for lane in steps.LANES]
    ax.legend(handles=lane_handles + handles, loc="upper center", ncol=5,
              bbox_to_anchor=(0.5, -0.12 if len(ranks) > 4 else -0.25), frameon=False)
    iterations = int(view.run.steps["iteration"].nunique())
    ax.set_title(f"{who(view.run)} over {view.run.transport}: each rank's compute, "
                 f"communication and waiting, {iterations} iterations (warmup included; "
                 f"dotted: iteration starts)")
    return fig


def in_fault(times: pd.DataFrame, spans: pd.DataFrame, t0: float) -> pd.Series:
    """Which iterations (`iteration_times` rows, absolute times) overlap a fault's window
    (`windows`, s since the workload's start `t0`; an open end runs on)."""
    start, end = times["start"] - t0, times["end"] - t0
    hit = pd.Series(False, index=times.index)
    for s, e in zip(spans["start"], spans["end"].fillna(float("inf"))):
        hit |= (start < e) & (end > s)
    return hit


def step_times_figure(views: list[RunView]) -> Figure:
    """Each iteration's step time (first start to last end over every rank), per run; the
    iterations that overlap one of the run's fault windows ringed."""
    fig = Figure(figsize=(7, 3.2))
    ax = fig.add_subplot()
    ringed = False
    for i, v in enumerate(views):
        t = steps.iteration_times(v.run.steps)
        st = figures.style(i)
        timed = t[~t["warmup"].astype(bool)]
        ax.plot(timed["iteration"], timed["time"] * 1e3, color=st["color"],
                linestyle=st["linestyle"], marker=st["marker"],
                label=f"{v.label} (n={len(timed)})")
        hit = in_fault(timed, windows(v), v.run.t0)
        if hit.any():
            ringed = True
            ax.scatter(timed["iteration"][hit], timed["time"][hit] * 1e3, s=150,
                       facecolors="none", edgecolors=FAULT_RING, linewidths=1.4, zorder=3)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("iteration (warmup left out)")
    ax.set_ylabel("step time (ms)")
    ax.set_ylim(bottom=0)
    handles, _ = ax.get_legend_handles_labels()
    if ringed:
        handles.append(Line2D([], [], linestyle="none", marker="o", markersize=11,
                              markerfacecolor="none", markeredgecolor=FAULT_RING,
                              label="overlaps a fault window"))
    ax.legend(handles=handles)
    ax.set_title(f"Step time per iteration: {views[0].run.facts.scenario}")
    return fig


# ---- the summary's table ----
DISTURBANCES = ("faults", "background")  # what a healthy control has none of
FREE = ("name", "description", "seed", "transport", *DISTURBANCES)  # may differ from it
FREE_WORKLOAD = ("iterations", "warmup")  # how long the run is, not what a step is


def healthy(data: dict) -> bool:
    return not any(data.get(k) for k in DISTURBANCES)


def pair_controls(runs: list[tuple[str, str, dict]]) -> dict[str, str | None]:
    """Per run (label, transport, scenario as run): the label of its healthy control among
    the others, None for a healthy run or a fault run without one. The first healthy run over
    the same transport whose scenario equals the fault run's but for `FREE` keys and the
    workload's `FREE_WORKLOAD`."""
    def same(data: dict) -> dict:
        out = {k: v for k, v in data.items() if k not in FREE}
        if isinstance(out.get("workload"), dict):
            out["workload"] = {k: v for k, v in out["workload"].items()
                               if k not in FREE_WORKLOAD}
        return out
    out: dict[str, str | None] = {}
    for label, transport, data in runs:
        out[label] = None if healthy(data) else next(
            (other for other, t, d in runs if other != label and t == transport and healthy(d)
             and same(d) == same(data)), None)
    return out


def _ms(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds * 1e3:.1f}"


def _ratio(value: float, control: float) -> str:
    return ("-" if math.isnan(value) or math.isnan(control) or control <= 0
            else f"{value / control:.2f}x")


def table(views: list[RunView]) -> str:
    """Transports side by side: per timed iteration the step time (first start to last end
    over every rank) p50 and p99 with the sample count, each rank's exposed communication
    (mean over ranks and iterations), and per group its exposed time per member; for a fault
    run beside its healthy control (`pair_controls`), each of those over the control's."""
    frames = {v.label: v.run.steps[~v.run.steps["warmup"].astype(bool)] for v in views}
    labels = list(frames)
    control = pair_controls([(v.label, v.run.transport, v.run.scenario) for v in views])
    width = max(12, *(len(label) for label in labels))
    lines = [f"# training step on {views[0].run.world} ranks "
             f"({', '.join(dict.fromkeys(v.run.facts.scenario for v in views))}), "
             f"timed iterations"]
    lines += [f"#   {label}: against its healthy control {c}" for label, c in control.items()
              if c is not None]
    lines.append("#" + "metric (ms)".rjust(23) + "".join(label.rjust(width + 2)
                                                        for label in labels))

    def row(name: str, cells: list[str]) -> None:
        lines.append(name.rjust(24) + "".join(c.rjust(width + 2) for c in cells))

    def against(name: str, values: dict[str, float]) -> None:
        """The ratio row of a metric, where some run has a control."""
        if any(c is not None for c in control.values()):
            row(f"{name} / control", [_ratio(values[k], values[c]) if c is not None else "-"
                                      for k, c in control.items()])

    per_run = {}
    for label, frame in frames.items():
        times = steps.iteration_times(frame)["time"] if len(frame) else pd.Series(dtype=float)
        ps = metrics.percentiles(times.to_numpy(dtype=float))
        ranks = steps.rank_metrics(frame) if len(frame) else pd.DataFrame()
        groups = steps.group_exposed(frame) if len(frame) else pd.DataFrame()
        per_run[label] = (times, ps, ranks, groups)
    row("iterations", [str(len(t)) for t, *_ in per_run.values()])
    for k, q in enumerate(("p50", "p99")):
        row(f"step time {q}", [_ms(ps[k].value) + ("*" if ps[k].note else "")
                               for _, ps, _, _ in per_run.values()])
        against(f"step {q}", {label: ps[k].value for label, (_, ps, _, _) in per_run.items()})
    for name in ("compute", "exposed", "idle"):
        means = {label: float(r[name].mean()) if len(r) else math.nan
                 for label, (_, _, r, _) in per_run.items()}
        row(f"{name} per rank", [_ms(m) for m in means.values()])
        if name == "exposed":
            against("exposed", means)
    names = sorted({g for *_, groups in per_run.values() if len(groups)
                    for g in groups["group"]})
    for group in names:
        means = {label: float(g[g["group"] == group]["exposed_mean"].mean())
                 if len(g) and (g["group"] == group).any() else math.nan
                 for label, (*_, g) in per_run.items()}
        row(f"exposed {group}", [_ms(m) for m in means.values()])
        against(f"exp. {group}", means)
    if any(ps[1].note for _, ps, _, _ in per_run.values()):
        lines.append("# * fewer than 100 timed iterations: p99 is interpolated between the "
                     "largest, not a measured tail")
    wrong = {label: int((~f["verified"].astype(bool)).sum()) for label, f in frames.items()}
    lines.append("# nodes with wrong results: " + ", ".join(f"{k} {v}" for k, v in wrong.items()))
    return "\n".join(lines) + "\n"
