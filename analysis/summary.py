"""The few lines a terminal user reads at the end of `run` (or `report`, `compare`): one
nccl-tests-style row per run with its tail, then how goodput came through each fault."""
from __future__ import annotations

import math

import pandas as pd

from hostagent import compiled
from runcontract.facts import ctrl_deps_line
from runcontract.similarity import Similarity

from . import metrics, step_report
from .load import protocol_record
from .report import FRACTION, PRE_WINDOW, RunView

_HEAD = (("transport", 11), ("time", 9), ("algbw", 9), ("busbw", 9), ("ideal", 6),
         ("#wrong", 6), ("CCT p50", 8), ("p99", 8), ("p99.9", 8), ("n", 4), ("retrans", 8))
_UNITS = ("", "(us)", "(GB/s)", "(GB/s)", "(%)", "", "(ms)", "(ms)", "(ms)", "", "")


def _row(cells: list[str], first: int = _HEAD[0][1]) -> str:
    widths = [first] + [w for _, w in _HEAD[1:]]
    return "  ".join(c.rjust(w) for c, w in zip(cells, widths)).rstrip()


def _bw(gbytes: float) -> str:
    """More decimals for the Mbit/s rates of emulated links, never an exponent."""
    return f"{gbytes:.{2 if gbytes >= 10 else 4 if gbytes >= 0.01 else 6}f}"


def _ms(seconds: float, starred: bool) -> str:
    return "-" if math.isnan(seconds) else f"{seconds * 1e3:.1f}" + ("*" if starred else "")


def table(views: list[RunView]) -> str:
    """One row per run: nccl-tests' time of the timed iterations and algbw and busbw at that
    time (`hostagent.workloads.nccl`, as in summary.txt), the share of the ideal,
    wrong results, and the CCT tail with its sample count; above them, the transport variant
    each run measured (a baseline is named, never just "rocev2")."""
    facts = views[0].run.facts
    names = list(dict.fromkeys(v.run.facts.scenario for v in views))
    first = max([_HEAD[0][1]] + [len(v.label) for v in views])
    lines = [(f"# {facts.collective} of {facts.size} B on {views[0].run.world} "
              f"ranks ({', '.join(names)})"),
             *[f"#   {v.label}: {v.run.facts.baseline}" for v in views],
             "#" + _row([h for h, _ in _HEAD], first)[1:],
             "#" + _row(list(_UNITS), first)[1:]]
    starred = False
    for v in views:
        t = v.timed
        nccl_row = metrics.nccl_rows(v.run.iterations)[0]
        ps = v.percentiles()
        starred |= any(p.note for p in ps[1:])
        status = "" if v.run.complete else f"  (run {v.run.status})"
        lines.append(_row([
            v.label, f"{nccl_row.time_us:.0f}", _bw(nccl_row.algbw), _bw(nccl_row.busbw),
            f"{nccl_row.busbw / v.ideal:.0%}", str(nccl_row.wrong),
            *[_ms(p.value, bool(p.note)) for p in ps], str(len(t)),
            str(int(v.counters().get("retransmits", 0)))], first) + status)
    if starred:
        lines.append("# * fewer timed iterations than the percentile needs (p99: 100, "
                     "p99.9: 1000): interpolated between the largest, not a measured tail")
    return "\n".join(lines) + "\n"


OVERLAPS_NAMED = 3  # a fault overlapping more is named with the first few and a count


def _some(names: list[str]) -> str:
    """The overlapping disturbances, the first few named: 32 NIC losses starting together
    would otherwise list 31 others under each."""
    if len(names) <= OVERLAPS_NAMED:
        return ", ".join(names)
    return f"{', '.join(names[:OVERLAPS_NAMED])} and {len(names) - OVERLAPS_NAMED} more"


def recoveries(views: list[RunView]) -> str:
    """Per disturbance, each run's recovery time and bytes lost; empty without faults."""
    if all(v.recoveries.empty for v in views):
        return ""
    lines = [(f"# recovery: goodput (mean over one iteration) back to {FRACTION:.0%} of its "
              f"level in the {PRE_WINDOW:g} s before")]
    first = views[0].recoveries.reset_index(drop=True)
    for i, d in first.iterrows():
        end = f"{d['end']:.2f} s" if pd.notna(d["end"]) else "the end"
        with_ = f"; overlaps {_some(d['overlaps'])}" if d.get("overlaps") else ""
        lines.append(f"#   {d['label']}, {d['start']:.2f} s to {end}{with_}:")
        for v in views:
            if i >= len(v.recoveries):
                continue
            how = _gave_up_by(v, d["start"]) or _how(v.recoveries.iloc[i])
            lines.append(f"#     {v.label:<8} {how}")
    return "\n".join(lines) + "\n"


def _gave_up_by(view: RunView, start: float) -> str:
    """For a run whose transport gave up after a disturbance began: that, in place of a
    recovery its job would never have made (its goodput stops with the QP, not with the
    fault); empty otherwise."""
    times = [g.after_s for g in view.run.meta.gave_up if g.after_s is not None]
    if not times or min(times) < start:
        return ""
    return f"gave up at {min(times):.2f} s ({len(times)} QPs): a job would abort, no recovery"


SLOW = 1.5  # an iteration this many times the median during a disturbance is worth saying


def _how(r: pd.Series) -> str:
    """One run's line about one disturbance: recovery, bytes lost, whether the fault was on
    the links this run used, and the slowest iteration during it."""
    if math.isnan(r["recovery_s"]):
        how = r["note"] or "not back"
    elif not r["dipped"]:
        how = "no dip"
    else:
        gap = r["after_end_s"]
        after = "" if pd.isna(gap) else (f" ({gap:.2f} s after it ended)" if gap >= 0
                                         else f" ({-gap:.2f} s before it ended)")
        how = f"back after {r['recovery_s']:.2f} s{after}"
    how += f", {r['bytes_lost'] / 1e6:.2f} MB lost"
    slow = r.get("slowdown", math.nan)
    if pd.notna(slow) and slow >= SLOW:
        how += f"; an iteration during it took {slow:.1f}x the others' median"
    on_paths, links = r.get("on_paths"), len(r.get("links") or ())
    if on_paths is not None and pd.notna(on_paths) and links:
        if on_paths == 0:
            cause = (" (the dip is not this fault's: see what overlaps it)"
                     if r["dipped"] or (pd.notna(slow) and slow >= SLOW) else "")
            how += f"; not on its paths: it carried none of the {links} links{cause}"
        else:
            how += f"; on {int(on_paths)} of the {links} links it used"
    return how


def fault_timing(views: list[RunView]) -> str:
    """How late the fault actions were applied, and how far apart their nodes changed."""
    lines = []
    for v in views:
        ev = v.run.events
        if ev.empty or "applied" not in ev.columns or ev["applied"].isna().all():
            continue
        lag = ev["lag"].dropna()
        spread = ev["spread"].dropna() if "spread" in ev.columns else pd.Series(dtype=float)
        text = f"{len(lag)} actions applied, lag max {lag.max() * 1e3:.1f} ms"
        if len(spread):
            text += f", first to last node max {spread.max() * 1e3:.1f} ms"
        skipped = int(ev["applied"].isna().sum())
        if skipped:
            text += f"; {skipped} not applied (the workload had ended)"
        lines.append(f"# faults, {v.label}: {text}")
    return "\n".join(lines) + ("\n" if lines else "")


def writes(views: list[RunView]) -> str:
    """Completion times of single writes (message level), a tail with many more samples than
    the iterations give: p99 needs 100, p99.9 1,000. In the real frame with the emulated
    times beside."""
    lines = []
    for v in views:
        m = v.run.messages
        if m.empty:
            continue
        m = m[~m["warmup"]] if "warmup" in m.columns else m
        ps = metrics.percentiles((m["end"] - m["start"]).to_numpy(dtype=float))
        factor = v.run.facts.dilation()
        cells = [(f"p{p.q:g} {_ms(p.value, False)} ms" if factor is None else
                  f"p{p.q:g} {_duration(p.value / factor)} (emulated {_duration(p.value)})")
                 + (f" (from {p.n} < {p.needed} samples: not a measured tail)" if p.note else "")
                 for p in ps]
        lines.append(f"# writes, {v.label}: {', '.join(cells)} (n={ps[0].n})")
    return "\n".join(lines) + ("\n" if lines else "")


def fidelity(views: list[RunView]) -> str:
    """One line per run: its fidelity verdict and why (loud when the numbers are the CPU's)."""
    lines = []
    for v in views:
        f = v.run.meta.fidelity
        if f is None:
            lines.append(f"# fidelity {v.label}: not judged (a run made before the monitor)")
            continue
        verdict = f.verdict
        loud = verdict.upper() if verdict != "faithful" else verdict
        why = "; ".join(f.reasons)
        lines.append(f"# fidelity {v.label}: {loud}" + (f" - {why}" if why else "")
                     + (" (these numbers measure the CPU, not the network)"
                        if verdict == "not faithful" else ""))
    return "\n".join(lines) + "\n"


def protocol(views: list[RunView]) -> str:
    """One line per run: the protocol build its agents ran (meta.json `protocol`: compiled or
    the sources, and why), so that CPU-bound numbers of two runs are not compared unawares."""
    return "".join(f"# protocol {v.label}: {compiled.line(protocol_record(v.run))}\n"
                   for v in views)


def _duration(seconds: float) -> str:
    """A short time in the unit that suits it (scaled times run from ns to s)."""
    if math.isnan(seconds):
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def similarity(views: list[RunView]) -> str:
    """How similar each run's emulation is to its real fabric (meta.json `similarity`): the
    ratios that decide its dynamics and the quantities not scaled by the time dilation. Runs
    of one scenario share the record: it is printed once."""
    lines: list[str] = []
    seen: list[Similarity] = []
    for v in views:
        record = v.run.meta.similarity
        if record is None or record in seen:
            continue
        seen.append(record)
        lines += [f"# similarity: {line}" for line in record.lines()]
    return "\n".join(lines) + ("\n" if lines else "")


def dilation(views: list[RunView]) -> str:
    """With the scenario's fabric.real_rate: each run's times in the real frame, the emulated
    ones divided by the time dilation, the emulated ones beside them."""
    lines: list[str] = []
    for v in views:
        factor = v.run.facts.dilation()
        if factor is None:
            continue
        if not lines:
            lines.append(f"# in the real frame (emulated times / {factor:,.0f}):")
        nccl_row = metrics.nccl_rows(v.run.iterations)[0]
        cells = [f"time {_duration(nccl_row.time_us * 1e-6 / factor)} (emulated "
                 f"{_duration(nccl_row.time_us * 1e-6)})"]
        cells += [f"CCT p{p.q:g} {_duration(p.value / factor)} (emulated {_duration(p.value)})"
                  for p in v.percentiles()]
        lines.append(f"#   {v.label}: {', '.join(cells)}")
    return "\n".join(lines) + ("\n" if lines else "")


def gave_up(views: list[RunView]) -> str:
    """One line per QP that exhausted its retries (meta.json `gave_up`): the run's outcome, a
    job that would abort, beside the measurements of what ran until then."""
    return "".join(f"# gave up {v.label}: {g.line()}; a job would abort here\n"
                   for v in views for g in v.run.meta.gave_up)


def chakra(views: list[RunView]) -> str:
    """One line per run of a Chakra trace: the ctrl_deps on absent nodes its reader dropped,
    as Chakra's feeder does (meta.json `facts.ctrl_deps_dropped`)."""
    return "".join(f"# chakra {v.label}: {ctrl_deps_line(dropped)}\n" for v in views
                   if (dropped := v.run.facts.ctrl_deps_dropped) is not None)


def algorithm(views: list[RunView]) -> str:
    """One line per run whose scenario chose the collective's algorithm (meta.json
    `facts.algorithm`); with auto, what the cost model said of each."""
    return "".join(f"# algorithm {v.label}: {line}\n" for v in views
                   if v.run.facts.algorithm is not None
                   and (line := v.run.facts.algorithm_line()) is not None)


def text(views: list[RunView]) -> str:
    """The summary of `views`: collective runs in the nccl-tests table, step runs (training,
    traces, flows) in the step table (a run of jobs may hold both), then what every run has."""
    steps = [v for v in views if step_report.is_step_run(v)]
    collectives = [v for v in views if not step_report.is_step_run(v)]
    head = ((table(collectives) + dilation(collectives) if collectives else "")
            + (step_report.table(steps) if steps else ""))
    return (head + algorithm(views) + chakra(views) + similarity(views) + gave_up(views)
            + fidelity(views) + protocol(views) + writes(views) + recoveries(views)
            + fault_timing(views))
