"""The numbers of a report, as pure functions of the contract's DataFrames.

Times come in as wall clock (s since the epoch) and go out as seconds since the workload's
start (`t0`): a reader compares runs by when things happened in the workload, and epoch
seconds in float64 lose the microseconds that sums of bytes x times need.
No plotting and no IO here, so that every number a figure shows is unit-tested.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd

from hostagent.workloads import nccl
from hostagent.workloads.collectives import Kind
from hostagent.workloads.iterations import IterationRecord
from runcontract import BackgroundWindow

QUANTILES = (50.0, 99.0, 99.9)


# ---- tails ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Percentile:
    """One percentile of a sample, with what it rests on."""

    q: float  # 50, 99, 99.9
    value: float  # NaN without samples
    n: int

    @property
    def needed(self) -> int:
        """Samples for the percentile to lie inside the data rather than between its two
        largest values: 2 for p50, 100 for p99, 1000 for p99.9."""
        return round(1 / (1 - self.q / 100))

    @property
    def note(self) -> str:
        """Empty when the sample is large enough; else a warning a reader needs."""
        if self.n == 0:
            return f"p{self.q:g}: no samples"
        if self.n < self.needed:
            return (f"p{self.q:g} from {self.n} samples (needs >= {self.needed}): it is "
                    f"interpolated between the largest samples, not a measured tail")
        return ""


def percentiles(values: Iterable[float], qs: Iterable[float] = QUANTILES) -> list[Percentile]:
    """numpy's linear-interpolation percentiles, each with the sample count (NaNs dropped)."""
    arr = np.asarray(list(values), dtype=float)
    arr = arr[~np.isnan(arr)]
    return [Percentile(q, float(np.percentile(arr, q)) if arr.size else math.nan, int(arr.size))
            for q in qs]


# ---- collectives ----------------------------------------------------------------------------

def cct(iterations: pd.DataFrame, t0: float) -> pd.DataFrame:
    """One row per iteration: start (first rank) and end (last rank) in s since t0, the
    collective completion time `cct` (s; the definition of `hostagent.workloads.nccl.cct`), bytes,
    warmup, how many ranks reported it and whether every rank verified it."""
    g = iterations.groupby("iteration")
    out = g.agg(start=("start", "min"), end=("end", "max"), kind=("kind", "first"),
                bytes=("bytes", "first"), warmup=("warmup", "first"),
                ranks=("rank", "nunique"), verified=("verified", "all"))
    out["cct"] = out["end"] - out["start"]
    out[["start", "end"]] -= t0
    return out


def bandwidth(ccts: pd.DataFrame, world: int) -> pd.DataFrame:
    """`ccts` with algbw and busbw (GB/s) per iteration, by nccl-tests' formulas."""
    out = ccts.copy()
    kind = out["kind"].iloc[0]
    if kind == "step":  # a training step's iteration moves many collectives: no one busbw
        out["algbw"] = out["busbw"] = math.nan
        return out
    out["algbw"] = nccl.algbw(out["bytes"], out["cct"])
    out["busbw"] = nccl.busbw(kind, world, out["bytes"], out["cct"])
    return out


def nccl_rows(iterations: pd.DataFrame) -> list[nccl.Row]:
    """The rows of the nccl-tests table (mean over timed iterations), by
    `hostagent.workloads.nccl`."""
    records = IterationRecord.of_rows(iterations.to_dict("records"))
    return nccl.summarize(records, int(iterations["rank"].nunique()))


def rank_busbw(iterations: pd.DataFrame) -> list[float]:
    """Each rank's busbw (GB/s) at its own time in the timed loop
    (`hostagent.workloads.nccl.rank_times`, rank order): the spread behind the table's one
    number, which is at the ranks' mean time."""
    timed = iterations[~iterations["warmup"].astype(bool)]
    records = IterationRecord.of_rows(timed.to_dict("records"))
    world = int(iterations["rank"].nunique())
    kind = cast(Kind, records[0].kind)  # read back from JSON as a str
    return [nccl.busbw(kind, world, records[0].bytes, seconds)
            for seconds in nccl.rank_times(records).values()]


# ---- goodput over time ----------------------------------------------------------------------

def deliveries(messages: pd.DataFrame, iterations: pd.DataFrame, t0: float) -> pd.DataFrame:
    """Writes whose bytes count as goodput: those of an iteration the receiving rank verified.
    Columns: host (receiver), sender, start, end (s since t0), size (bytes)."""
    host_of = iterations.groupby("rank")["host"].first()
    verified = iterations.set_index(["rank", "iteration"])["verified"]
    keys = pd.MultiIndex.from_arrays([messages["peer"], messages["iteration"]])
    ok = verified.reindex(keys).fillna(False).to_numpy(dtype=bool)
    m = messages[ok]
    return pd.DataFrame({"host": m["peer"].map(host_of).to_numpy(),
                         "sender": m["host"].to_numpy(),
                         "start": (m["start"] - t0).to_numpy(),
                         "end": (m["end"] - t0).to_numpy(),
                         "size": m["size"].to_numpy(dtype=float)})


def _ramps(x: np.ndarray, rate: np.ndarray, at: np.ndarray) -> np.ndarray:
    """sum_i rate_i * max(t - x_i, 0) at every t of `at`, in O((n + m) log n)."""
    order = np.argsort(x)
    xs, rs = x[order], rate[order]
    cum_r = np.concatenate([[0.0], np.cumsum(rs)])
    cum_rx = np.concatenate([[0.0], np.cumsum(rs * xs)])
    k = np.searchsorted(xs, at, side="right")
    return at * cum_r[k] - cum_rx[k]


def cumulative_bytes(start: np.ndarray, end: np.ndarray, size: np.ndarray,
                     at: np.ndarray) -> np.ndarray:
    """Bytes delivered by each time of `at`, each write's bytes spread evenly over its
    lifetime: a 256 KiB write lasts tens of ms, and counting it at its end would turn a
    steady flow into spikes as tall as the bin is short. A write of no duration counts at
    its end."""
    start, end, size, at = (np.asarray(a, dtype=float) for a in (start, end, size, at))
    lasting = end > start
    rate = size[lasting] / (end[lasting] - start[lasting])
    spread = _ramps(start[lasting], rate, at) - _ramps(end[lasting], rate, at)
    instant_end = np.sort(end[~lasting])
    instant_bytes = np.concatenate([[0.0], np.cumsum(size[~lasting][np.argsort(end[~lasting])])])
    return spread + instant_bytes[np.searchsorted(instant_end, at, side="right")]


def goodput(delivered: pd.DataFrame, bin_s: float, t_end: float,
            by: str | None = None) -> pd.DataFrame:
    """Application bytes per second in bins of `bin_s` from 0 to `t_end` (s since t0; the
    last bin may be shorter). Index: each bin's start; one column per value of `by` (e.g.
    "host"), or a single "total"."""
    edges = np.append(np.arange(0.0, t_end, bin_s), t_end)
    width = np.diff(edges)  # the last bin ends with the workload: divide by its own width
    groups = [("total", delivered)] if by is None else list(delivered.groupby(by))
    data = {name: np.diff(cumulative_bytes(g["start"], g["end"], g["size"], edges)) / width
            for name, g in groups}
    return pd.DataFrame(data, index=pd.Index(edges[:-1], name="time"))


# ---- faults and recovery --------------------------------------------------------------------

def disturbances(events: pd.DataFrame, background: Sequence[BackgroundWindow],
                 t0: float) -> pd.DataFrame:
    """What disturbed the workload, in s since t0: one row per fault (from its applied actions:
    the first turned on to the last undone; NaN end if never undone) and per background
    pattern (as scheduled). The baseline's route changes ("routed" actions) are kept apart
    in `reroutes`, since they are the routing's reaction, not the fault."""
    rows = []
    if not events.empty:
        own = events[events["condition"] != "routed"]
        # a link_up ends the link_down it names: one disturbance from the down to the up
        holder = own["holder"] if "holder" in own.columns else own["event"]
        for _, g in own.groupby(holder.to_numpy()):
            on, off = g[g["on"]], g[~g["on"]]
            first = on if len(on) else g
            rows.append({"source": "fault", "kind": first["kind"].iloc[0],
                         "label": f"{first['kind'].iloc[0]} {first['target'].iloc[0]}",
                         "start": on["applied"].min() - t0,
                         "end": off["applied"].max() - t0 if len(off) else math.nan,
                         "links": tuple(sorted({x for ls in g["links"] for x in ls}))
                         if "links" in g.columns else ()})
    for bg in background:
        rows.append({"source": "background", "kind": bg.pattern,
                     "label": f"{bg.protocol} {bg.pattern} (plane {bg.plane})",
                     "start": bg.start, "end": bg.end, "links": ()})
    return pd.DataFrame(rows, columns=["source", "kind", "label", "start", "end", "links"])


def used_links(links: pd.DataFrame, share: float = 0.01) -> frozenset[str]:
    """Links that carried this run's traffic: bytes sent by either end over the run at least
    `share` of the busiest link's. This is what the transport actually used (a RoCEv2 QP's
    spine is its ECMP hash's choice, known to no table but the ports'); background traffic,
    where there is some, counts too."""
    if links.empty:
        return frozenset()
    per_port = port_totals(links)["tx_bytes"]
    link_of = links.drop_duplicates(["node", "ifname"]).set_index(["node", "ifname"])["link"]
    per_link = per_port.groupby(link_of.reindex(per_port.index).to_numpy()).sum()
    if per_link.max() <= 0:
        return frozenset()
    return frozenset(per_link[per_link >= share * per_link.max()].index)


TOGETHER_S = 0.01  # disturbances starting and ending within this are applied together


def together(dist: pd.DataFrame, t_end: float) -> list[list[int]]:
    """Row positions of `dist` grouped by source, kind and window (to TOGETHER_S), in the
    order they first appear: faults stated together (a blackhole on every leaf of a spine, a
    loss at every NIC) are applied within milliseconds of each other and are one disturbance
    to the workload, not several each ended by the next one's start."""
    groups: dict[tuple[object, ...], list[int]] = {}
    for i, d in enumerate(dist.itertuples()):
        end = d.end if pd.notna(d.end) else t_end
        key = (d.source, d.kind, round(d.start / TOGETHER_S), round(end / TOGETHER_S))
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def as_one(dist: pd.DataFrame, t_end: float) -> pd.DataFrame:
    """`dist` with each group of `together` as one row: from its first start to its last end
    (NaN if any is never undone), its links united, labelled by its first member and how
    many more were applied with it."""
    rows = []
    for group in together(dist, t_end):
        part = dist.iloc[group]
        first = part.iloc[0].to_dict()
        more = f" and {len(group) - 1} more at once" if len(group) > 1 else ""
        rows.append({**first, "label": f"{first['label']}{more}",
                     "start": float(part["start"].min()),
                     "end": math.nan if part["end"].isna().any() else float(part["end"].max()),
                     "links": tuple(sorted({x for ls in part["links"] for x in ls}))})
    return pd.DataFrame(rows, columns=dist.columns)


def overlaps(dist: pd.DataFrame, t_end: float) -> list[list[str]]:
    """Per disturbance, the labels of the others whose time windows overlap its own (an
    event never undone lasts to `t_end`)."""
    end = dist["end"].fillna(t_end).to_numpy(dtype=float)
    start = dist["start"].to_numpy(dtype=float)
    return [[dist["label"].iloc[j] for j in range(len(dist))
             if j != i and start[j] < end[i] and start[i] < end[j]] for i in range(len(dist))]


def slowdown(ccts: pd.DataFrame, start: float, end: float) -> float:
    """The slowest timed iteration that ran while a disturbance lasted, as a multiple of the
    median of those that did not overlap it (NaN when either set is empty): goodput averaged
    over an iteration can hide one iteration that took twice as long."""
    timed = ccts[~ccts["warmup"]]
    during = (timed["start"] < end) & (timed["end"] > start)
    rest = timed.loc[~during, "cct"]
    if not during.any() or rest.empty:
        return math.nan
    return float(timed.loc[during, "cct"].max() / rest.median())


def reroutes(events: pd.DataFrame, t0: float) -> pd.Series:
    """Times (s since t0) at which the baseline's routing converged around a link change."""
    if events.empty:
        return pd.Series([], dtype=float, name="time")
    return (events.loc[events["condition"] == "routed", "applied"] - t0).rename("time")


def trailing_mean(series: pd.Series, window_s: float, bin_s: float) -> pd.Series:
    """Each bin's mean over the last `window_s` (at least one bin): a collective's goodput
    swings within one iteration by design (ring steps wait for each other), so recovery is
    judged on goodput over about one iteration, not on single bins."""
    return series.rolling(max(1, round(window_s / bin_s)), min_periods=1).mean()


@dataclass(frozen=True)
class Recovery:
    """How goodput came through one disturbance. `recovery_s` is 0 when goodput never fell
    below the threshold, None when it was not back by the end of the window."""

    start: float  # s since t0
    pre_rate: float  # bytes/s, mean over the window before the event
    threshold: float  # bytes/s
    dipped: bool
    recovery_s: float | None
    bytes_lost: float  # deficit against pre_rate from the event to recovery (or window end)
    note: str


def recovery(series: pd.Series, start: float, bin_s: float, until: float, *,
             fraction: float = 0.9, pre_window: float = 1.0,
             level_from: float | None = None) -> Recovery:
    """Recovery after an event at `start` from a goodput series (bytes/s per bin, indexed by
    bin start): the time from the event until the first bin back at `fraction` of the mean
    over the `pre_window` seconds before it, after the first bin below that; and the bytes
    lost meanwhile against the pre-event rate. Only whole bins ending by `until` (the next
    event or the workload's end) count, so the ramp-down at the end is not read as a dip.
    `level_from`: take the level before this time instead of before `start` (a recovery
    timed from a fault's end is back at the level before the fault began)."""
    t = series.index.to_numpy(dtype=float)
    v = series.to_numpy(dtype=float)
    ref = start if level_from is None else level_from
    before = (t >= ref - pre_window - 1e-9) & (t + bin_s <= ref + 1e-9)
    pre = float(v[before].mean()) if before.any() else 0.0
    threshold = fraction * pre
    if pre <= 0:
        return Recovery(start, pre, threshold, False, None, 0.0,
                        "no goodput before the event: nothing to recover to")
    span = min(pre_window, ref)
    short = f"level before measured over {span:.2f} s only; " if span < pre_window else ""
    window = (t + bin_s > start) & (t + bin_s <= until + 1e-9)
    tw, vw = t[window], v[window]
    below = np.flatnonzero(vw < threshold)
    if below.size == 0:
        return Recovery(start, pre, threshold, False, 0.0, 0.0,
                        f"{short}goodput never fell below {fraction:.0%} of its level before")
    back = np.flatnonzero(vw[below[0]:] >= threshold)
    stop = below[0] + back[0] if back.size else len(vw)
    lost = float(np.clip(pre - vw[:stop], 0, None).sum() * bin_s)
    if not back.size:
        return Recovery(start, pre, threshold, True, None, lost,
                        f"{short}not back to {fraction:.0%} by {until:.2f} s")
    return Recovery(start, pre, threshold, True, max(float(tw[stop]) - start, 0.0), lost,
                    short.rstrip("; "))


def recoveries(series: pd.Series, events: pd.DataFrame, bin_s: float, t_end: float, *,
               fraction: float = 0.9, pre_window: float = 1.0,
               used: frozenset[str] | None = None,
               ccts: pd.DataFrame | None = None) -> pd.DataFrame:
    """`recovery` for each row of `disturbances(...)` (those applied together as one:
    `as_one`), each judged until the next one starts
    (or `t_end`); `after_end_s` says how long after the disturbance ended goodput was back
    (negative: back while it lasted), since a fault that halves a path set keeps goodput
    down until it is undone. With `used` (the links this run carried traffic on): `on_paths`,
    how many of a fault's links the run used (a dip during a fault on none of them is not
    that fault's). `overlaps` names the disturbances whose windows overlap this one, and
    `slowdown` is the slowest iteration during it over the others' median (with `ccts`)."""
    ordered = events.copy()
    if "links" not in ordered.columns:
        ordered["links"] = [()] * len(ordered)
    ordered = as_one(ordered, t_end).sort_values("start").reset_index(drop=True)
    others = overlaps(ordered, t_end)
    rows = []
    for i, ev in ordered.iterrows():
        until = ordered["start"].iloc[i + 1] if i + 1 < len(ordered) else t_end
        r = recovery(series, ev["start"], bin_s, until, fraction=fraction,
                     pre_window=pre_window)
        back_after_end = (ev["start"] + r.recovery_s - ev["end"]
                          if r.recovery_s is not None and pd.notna(ev["end"]) else None)
        links = tuple(ev["links"])
        on_paths = (len(set(links) & used) if used is not None and links else None)
        slow = (slowdown(ccts, ev["start"], ev["end"] if pd.notna(ev["end"]) else t_end)
                if ccts is not None else math.nan)
        rows.append({**ev.to_dict(), "pre_rate": r.pre_rate, "dipped": r.dipped,
                     "recovery_s": r.recovery_s, "after_end_s": back_after_end,
                     "bytes_lost": r.bytes_lost, "note": r.note, "on_paths": on_paths,
                     "overlaps": others[i], "slowdown": slow})
    out = pd.DataFrame(rows, columns=[*ordered.columns, "pre_rate", "dipped", "recovery_s",
                                      "after_end_s", "bytes_lost", "note", "on_paths",
                                      "overlaps", "slowdown"])
    return out.astype({"recovery_s": float, "after_end_s": float,
                       "slowdown": float})  # None: NaN


# ---- load balance, EV health, counters ------------------------------------------------------

@dataclass(frozen=True)
class Balance:
    """How evenly a load spreads: max/mean 1 and cov 0 when perfectly even."""

    n: int
    mean: float
    max_over_mean: float
    min_over_mean: float
    cov: float  # population standard deviation / mean


def balance(values: Iterable[float]) -> Balance:
    arr = np.asarray(list(values), dtype=float)
    if arr.size == 0 or arr.mean() == 0:
        return Balance(int(arr.size), 0.0, math.nan, math.nan, math.nan)
    mean = float(arr.mean())
    return Balance(int(arr.size), mean, float(arr.max() / mean), float(arr.min() / mean),
                   float(arr.std() / mean))


def host_leaves(links: pd.DataFrame) -> dict[tuple[str, int], str]:
    """(host, plane) -> the leaf its port in that plane connects to, from the port table
    (a host port's link is named host-leaf)."""
    ports = links[links["kind"] == "host"][["node", "plane", "link"]].drop_duplicates()
    return {(str(r.node), int(r.plane)): str(r.link).split("-", 1)[1]
            for r in ports.itertuples() if str(r.link).startswith(f"{r.node}-")}


def collision_bound(paths: pd.DataFrame, leaves: dict[tuple[str, int], str],
                    hosts: dict[int, str]) -> float | None:
    """The share of the ideal that the spread of packets over spines allows a collective whose
    flows all run at once (a ring's steps, every flow the same bytes): per plane, the largest
    flow's packets through the spines over the packets of the busiest leaf-spine link. A
    RoCEv2 QP keeps to the one spine ECMP hashed it to, so k QPs on one link give 1/k; MRC's
    sprayed EVs give about 1, less their imbalance. None without spines (no flow crossed one,
    or a run that did not record them). `hosts`: rank -> host, for the peers."""
    if paths.empty or "spine" not in paths:
        return None
    crossing = paths[(paths["sent"] > 0) & paths["spine"].notna()]
    if crossing.empty:
        return None
    bound = 1.0
    for plane, group in crossing.groupby("plane"):
        load: dict[tuple[str, int, str], float] = {}
        for r in group.itertuples():
            spine = int(r.spine)
            for link in ((leaves[(str(r.host), int(plane))], spine, "up"),
                         (leaves[(hosts[int(r.peer)], int(plane))], spine, "down")):
                load[link] = load.get(link, 0.0) + float(r.sent)
        flow = float(group.groupby(["host", "peer"])["sent"].sum().max())
        bound = min(bound, flow / max(load.values()))
    return bound


def ev_balance(paths: pd.DataFrame) -> pd.DataFrame:
    """Per QP that sent anything: how evenly its packets spread over its EVs (DENIED ones,
    never meant to carry traffic, left out)."""
    cols = ["host", "peer", "qpn", "n", "mean", "max_over_mean", "min_over_mean", "cov"]
    if paths.empty:
        return pd.DataFrame(columns=cols)
    used = paths[paths["state"] != "DENIED"]
    rows = [{"host": h, "peer": p, "qpn": q, **balance(g["sent"]).__dict__}
            for (h, p, q), g in used.groupby(["host", "peer", "qpn"]) if g["sent"].sum() > 0]
    return pd.DataFrame(rows, columns=cols)


def ev_segments(ev_states: pd.DataFrame, paths: pd.DataFrame, t0: float,
                t_end: float) -> pd.DataFrame:
    """Each EV's states as intervals (s since t0) from 0 to `t_end`: before its first change
    it was in that change's `old` state; an EV that never changed stays in its final state."""
    cols = ["host", "peer", "qpn", "ev", "plane", "state", "start", "end"]
    if paths.empty:
        return pd.DataFrame(columns=cols)
    key = ["host", "peer", "qpn", "ev"]
    plane = paths.set_index(key)["plane"]
    changes = {} if ev_states.empty else dict(list(ev_states.groupby(key)))
    rows = []
    for k, final in paths.set_index(key)["state"].items():
        g = changes.get(k)
        if g is None:
            rows.append((*k, plane[k], final, 0.0, t_end))
            continue
        g = g.sort_values("time")
        times = [0.0, *(g["time"] - t0).clip(lower=0), t_end]
        states = [g["old"].iloc[0], *g["new"]]
        rows += [(*k, plane[k], s, a, b) for s, a, b in zip(states, times, times[1:]) if b > a]
    return pd.DataFrame(rows, columns=cols)


def state_time(segments: pd.DataFrame) -> pd.DataFrame:
    """Seconds each EV spent in each state (one column per state)."""
    if segments.empty:
        return pd.DataFrame()
    d = segments.assign(seconds=segments["end"] - segments["start"])
    return d.pivot_table(index=["host", "peer", "qpn", "ev"], columns="state",
                         values="seconds", aggfunc="sum", fill_value=0.0)


QP_COUNTERS = ("data_sent", "retransmits", "timeouts", "nacks_sent", "trims_received",
               "duplicates", "dropped_out_of_order")


def failed_qps(qps: pd.DataFrame) -> int:
    """QPs that gave up: qps.parquet's `failed` holds why (None while the QP lived on)."""
    if "failed" not in qps.columns:
        return 0
    return int(sum(isinstance(v, str) and bool(v) for v in qps["failed"]))


def qp_counters(qps: pd.DataFrame, by: str = "host") -> pd.DataFrame:
    """Sums of the QP counters (those present) per `by`: where the loss recovery happened."""
    present = [c for c in QP_COUNTERS if c in qps.columns]
    return qps.groupby(by)[present].sum()


# ---- ports ----------------------------------------------------------------------------------

_UP = {"host": "leaf", "leaf": "spine"}  # a port toward the spines carries traffic "up"
# Counters of the in-fabric eBPF queue (router ports; absent in older runs, NaN on host ports)
FABRIC_COUNTERS = ("ecn_marked", "trimmed", "bpf_dropped", "lossless_overflow")


def ports(links: pd.DataFrame, tiers: dict[str, str]) -> pd.DataFrame:
    """One row per port (node, ifname): its link, plane, the node at the other end, the
    direction its transmissions go (up toward the spines, or down), a label "a→b", and an
    order key: by plane, host ports before fabric ports, up before down."""
    p = links.drop_duplicates(["node", "ifname"])[["node", "ifname", "link", "kind", "plane"]]
    p = p.copy()
    p["peer"] = [next((e for e in link.split("-") if e != node), node)
                 for node, link in zip(p["node"], p["link"])]
    p["direction"] = ["up" if _UP.get(tiers.get(a, "")) == tiers.get(b) else "down"
                      for a, b in zip(p["node"], p["peer"])]
    p["label"] = p["node"] + "→" + p["peer"]
    p["order"] = list(zip(p["plane"], p["kind"] != "host", p["direction"] != "up", p["label"]))
    return p.sort_values("order").drop(columns="order").reset_index(drop=True)


def port_rates(links: pd.DataFrame, t0: float, rates: dict[str, float]) -> pd.DataFrame:
    """Per port and sample interval: its end time (s since t0), transmitted bits/s, the
    share of its nominal rate (`rates[kind]`, bits/s) and the drops in that interval
    (interface drops plus the data queue's, which are read on some samples only)."""
    d = links.sort_values(["node", "ifname", "time"]).copy()
    g = d.groupby(["node", "ifname"], sort=False)
    dt = g["time"].diff()
    d["tx_bps"] = g["tx_bytes"].diff() * 8 / dt
    d["util"] = d["tx_bps"] / d["kind"].map(rates)
    queue = d.groupby(["node", "ifname"], sort=False)["queue_drops"].ffill().fillna(0)
    d["drops"] = g["tx_drop"].diff() + queue.groupby([d["node"], d["ifname"]]).diff()
    d["time"] = d["time"] - t0
    return d[dt.notna()][["time", "node", "ifname", "link", "kind", "plane", "tx_bps", "util",
                          "drops"]]


def ev_rates(ev_load: pd.DataFrame, t0: float, packet_bits: float, link_bps: float,
             hosts: dict[int, str]) -> pd.DataFrame:
    """Per MRC EV and sample interval: its end time (s since t0) and the EV's data rate as a
    share of the host link rate (`util`, like a port's), with a label "h0→h3 p0s1" (plane and
    spine; "p1 local" for a same-leaf path). `hosts`: rank -> host name."""
    cols = ["time", "host", "label", "plane", "util"]
    if ev_load.empty:
        return pd.DataFrame(columns=cols)
    d = ev_load.sort_values(["host", "qpn", "ev", "time"]).copy()
    g = d.groupby(["host", "qpn", "ev"], sort=False)
    dt = g["time"].diff()
    d["util"] = g["sent"].diff() * packet_bits / dt / link_bps
    path = [f"p{p}s{int(s)}" if pd.notna(s) else f"p{p} local"
            for p, s in zip(d["plane"], d["spine"], strict=True)]
    d["label"] = [f"{h}→{hosts.get(r, r)} {p}" for h, r, p in zip(d["host"], d["peer"], path,
                                                                   strict=True)]
    d["time"] = d["time"] - t0
    return d[dt.notna()][cols]


def port_totals(links: pd.DataFrame) -> pd.DataFrame:
    """Per port over the whole run: bytes and packets sent, drops (interface and data queue),
    and the in-fabric queue's ECN marks, trims and drops where the run has them."""
    counters = ["tx_bytes", "tx_packets", "tx_drop", "queue_drops",
                *[c for c in FABRIC_COUNTERS if c in links.columns]]
    g = links.sort_values("time").groupby(["node", "ifname"])[counters]
    return (g.max() - g.min()).fillna(0)


def utilisation_grid(rates: pd.DataFrame, bin_s: float, t_end: float,
                     row: str | list[str]) -> pd.DataFrame:
    """Mean utilisation per `row` (a column such as the port's label, or plane) and time bin
    of `bin_s`, over the whole bins from 0 to `t_end` (a bin past the workload's end would
    show idle ports): rows x bins, for a heatmap. A sample counts in the bin its interval
    ends in."""
    n = max(1, math.floor(t_end / bin_s + 1e-9))
    r = rates[(rates["time"] > 0) & (rates["time"] <= n * bin_s + 1e-9)]
    bins = np.floor((r["time"] - 1e-9) / bin_s) * bin_s
    grid = r.assign(bin=bins.round(9)).pivot_table(index=row, columns="bin", values="util",
                                                    aggfunc="mean")
    return grid.reindex(columns=np.round(np.arange(n) * bin_s, 9))
