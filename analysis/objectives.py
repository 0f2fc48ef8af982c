"""A drill's objectives judged from its runs' tables (pure: no IO, no testbed).

Each objective becomes a `Verdict`: what was measured (over every repetition), the limit, and
pass, fail or inconclusive, with the sample count beside every percentile. Inconclusive means
the data cannot answer: too few samples for the percentile, no fault window, no steady state
to compare with, or the fidelity monitor did not judge a run faithful. A transport's drill
passes only when every objective passed and every run was judged faithful; it fails when any
objective failed (a failure on a run not judged faithful says so, since it may be the
testbed's own).

Definitions (times in s since each run's workload start):
- steady state: the control runs (the scenario without faults): paired, each repetition's own
  control on its seed (the ratios of a repetition are to its control's level, the pooled
  percentiles to the p50 of all the controls); unpaired, every control for every repetition;
  without a control, each repetition before its first fault;
- fault window: from the first disturbance's start (a fault, a straggler as scheduled, or
  background traffic) to the last one's end (or the workload's end);
- goodput: bytes of verified writes delivered per second (metrics.deliveries, each write's
  bytes spread over its lifetime);
- a stall: an interval inside the timed iterations in which no write of any rank completed;
- a training step's fault-window iterations: its timed steps (first node start to last node
  end over every rank, analysis/steps.py) that overlap the fault window; their mean time, and
  their exposed communication per rank (mean over ranks and those iterations), are compared
  with the steady state's: the control's timed steps, or without a control the steps that
  ended before the first fault.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import metrics, steps
from .load import Run

FRACTION = 0.9  # recovered = back to this share of the level before (as the report's)
PRE_WINDOW = 1.0
BIN_S = 0.05
# Recovery reads goodput over this much time at least (trailing), not over one 50 ms bin:
# measured in the 11 control runs of the suite (no fault; c6d3dc8's code, one iteration
# 21-39 ms), 0-5 of each run's ~37 bins fell below 90% of its own mean (a slow iteration:
# CPU), so a single bin read a steady run as a dip, and a dip in a fault's last judged bin
# as "not back" (t1-blackhole-reboot: 158 Mbit/s against a threshold of 163, with the workload
# ending before the next bin). Over 100 ms, two bins, no bin of 9 of those controls fell
# below 90% (one of leaf-down's; gray-loss's control had a 0.39 stall of its own). 100 ms is a
# fifth of the suite's 500 ms limits; a step back to full goodput reads up to 80 ms later
# than in single bins, so the measure is no easier to pass for a slow recovery.
RECOVERY_WINDOW_S = 0.1
Status = str  # "pass" | "fail" | "inconclusive", or REPORTED
REPORTED = "reported"  # measured without a limit (a drill's `report`): no verdict counts it


@dataclass(frozen=True)
class Verdict:
    objective: str
    measured: str  # as a reader reads it, with its unit and n where it is a percentile
    limit: str
    status: Status
    note: str = ""
    value: float = math.nan  # the measured number, for JSON


def _fmt_ms(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds * 1e3:.1f} ms"


def fault_window(run: Run) -> tuple[float, float] | None:
    """(start, end) of the run's disturbances (faults applied, background traffic, and
    stragglers as the scenario scheduled them: their agents apply them, so no event records
    them), s since t0, ending at the last one undone or the workload's end, whichever comes
    first (a fault undone after the last iteration ended would count its idle tail as lost
    goodput: measured, gray-loss's window ran 0.19 s past the workload in one repetition and
    not in the other, 86% against 97%); None without any."""
    background = run.facts.background if run.facts is not None else ()
    t_end = run.t_end - run.t0
    dist = metrics.disturbances(run.events, background, run.t0)
    stragglers = steps.straggler_windows(run.scenario, t_end)
    if len(stragglers):
        dist = pd.concat([dist, stragglers], ignore_index=True) if len(dist) else stragglers
    dist = dist.dropna(subset=["start"])
    if dist.empty:
        return None
    return float(dist["start"].min()), min(float(dist["end"].fillna(t_end).max()), t_end)


def goodput_between(run: Run, start: float, end: float) -> float:
    """Mean goodput (bytes/s) of a run from `start` to `end` (s since t0)."""
    d = metrics.deliveries(run.messages, run.iterations, run.t0)
    if end <= start or d.empty:
        return math.nan
    cum = metrics.cumulative_bytes(d["start"], d["end"], d["size"], np.array([start, end]))
    return float((cum[1] - cum[0]) / (end - start))


def timed_span(run: Run) -> tuple[float, float]:
    c = metrics.cct(run.iterations, run.t0)
    c = c[~c["warmup"]]
    return float(c["start"].min()), float(c["end"].max())


def write_times(run: Run) -> np.ndarray:
    """Completion time of every write of the timed iterations (s)."""
    m = run.messages
    timed = m[~m["warmup"]] if "warmup" in m.columns else m
    return (timed["end"] - timed["start"]).to_numpy(dtype=float)


def longest_stall(run: Run) -> float:
    """The longest interval inside the timed iterations with no write completing (s)."""
    start, end = timed_span(run)
    ends = np.sort((run.messages["end"] - run.t0).to_numpy(dtype=float))
    ends = ends[(ends > start) & (ends < end)]
    points = np.concatenate([[start], ends, [end]])
    return float(np.diff(points).max()) if len(points) > 1 else math.nan


def _percentile_verdict(name: str, samples: np.ndarray, steady: np.ndarray,
                        ratio: float) -> Verdict:
    p99, = metrics.percentiles(samples, (99.0,))
    p50, = metrics.percentiles(steady, (50.0,))
    measured = (f"p99 {_fmt_ms(p99.value)} (n={p99.n}) = {p99.value / p50.value:.2f} x steady "
                f"p50 {_fmt_ms(p50.value)} (n={p50.n})" if p50.n and p99.n else "no samples")
    limit = f"<= {ratio:g} x steady p50"
    if p99.n < p99.needed:
        return Verdict(name, measured, limit, "inconclusive",
                       f"p99 needs >= {p99.needed} samples, has {p99.n}: add repetitions or "
                       f"iterations", p99.value / p50.value if p50.n else math.nan)
    if not p50.n:
        return Verdict(name, measured, limit, "inconclusive", "no steady-state samples")
    value = p99.value / p50.value
    return Verdict(name, measured, limit, "pass" if value <= ratio else "fail", "", value)


def evaluate(runs: Sequence[Run], controls: Sequence[Run], spec: dict,
             paired: bool = False) -> list[Verdict]:
    """Every objective `spec` states (Objectives.model_dump()), judged over the repetitions
    `runs` against the steady state of `controls`; `paired`: `controls[k]` is `runs[k]`'s
    own."""
    if paired and len(controls) != len(runs):
        raise ValueError(f"{len(runs)} repetitions paired with {len(controls)} controls")
    # the controls each repetition is compared with
    steady_of = ([[c] for c in controls] if paired else [list(controls)] * len(runs))
    n = f"{len(controls)} run{'s' if len(controls) != 1 else ''}"
    basis = f"against its seed's control, {n}" if paired else f"control, {n}"
    out: list[Verdict] = []
    n_runs = len(runs)
    if spec.get("verified"):
        wrong = sum(int((~r.iterations["verified"]).sum()) for r in runs)
        total = sum(len(r.iterations) for r in runs)
        incomplete = [r.name for r in runs if not r.complete]
        status = "pass" if wrong == 0 and not incomplete else "fail"
        note = f"runs not complete: {', '.join(incomplete)}" if incomplete else ""
        out.append(Verdict("every collective verified", f"{wrong} of {total} rank-iterations "
                           f"wrong ({n_runs} runs)", "0 wrong", status, note, float(wrong)))
    if spec.get("no_failed_qp"):
        failed = sum(metrics.failed_qps(r.qps) for r in runs)
        out.append(Verdict("no QP failed", f"{failed} QPs failed", "0",
                           "pass" if failed == 0 else "fail", "", float(failed)))
    windows = [fault_window(r) for r in runs]
    if spec.get("goodput_ratio") is not None:
        out.append(_goodput(runs, steady_of, basis, windows, float(spec["goodput_ratio"])))
    if spec.get("cct_p99_ratio") is not None:
        samples = np.concatenate([metrics.cct(r.iterations, r.t0).query("~warmup")["cct"]
                                  .to_numpy(dtype=float) for r in runs])
        steady = _steady(runs, controls, windows,
                         lambda r: metrics.cct(r.iterations, r.t0).query("~warmup"))
        out.append(_percentile_verdict("CCT p99", samples, steady,
                                       float(spec["cct_p99_ratio"])))
    if spec.get("message_p99_ratio") is not None:
        samples = np.concatenate([write_times(r) for r in runs])
        steady_writes = (np.concatenate([write_times(c) for c in controls]) if controls
                         else np.array([]))
        out.append(_percentile_verdict("write completion p99", samples, steady_writes,
                                       float(spec["message_p99_ratio"])))
    if spec.get("recovery_ms") is not None:
        out.append(_recovery(runs, float(spec["recovery_ms"]) / 1e3,
                             spec.get("recovery_from", "end")))
    if spec.get("max_stall_ms") is not None:
        stalls = [longest_stall(r) for r in runs]
        worst = max(stalls) if stalls else math.nan
        limit = float(spec["max_stall_ms"]) / 1e3
        out.append(Verdict("longest stall", f"{_fmt_ms(worst)} (worst of {n_runs} runs)",
                           f"<= {limit * 1e3:g} ms", "pass" if worst <= limit else "fail",
                           "", worst * 1e3))
    if spec.get("step_slowdown") is not None:
        out.append(_step_verdict(runs, steady_of, basis, windows, float(spec["step_slowdown"]),
                                 "time"))
    if spec.get("exposed_ratio") is not None:
        out.append(_step_verdict(runs, steady_of, basis, windows, float(spec["exposed_ratio"]),
                                 "exposed"))
    if spec.get("faithful"):
        verdicts = [r.meta.verdict for r in [*runs, *controls]]
        good = sum(v == "faithful" for v in verdicts)
        missing = sum(v is None for v in verdicts)
        note = (f"{missing} runs carry no fidelity verdict (meta.json `fidelity`)"
                if missing else "")
        out.append(Verdict("run judged faithful", f"{good} of {len(verdicts)} runs faithful",
                           "all", "pass" if good == len(verdicts) else "inconclusive", note,
                           float(good)))
        if good < len(verdicts):  # a failure stays one, but may be the testbed's own
            out = [Verdict(v.objective, v.measured, v.limit, v.status,
                           "; ".join(x for x in (v.note, "on runs not all judged faithful")
                                     if x), v.value) if v.status == "fail" else v
                   for v in out]
    return out


def _steady(runs: Sequence[Run], controls: Sequence[Run], windows: list,
            ccts_of) -> np.ndarray:
    """Steady-state CCTs: the controls', or the iterations that ended before each run's
    first fault."""
    if controls:
        return np.concatenate([ccts_of(c)["cct"].to_numpy(dtype=float) for c in controls])
    parts = []
    for r, w in zip(runs, windows, strict=True):
        c = ccts_of(r)
        parts.append((c[c["end"] <= w[0]] if w else c)["cct"].to_numpy(dtype=float))
    return np.concatenate(parts) if parts else np.array([])


def step_table(run: Run) -> pd.DataFrame:
    """The timed iterations of a step run: per iteration its start and end (s since t0), step
    time and exposed communication per rank (mean over ranks); empty for a collective run."""
    nodes = run.tables.get("steps")
    if nodes is None or nodes.empty:
        return pd.DataFrame(columns=["iteration", "start", "end", "time", "exposed"])
    times = steps.iteration_times(nodes)  # warm-ups too: the first timed one begins after them
    times = times[~times["warmup"].astype(bool)]
    nodes = nodes[~nodes["warmup"].astype(bool)]
    exposed = steps.rank_metrics(nodes).groupby("iteration")["exposed"].mean()
    return pd.DataFrame({"iteration": times["iteration"], "start": times["start"] - run.t0,
                         "end": times["end"] - run.t0, "time": times["time"],
                         "exposed": times["iteration"].map(exposed).to_numpy()})


def _group_exposed(run: Run, iterations: pd.Series) -> pd.Series:
    """Per group, its exposed time per member (mean over members and the iterations given)."""
    nodes = run.tables.get("steps")
    if nodes is None or nodes.empty:
        return pd.Series(dtype=float)
    g = steps.group_exposed(nodes[nodes["iteration"].isin(iterations)])
    return g.groupby("group")["exposed_mean"].mean() if len(g) else pd.Series(dtype=float)


def _step_verdict(runs: Sequence[Run], steady_of: list[list[Run]], basis: str,
                  windows: list, ratio: float, metric: str) -> Verdict:
    """Step time (`metric` "time") or exposed communication per rank ("exposed") of the
    fault-window iterations, mean over them, as a multiple of the mean of the steady state
    each repetition is compared with (`steady_of[k]`: its controls); the worst repetition is
    judged. Exposed communication also names the group whose exposure grew the most."""
    name = {"time": "step time in the fault window",
            "exposed": "exposed communication in the fault window"}[metric]
    limit = f"<= {ratio:g} x steady"
    tables = [step_table(r) for r in runs]
    if all(t.empty for t in tables):
        return Verdict(name, "-", limit, "inconclusive", "no training-step iterations")
    if any(steady_of):
        steady_sets = [[(c, step_table(c)) for c in cs] for cs in steady_of]
    else:
        pooled = [(r, t[t["end"] <= w[0]]) for r, t, w in zip(runs, tables, windows,
                                                              strict=True) if w]
        steady_sets = [pooled] * len(runs)
        basis = "steps before the first fault"
    # per repetition with a fault window: its steps in the window, its steady steps
    overlap = [(r, t[(t["start"] < w[1]) & (t["end"] > w[0])], ss)
               for r, t, w, ss in zip(runs, tables, windows, steady_sets, strict=True)
               if w is not None]
    inside = [(r, t, ss, _steady_mean(ss, metric)) for r, t, ss in overlap if len(t)]
    steadies = [m for *_, m in inside]
    if not inside or any(math.isnan(m) or m <= 0 for m in steadies):
        why = ("no fault was applied" if not any(windows) else
               "no timed step overlaps the fault window" if not inside else
               "no steady-state steps" if any(math.isnan(m) for m in steadies) else
               "the steady state exposes no communication")
        return Verdict(name, "-", limit, "inconclusive", why)
    shares = [float(t[metric].mean()) / m for _, t, _, m in inside]
    n = sum(len(t) for _, t, _, _ in inside)
    worst_group = ("", math.nan)
    if metric == "exposed":
        for r, t, ss, _ in inside:
            base = pd.concat([_group_exposed(c, ct["iteration"]) for c, ct in ss])
            base = base.groupby(level=0).mean()
            grew = (_group_exposed(r, t["iteration"]) / base[base > 0]).dropna()
            if len(grew) and not grew.max() <= worst_group[1]:
                worst_group = (str(grew.idxmax()), float(grew.max()))
    k = int(np.argmax(shares))
    worst, steady = shares[k], steadies[k]
    measured = (f"{worst:.2f} x (worst of {len(shares)}; {n} steps in the window; steady "
                f"{steady * 1e3:.1f} ms per {'step' if metric == 'time' else 'rank'}, {basis})")
    if worst_group[0]:
        measured += f"; most grown: {worst_group[0]} {worst_group[1]:.2f} x"
    return Verdict(name, measured, limit, "pass" if worst <= ratio else "fail", "", worst)


def _steady_mean(steady: list[tuple[Run, pd.DataFrame]], metric: str) -> float:
    """The mean of `metric` over the steady steps of these runs (nan without any)."""
    rows = pd.concat([t for _, t in steady]) if steady else pd.DataFrame()
    return float(rows[metric].mean()) if len(rows) else math.nan


def _goodput(runs: Sequence[Run], steady_of: list[list[Run]], basis: str, windows: list,
             ratio: float) -> Verdict:
    """Goodput in each repetition's fault window as a share of the steady goodput it is
    compared with (`steady_of[k]`: the mean of its controls'); the worst is judged."""
    name, limit = "goodput in the fault window", f">= {ratio:.0%} of steady"
    if any(steady_of):
        levels = {id(c): goodput_between(c, *timed_span(c)) for cs in steady_of for c in cs}
        steady = [float(np.mean([levels[id(c)] for c in cs])) for cs in steady_of]
    else:
        pre = [goodput_between(r, timed_span(r)[0], w[0]) for r, w in zip(runs, windows,
                                                                          strict=True) if w]
        pre = [p for p in pre if not math.isnan(p)]
        steady = [float(np.mean(pre)) if pre else math.nan] * len(runs)
        basis = "before the first fault"
    judged = [(goodput_between(r, *w) / s, s) for r, w, s in zip(runs, windows, steady,
                                                                strict=True) if w is not None]
    if not judged or any(math.isnan(s) or s <= 0 for _, s in judged):
        why = "no fault was applied" if not judged else "no steady-state goodput"
        return Verdict(name, "-", limit, "inconclusive", why)
    worst, its_steady = min(judged)
    # one decimal where whole percent would round onto the limit (94.6% is no "95%" that fails)
    shown = f"{worst:.1%}" if round(worst, 2) == round(ratio, 2) else f"{worst:.0%}"
    measured = (f"{shown} (worst of {len(judged)}; steady {its_steady * 8e-6:.1f} Mbit/s summed "
                f"over receivers, {basis})")
    return Verdict(name, measured, limit, "pass" if worst >= ratio else "fail", "", worst)


def _recovery(runs: Sequence[Run], limit: float, origin: str) -> Verdict:
    """Per fault of every run: the time from its start (or end) until goodput, as a trailing
    mean over RECOVERY_WINDOW_S (or one iteration, if longer), is back at 90% of the level
    before the fault began. Timed from the end, the dip is sought from the end: a flap whose
    goodput came back between its cycles and fell again in its last is judged on its last
    (read from its start, the return between cycles stood for the whole flap). Judged until
    the deadline (origin + limit) plus one iteration, and never over the last iteration of
    the workload, whose ramp-down is no dip; a dip that starts after the deadline is not this
    fault's. A fault whose window the workload's end cuts before its deadline, with goodput
    still below 90% then, is not judged: "not back by the limit" would claim a limit that had
    not come; so is a fault the workload ended too soon after to judge at all."""
    name = f"recovery to {FRACTION:.0%}"
    worst, n, not_back, cut = 0.0, 0, 0, 0
    for r in runs:
        t0, t_end = r.t0, r.t_end - r.t0
        ccts = metrics.cct(r.iterations, t0)
        timed = ccts[~ccts["warmup"]]["cct"]
        one = float(timed.median()) if len(timed) else BIN_S
        delivered = metrics.deliveries(r.messages, r.iterations, t0)
        total = metrics.goodput(delivered, BIN_S, t_end, by="host").sum(axis=1)
        judged = metrics.trailing_mean(total, max(one, RECOVERY_WINDOW_S), BIN_S)
        dist = metrics.disturbances(r.events, (), t0)
        dist = dist[dist["source"] == "fault"]
        for _, ev in dist.iterrows():
            end = ev["end"] if pd.notna(ev["end"]) else t_end
            since = ev["start"] if origin == "start" else end
            until = min(since + limit + one, t_end - one)
            rec = (metrics.recovery(judged, since, BIN_S, until, fraction=FRACTION,
                                    pre_window=PRE_WINDOW, level_from=ev["start"])
                   if until > since else None)
            if rec is None or (rec.recovery_s is None and until < since + limit):
                cut += 1  # the workload ended before the limit, goodput not back yet
                continue
            n += 1
            if rec.recovery_s is None:
                not_back += 1
                continue
            worst = max(worst, rec.recovery_s)
    lim = f"<= {limit * 1e3:g} ms from the fault's {origin}"
    note = (f"{cut} fault{'s' if cut > 1 else ''} not judged: below {FRACTION:.0%} when the "
            "workload ended, before the limit" if cut else "")
    if n == 0:
        return Verdict(name, "-", lim, "inconclusive",
                       note or "no fault with time to judge after it")
    if not_back:
        return Verdict(name, f"{not_back} of {n} faults: not back by the limit", lim, "fail",
                       note, math.inf)
    return Verdict(name, f"{worst * 1e3:.0f} ms (worst of {n} faults)", lim,
                   "pass" if worst <= limit else "fail", note, worst * 1e3)


def overall(verdicts: Sequence[Verdict]) -> Status:
    """fail if any objective failed; pass only if every one passed; else inconclusive.
    Reported rows judge nothing."""
    statuses = {v.status for v in verdicts} - {REPORTED}
    if "fail" in statuses:
        return "fail"
    return "pass" if statuses <= {"pass"} else "inconclusive"
