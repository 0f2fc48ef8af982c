"""What a report shows of a run, computed once, and the figures drawn from one or more runs.

Both notebooks (one run; runs side by side) and the terminal summary read a `RunView`, so a
number printed at the end of `run` is the number in the HTML. Every figure function takes a
list of views: one for a run's report, several for a comparison.
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from hostagent import compiled

from . import figures, metrics
from .load import Run, fidelity_record, protocol_record

BIN_S = 0.1  # goodput and heatmap bins: the telemetry's period on small fabrics
JITTER_BINS = 0.1  # of a bin: how far past a bin's width the sampling interval may reach
FRACTION = 0.9  # recovered = goodput back to this share of its level before the event
PRE_WINDOW = 1.0  # s of goodput before an event that make its level
COUNTERS = ("retransmits", "timeouts", "nacks_sent", "trims_received")


@dataclass
class RunView:
    """A run and every derived frame its report needs (times in s since the workload start)."""

    run: Run
    label: str
    bin_s: float
    ccts: pd.DataFrame  # per iteration, with algbw and busbw (GB/s)
    delivered: pd.DataFrame
    goodput_hosts: pd.DataFrame  # bytes/s per receiving host
    goodput_total: pd.Series
    disturbances: pd.DataFrame
    reroutes: pd.Series
    recoveries: pd.DataFrame
    ports: pd.DataFrame
    port_rates: pd.DataFrame
    segments: pd.DataFrame  # EV states as intervals
    t_end: float
    ideal: float = field(default=0.0)  # GB/s
    planes: int = field(default=1)
    ev_rates: pd.DataFrame = field(default_factory=pd.DataFrame)  # MRC, where sampled

    @classmethod
    def of(cls, run: Run, label: str | None = None, bin_s: float = BIN_S) -> RunView:
        t0 = run.t0
        t_end = run.t_end - t0
        ccts = metrics.bandwidth(metrics.cct(run.iterations, t0), run.world)
        delivered = metrics.deliveries(run.messages, run.iterations, t0)
        hosts = metrics.goodput(delivered, bin_s, t_end, by="host")
        total = hosts.sum(axis=1).rename("total")
        facts = run.facts
        dist = metrics.disturbances(run.events, facts.background, t0)
        timed = ccts[~ccts["warmup"]]["cct"]
        judged = metrics.trailing_mean(total, float(timed.median()) if len(timed) else bin_s,
                                       bin_s)
        rec = metrics.recoveries(judged, dist, bin_s, t_end, fraction=FRACTION,
                                 pre_window=PRE_WINDOW, used=metrics.used_links(run.links)
                                 if not run.links.empty else None, ccts=ccts)
        if run.links.empty:
            ports = rates = pd.DataFrame()
        else:
            ports = metrics.ports(run.links, facts.node_tiers)
            rates = metrics.port_rates(run.links, t0, facts.link_rates)
            rates = rates.merge(ports[["node", "ifname", "label", "direction"]],
                                on=["node", "ifname"])
        ev_rates = metrics.ev_rates(run.ev_load, t0, facts.packet_bits, facts.link_rates["host"],
                                    run.iterations.groupby("rank")["host"].first().to_dict())
        return cls(run, label or run.transport, bin_s, ccts, delivered, hosts, total, dist,
                   metrics.reroutes(run.events, t0), rec, ports, rates,
                   metrics.ev_segments(run.ev_states, run.paths, t0, t_end), t_end,
                   facts.ideal_busbw, facts.ideal_planes, ev_rates)

    @property
    def timed(self) -> pd.DataFrame:
        """Iterations that count (nccl-tests leaves warmup out of its numbers)."""
        return self.ccts[~self.ccts["warmup"]]

    @property
    def busbw(self) -> float:
        """GB/s at nccl-tests' time of the timed iterations (summary.txt's number)."""
        return metrics.nccl_rows(self.run.iterations)[0].busbw

    def percentiles(self) -> list[metrics.Percentile]:
        return metrics.percentiles(self.timed["cct"])

    def counters(self) -> pd.Series:
        """Loss-recovery counters summed over the run's QPs, plus the ports' drops: the
        interface's and the data queue's, and the in-fabric queue's tail drops and lossless
        overflows where the run has them."""
        qp = metrics.qp_counters(self.run.qps).sum()
        out = qp.reindex(list(COUNTERS)).fillna(0)
        if not self.run.links.empty:
            totals = metrics.port_totals(self.run.links)
            drops = [c for c in ("tx_drop", "queue_drops", "bpf_dropped", "lossless_overflow")
                     if c in totals.columns]
            out["port_drops"] = totals[drops].to_numpy().sum()
        return out

    def heatmap_bin(self) -> float:
        """The heatmaps' bin: the goodput's, widened to a whole multiple of it that holds the
        telemetry's sampling interval (its 90th percentile over the ports, a tenth of a bin
        of jitter allowed), so that a bin without a sample (a blank stripe) is rare: the
        sampler's period stretches with the fabric's size (0.6 s and more at 64 hosts
        against 0.1 s bins)."""
        if self.port_rates.empty:  # no telemetry (a run without the table's columns)
            return self.bin_s
        intervals = self.port_rates.groupby("label")["time"].diff().dropna()
        if intervals.empty:
            return self.bin_s
        return self.bin_s * max(1, math.ceil(float(intervals.quantile(0.9)) / self.bin_s
                                             - JITTER_BINS))

    def utilisation(self, bin_s: float) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Heatmap grids in bins of `bin_s`: per plane (mean over its ports), and per port
        (label, in plan order)."""
        planes = metrics.utilisation_grid(self.port_rates, bin_s, self.t_end, "plane")
        planes.index = [f"plane {p}" for p in planes.index]
        per_port = metrics.utilisation_grid(self.port_rates, bin_s, self.t_end, "label")
        return planes, per_port.reindex(self.ports["label"])


def job_name(run: Run) -> str | None:
    """'dp', or 'dp alone' for its control: the job a run of several jobs' folder holds."""
    job = run.meta.job
    return None if job is None else job.name + (" alone" if job.solo else "")


def who(run: Run) -> str:
    """A run's scenario in a figure's title, its job after it where it has one."""
    return " ".join(filter(None, (run.facts.scenario, job_name(run))))


def labels(runs: list[Run]) -> list[str]:
    """Each run's name in legends: its transport (a job's folder: its job first, 'dp mrc',
    'dp alone mrc'); where two runs share it, its scenario and transport (a sweep: loss-0
    mrc, loss-1pct mrc), or its folder name when the scenario is the same too."""
    names = [" ".join(filter(None, (job_name(r), r.transport))) for r in runs]
    pairs = [(r.facts.scenario, name) for r, name in zip(runs, names, strict=True)]
    return [name if names.count(name) == 1 else
            f"{r.facts.scenario} {name}" if pairs.count(pair) == 1 else r.name
            for r, name, pair in zip(runs, names, pairs, strict=True)]


def views_of(runs: list[Run]) -> list[RunView]:
    return [RunView.of(r, label) for r, label in zip(runs, labels(runs))]


def dilation(views: list[RunView]) -> float | None:
    """The runs' common time dilation, for the figures' real-frame axes; None without a real
    fabric or when the runs' differ (their emulated times share an axis, their real ones
    would not)."""
    factors = {v.run.facts.dilation() for v in views}
    return factors.pop() if len(factors) == 1 else None


def _title(views: list[RunView], what: str) -> str:
    facts = views[0].run.facts
    names = ", ".join(dict.fromkeys(who(v.run) for v in views))
    algorithms = sorted({a for v in views if (a := v.run.facts.algorithm) is not None})
    how = f" ({', '.join(algorithms)})" if algorithms else ""
    return (f"{what}: {names}, {facts.collective}{how} of {facts.size:,} B on "
            f"{views[0].run.world} ranks")


def fidelity_figure(view: RunView) -> Figure:
    """Did the run measure the network or the CPU: link lateness CCDF, CPU over time."""
    run = view.run
    return figures.fidelity(run.link_gaps, run.cpu, view.disturbances, fidelity_record(run),
                            run.t0, view.t_end, f"{who(run)} over {run.transport}")


def cct_figure(views: list[RunView]) -> Figure:
    return figures.cct_cdf({v.label: v.timed["cct"] for v in views},
                           _title(views, "Collective completion time"), dilation(views))


def goodput_figure(views: list[RunView]) -> Figure:
    """A single run also shows each receiving host; a comparison only the totals. The
    baseline's route changes are drawn only where a baseline ran: MRC ignores them."""
    baseline = [v.reroutes for v in views if v.run.transport == "rocev2" and len(v.reroutes)]
    return figures.goodput({f"{v.label} (all hosts)": v.goodput_total for v in views},
                           views[0].disturbances, pd.concat(baseline) if baseline else None,
                           _title(views, "Goodput (verified application bytes)"),
                           per_host=views[0].goodput_hosts if len(views) == 1 else None,
                           dilation=dilation(views))


def utilisation_figure(views: list[RunView]) -> Figure:
    """Per plane for every run; per port too for a single run (a comparison would need one
    tall panel per run)."""
    panels: list[tuple[str, pd.DataFrame, list]] = []
    bin_s = max(v.heatmap_bin() for v in views)
    for v in views:
        if v.port_rates.empty:
            continue
        planes, per_port = v.utilisation(bin_s)
        panels.append((f"{v.label}: mean over each plane's ports", planes,
                       list(range(len(planes)))))
        if len(views) == 1:
            groups = list(zip(v.ports["plane"], v.ports["kind"]))
            panels.append(((f"{v.label}: each port, sender→receiver, by plane "
                            f"(host ports, then leaf–spine)"), per_port, groups))
            if not v.ev_rates.empty:
                evs = metrics.utilisation_grid(v.ev_rates, bin_s, v.t_end, "label")
                pairs = [label.split(" p")[0] for label in evs.index]
                busy = evs.groupby(pairs).transform("sum").sum(axis=1) > 0
                evs = evs[busy.to_numpy()]
                title = f"{v.label}: each EV of the QPs that sent (sender→receiver, plane, spine)"
                panels.append((title, evs, [label.split("→")[0] for label in evs.index]))
    return figures.utilisation_heatmap(panels, bin_s, views[0].disturbances,
                                       _title(views, "Link utilisation"), dilation(views))


def busbw_figure(views: list[RunView]) -> Figure:
    rows = pd.DataFrame([{"label": v.label, "busbw": v.busbw, "ideal": v.ideal,
                          "ranks": metrics.rank_busbw(v.run.iterations),
                          "iterations": len(v.timed)} for v in views])
    return figures.busbw_bars(rows, _title(views, "Bus bandwidth"))


def ev_state_figure(view: RunView) -> Figure:
    hosts = view.run.iterations.groupby("rank")["host"].first().to_dict()
    return figures.ev_timeline(view.segments, view.disturbances, view.t_end,
                               f"EV states, {view.label}", view.run.transport, hosts,
                               dilation=dilation([view]))


def counter_figure(views: list[RunView]) -> Figure:
    """Per sending host for one run; per run for a comparison."""
    if len(views) == 1:
        counts = metrics.qp_counters(views[0].run.qps)[list(COUNTERS)]
        return figures.counter_bars(counts, _title(views, f"Loss recovery, {views[0].label}"),
                                    "sending host")
    counts = pd.DataFrame({v.label: v.counters() for v in views}).T
    return figures.counter_bars(counts, _title(views, "Loss recovery"), "run")


def headline(views: list[RunView]) -> pd.DataFrame:
    """The table on top of a report, one row per run: what was measured (its loss-recovery
    counters are `headline_counters`, a table of their own, so that neither is wider than a
    report's page)."""
    rows = []
    for v in views:
        ps = v.percentiles()
        rows.append({"run": v.run.name, "transport": v.run.facts.baseline,
                     "status": v.run.status,
                     "fidelity": v.run.meta.verdict or "not judged",
                     "timed iterations": len(v.timed),
                     "busbw (Mbit/s)": round(v.busbw * 8e3, 2),
                     "ideal (Mbit/s)": round(v.ideal * 8e3, 2),
                     "share of ideal": f"{v.busbw / v.ideal:.0%}",
                     **{f"CCT p{p.q:g} (ms)": round(p.value * 1e3, 1) for p in ps},
                     "wrong": int((~v.run.iterations["verified"]).sum())})
    return pd.DataFrame(rows).set_index("run")


def headline_counters(views: list[RunView]) -> pd.DataFrame:
    """The headline's second table, one row per run: the loss-recovery counters summed over
    the run's QPs and the packets its ports dropped (RunView.counters)."""
    rows = [{"run": v.run.name, "transport": v.run.facts.baseline,
             **{k.replace("_", " "): int(n) for k, n in v.counters().items()}} for v in views]
    return pd.DataFrame(rows).set_index("run")


def recovery_table(views: list[RunView]) -> pd.DataFrame:
    """Every run's recovery after every disturbance, readable units."""
    frames = []
    for v in views:
        r = v.recoveries.copy()
        if r.empty:
            continue
        frames.append(pd.DataFrame({
            "run": v.label, "disturbance": r["label"], "from (s)": r["start"].round(2),
            "to (s)": r["end"].round(2),
            "level before (Mbit/s)": (r["pre_rate"] * 8e-6).round(1),
            f"back to {FRACTION:.0%} after (s)": r["recovery_s"].round(2),
            "after it ended (s; < 0: before)": r["after_end_s"].round(2),
            "bytes lost (MB)": (r["bytes_lost"] / 1e6).round(2),
            "of its links this run used": [
                "" if n is None or pd.isna(n) or not ls else f"{int(n)} of {len(ls)}"
                for n, ls in zip(r["on_paths"], r["links"], strict=True)],
            "slowest iteration / median": r["slowdown"].round(2),
            "overlaps": [", ".join(o) for o in r["overlaps"]], "note": r["note"]}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def fault_actions(views: list[RunView]) -> pd.DataFrame:
    """Every fault action of every run: when it was due, how late its last node changed
    (lag) and how far apart its first and last node changed (spread)."""
    frames = []
    for v in views:
        ev = v.run.events
        if ev.empty:
            continue
        spread = ev["spread"] if "spread" in ev.columns else pd.Series(float("nan"),
                                                                         index=ev.index)
        frames.append(pd.DataFrame({
            "run": v.label, "fault": ev["event"], "kind": ev["kind"], "target": ev["target"],
            "condition": ev["condition"], "on": ev["on"],
            "due (s)": (ev["scheduled"] - v.run.t0).round(3),
            "lag (ms)": (ev["lag"] * 1e3).round(1), "spread (ms)": (spread * 1e3).round(1),
            "links": ev["links"].apply(len), "note": ev["note"].fillna("")}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def balance_table(views: list[RunView]) -> pd.DataFrame:
    """Per run: how evenly load spread over planes (host ports' bytes sent) and, for MRC,
    over each QP's EVs (packets sent)."""
    rows = []
    for v in views:
        row: dict[str, str | float] = {"run": v.label}
        if not v.run.links.empty:
            totals = metrics.port_totals(v.run.links).reset_index()
            up = totals.merge(v.ports[["node", "ifname", "plane", "kind", "direction"]])
            host_up = up[(up["kind"] == "host") & (up["direction"] == "up")]
            b = metrics.balance(host_up.groupby("plane")["tx_bytes"].sum())
            row |= {"planes: max/mean": round(b.max_over_mean, 2),
                    "planes: min/mean": round(b.min_over_mean, 2)}
        evb = metrics.ev_balance(v.run.paths)
        if len(evb):
            row |= {"EVs per QP: worst max/mean": round(evb["max_over_mean"].max(), 2),
                    "EVs per QP: mean cov": round(evb["cov"].mean(), 3)}
        st = metrics.state_time(v.segments)
        for state in ("ASSUMED_BAD", "DENIED"):
            if state in st.columns:
                row[f"EV-seconds {state}"] = round(float(st[state].sum()), 2)
        rows.append(row)
    return pd.DataFrame(rows).set_index("run")


def port_table(view: RunView, top: int = 12) -> pd.DataFrame:
    """The ports that dropped, marked or trimmed most, then the busiest."""
    if view.run.links.empty:
        return pd.DataFrame()
    totals = metrics.port_totals(view.run.links).reset_index().merge(
        view.ports[["node", "ifname", "label", "plane"]])
    rates = view.port_rates.groupby("label")["util"]
    totals["mean util"] = totals["label"].map(rates.mean()).round(3)
    totals["peak util"] = totals["label"].map(rates.max()).round(3)
    signals = [c for c in ("tx_drop", "queue_drops", *metrics.FABRIC_COUNTERS)
               if c in totals.columns]
    totals["signals"] = totals[signals].sum(axis=1)
    out = totals.sort_values(["signals", "tx_bytes"], ascending=False).head(top)
    return out.drop(columns=["node", "ifname", "signals"]).set_index("label")


def intro_html(runs: list[Run], title: str) -> str:
    """The top of a report as HTML, every value from the run escaped: a folder's meta.json,
    description and errors are data, and a `<script>` in a description must not run when the
    report is opened."""
    e = html.escape
    facts = runs[0].facts
    parts = [f"<h1>{e(title)}: {e(facts.scenario)}</h1>"]
    if facts.description:
        parts.append(f"<p><em>{e(facts.description)}</em></p>")
    items = []
    for r in runs:
        line = (f"<b>{e(r.facts.baseline)}</b> <code>{e(r.name)}</code>: status "
                f"<b>{e(r.status)}</b>; protocol {e(compiled.line(protocol_record(r)))}")
        if r.meta.gave_up:
            line += ("; <b>the transport gave up, and a job would abort here</b>: "
                     + "; ".join(e(g.line()) for g in r.meta.gave_up))
        elif not r.complete:
            line += (f" (ended in phase {e(str(r.meta.ended_in_phase))}: "
                     f"{e(str(r.meta.error))}). <b>This run is incomplete: read its "
                     f"numbers as such.</b>")
        items.append(f"<li>{line}</li>")
    parts.append("<ul>" + "".join(items) + "</ul>")
    for r in runs:
        bg = r.meta.background
        if bg is not None and bg.flows and bg.ran != bg.flows:
            parts.append(f"<p><b>{e(r.transport)}: {bg.ran} of {bg.flows} background flows "
                         f"ran</b> ({e('; '.join(bg.failed))}); the figures shade only what "
                         f"ran.</p>")
    if len({r.facts.scenario for r in runs}) > 1:
        parts.append("<p><b>These runs are of different scenarios.</b></p>")
    parts.append("<p>Times on every axis are seconds since the workload started (the first "
                 "rank's first collective call). Figures are also in this folder as PNG and "
                 "PDF.</p>")
    return "\n".join(parts)


# Monospace text in the report's output area: at 12 px a line of the summary's table (about 110
# characters) fits the area's 840 px at a 1400 px window, where the template's 14 px wrapped it.
PRE_FONT_PX = 12


def pre_html(text: str) -> str:
    """Text shown as it is (a table, a scenario file), escaped."""
    return f'<pre style="font-size: {PRE_FONT_PX}px">{html.escape(text)}</pre>'


def scenario_html(run: Run) -> str:
    """The scenario file as run, escaped (a code fence would let a file close it early)."""
    return pre_html((run.dir / "scenario.yaml").read_text(errors="replace"))


def save(fig: Figure, out_dir: str | Path, name: str) -> None:
    """Write the figure's files and show the PNG in the notebook with its title as alternative
    text (screen readers, and the HTML report, which would otherwise say it has none)."""
    import matplotlib.pyplot as plt
    from IPython.display import Image, display

    paths = figures.save(fig, Path(out_dir), name)
    title = (fig.get_suptitle() or
             next((ax.get_title() for ax in fig.axes if ax.get_title()), name))
    plt.close(fig)  # shown once, as the saved PNG, not again by the inline backend
    png = next(p for p in paths if p.suffix == ".png")
    display(Image(filename=str(png)), metadata={"image/png": {"alt": f"{name}: {title}"}})
