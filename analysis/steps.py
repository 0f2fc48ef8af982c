"""What a training step loses to the network, from steps.parquet (one row per node, rank and
iteration; runcontract.STEP_COLUMNS).

Per rank and iteration (ASTRA-sim's and SimAI's vocabulary):
- time: the rank's first node start to its last node end;
- compute: the time covered by its compute nodes (their union);
- communication: the time covered by its collectives, sends and receives (their union);
- exposed: communication not overlapped by the rank's own compute (comm minus compute);
- idle: the time covered by neither (waiting for a peer outside any operation).
So time = compute + exposed + idle.

Per group and iteration: each collective call's completion time (its first member's start to
its last member's end; calls matched by their order within the group on each rank, the order
every member runs them in), its busbw by nccl-tests' definition (hostagent/workloads/nccl.py),
and the group's exposed time: the union of its nodes on a rank minus that rank's compute,
averaged over its members. Point-to-point nodes count under their group label, with no busbw.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import cast

import pandas as pd

from hostagent.workloads.collectives import Kind
from hostagent.workloads.nccl import bus_factor, iteration_begins

COMM_KINDS = ("collective", "send", "recv")


def union(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Sorted, disjoint intervals covering the same time."""
    out: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def length(intervals: list[tuple[float, float]]) -> float:
    return sum(end - start for start, end in intervals)


def minus(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Time covered by the disjoint intervals `a` and not by the disjoint intervals `b`."""
    overlap = 0.0
    j = 0
    for start, end in a:
        while j < len(b) and b[j][1] <= start:
            j += 1
        k = j
        while k < len(b) and b[k][0] < end:
            overlap += min(end, b[k][1]) - max(start, b[k][0])
            k += 1
    return length(a) - overlap


def _spans(frame: pd.DataFrame) -> list[tuple[float, float]]:
    return union(zip(frame["start"], frame["end"], strict=True))


def rank_metrics(steps: pd.DataFrame) -> pd.DataFrame:
    """One row per (transport, rank, iteration): time, compute, communication, exposed, idle
    (seconds)."""
    rows = []
    keys = [k for k in ("transport", "rank", "iteration") if k in steps]
    for key, frame in steps.groupby(keys, sort=True):
        compute = _spans(frame[frame["kind"] == "compute"])
        comm = _spans(frame[frame["kind"].isin(COMM_KINDS)])
        time = frame["end"].max() - frame["start"].min()
        busy = length(union(compute + comm))
        rows.append({**dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True)),
                     "warmup": bool(frame["warmup"].iloc[0]), "time": time,
                     "compute": length(compute), "communication": length(comm),
                     "exposed": minus(comm, compute), "idle": time - busy})
    return pd.DataFrame(rows)


def iteration_times(steps: pd.DataFrame) -> pd.DataFrame:
    """One row per (transport, iteration): over every rank, from its first start or the
    previous iteration's last end, when later, to its last end (nccl.iteration_begins: a rank
    done early that starts the next iteration does not make two iterations count its wait)."""
    keys = [k for k in ("transport", "iteration") if k in steps]
    out = steps.groupby(keys).agg(start=("start", "min"), end=("end", "max"),
                                  warmup=("warmup", "first")).reset_index()
    runs = out.groupby("transport") if "transport" in out else [(None, out)]
    for _, frame in runs:
        spans = {int(it): (s, e) for it, s, e in
                 zip(frame["iteration"], frame["start"], frame["end"], strict=True)}
        begins = iteration_begins(spans)
        out.loc[frame.index, "start"] = [begins[int(it)] for it in frame["iteration"]]
    out["time"] = out["end"] - out["start"]
    return out


def collective_calls(steps: pd.DataFrame) -> pd.DataFrame:
    """One row per collective call of a group: its members, first start and last end,
    completion time and busbw."""
    coll = steps[steps["kind"] == "collective"].sort_values("start")
    keys = [k for k in ("transport", "iteration", "group") if k in coll]
    coll = coll.assign(call=coll.groupby([*keys, "rank"]).cumcount())
    rows = []
    for key, frame in coll.groupby([*keys, "call"], sort=True):
        n = frame["rank"].nunique()
        seconds = frame["end"].max() - frame["start"].min()
        kind = cast(Kind, frame["collective"].iloc[0])
        size = int(frame["bytes"].iloc[0])
        rows.append({**dict(zip([*keys, "call"], key, strict=True)), "collective": kind,
                     "ranks": n, "bytes": size, "start": frame["start"].min(),
                     "end": frame["end"].max(), "time": seconds,
                     "busbw": size / seconds / 1e9 * bus_factor(kind, n) if seconds > 0
                     else float("nan")})
    return pd.DataFrame(rows)


def group_exposed(steps: pd.DataFrame) -> pd.DataFrame:
    """One row per (transport, iteration, group): the group's exposed time per member rank
    (mean and max over the members), seconds."""
    keys = [k for k in ("transport", "iteration") if k in steps]
    rows = []
    for key, frame in steps.groupby([*keys, "rank"], sort=True):
        compute = _spans(frame[frame["kind"] == "compute"])
        comm = frame[frame["kind"].isin(COMM_KINDS) & frame["group"].notna()]
        for group, nodes in comm.groupby("group"):
            rows.append({**dict(zip([*keys, "rank"], key, strict=True)), "group": group,
                         "exposed": minus(_spans(nodes), compute)})
    per_rank = pd.DataFrame(rows)
    if per_rank.empty:
        return per_rank
    return (per_rank.groupby([*keys, "group"])["exposed"]
            .agg(exposed_mean="mean", exposed_max="max", ranks="count").reset_index())


# ---- the timeline: lanes per rank, fault windows, the Perfetto trace ----
LANES = ("compute", "communication", "waiting")


def rank_lanes(steps: pd.DataFrame, t0: float) -> pd.DataFrame:
    """One row per (rank, lane, interval), s since t0: compute (the union of its compute nodes),
    communication (of its collectives, sends and receives) and waiting (inside each of its
    iterations, the time it does not compute: exposed communication and idle)."""
    rows = []
    for (rank, _it), frame in steps.groupby(["rank", "iteration"], sort=True):
        compute = _spans(frame[frame["kind"] == "compute"])
        comm = _spans(frame[frame["kind"].isin(COMM_KINDS)])
        gaps, at = [], frame["start"].min()
        for start, end in compute:
            if start > at:
                gaps.append((at, start))
            at = max(at, end)
        if frame["end"].max() > at:
            gaps.append((at, frame["end"].max()))
        for lane, spans in zip(LANES, (compute, comm, gaps), strict=True):
            rows += [{"rank": rank, "lane": lane, "start": s - t0, "end": e - t0}
                     for s, e in spans if e > s]
    return pd.DataFrame(rows, columns=["rank", "lane", "start", "end"])


def straggler_windows(scenario: dict, t_end: float) -> pd.DataFrame:
    """The scenario's straggler faults as disturbances (metrics.disturbances' columns), as
    scheduled: the agents apply them, so no fault action records them."""
    rows = []
    for f in scenario.get("faults") or []:
        if f.get("kind") != "straggler":
            continue
        host, duration = f["target"]["host"], f.get("duration")
        rows.append({"source": "fault", "kind": "straggler",
                     "label": f"straggler {host} x{f['factor']:g}", "start": float(f["at"]),
                     "end": float(f["at"]) + duration if duration is not None else t_end,
                     "links": ()})
    return pd.DataFrame(rows, columns=["source", "kind", "label", "start", "end", "links"])


def pack(intervals: list[tuple[float, float]]) -> list[int]:
    """A lane index per interval (in the given order) such that intervals of one lane never
    overlap: a trace viewer nests the slices of one track, so partial overlaps need lanes."""
    ends: list[float] = []
    out = [0] * len(intervals)
    for i in sorted(range(len(intervals)), key=lambda k: intervals[k]):
        start, end = intervals[i]
        lane = next((k for k, e in enumerate(ends) if e <= start), len(ends))
        if lane == len(ends):
            ends.append(end)
        ends[lane] = end
        out[i] = lane
    return out


GROUPS_PID = 1_000_000  # the process holding the groups' tracks (rank processes are 0..n-1)
FAULTS_PID = 1_000_001


def trace_events(steps: pd.DataFrame, t0: float, windows: pd.DataFrame,
                 hosts: dict[int, str]) -> dict:
    """The Chrome/Perfetto Trace Event Format: per rank a process whose tracks hold its
    compute and its communication nodes (one slice each; ts, dur in us since t0), then a
    process with a track per group (each collective call from its first member's start to its
    last member's end), then the fault windows."""
    events: list[dict] = []

    def meta(pid: int, name: str, tid: int | None = None, sort: int = 0) -> None:
        if tid is None:
            events.append({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": name}})
            events.append({"ph": "M", "pid": pid, "name": "process_sort_index",
                           "args": {"sort_index": sort}})
        else:
            events.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name",
                           "args": {"name": name}})
            events.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index",
                           "args": {"sort_index": tid}})

    def slices(pid: int, frame: pd.DataFrame, base: int, track: str) -> int:
        """Slices of `frame` on tracks base, base + 1, ... (as many as overlaps need)."""
        spans = list(zip(frame["start"], frame["end"], strict=True))
        placed = pack(spans)
        for k, row in enumerate(frame.itertuples()):
            args = {c: _plain(getattr(row, c)) for c in ("iteration", "kind", "collective",
                                                         "group", "peer", "bytes", "verified")
                    if c in frame.columns and pd.notna(getattr(row, c))}
            events.append({"ph": "X", "pid": pid, "tid": base + placed[k],
                           "name": row.name if isinstance(row.name, str) and row.name
                           else str(row.kind), "cat": str(row.kind),
                           "ts": (row.start - t0) * 1e6, "dur": (row.end - row.start) * 1e6,
                           "args": args})
        lanes = max(placed, default=-1) + 1
        for k in range(max(lanes, 1)):
            meta(pid, track if k == 0 else f"{track} {k + 1}", base + k)
        return base + max(lanes, 1)

    for rank, nodes in steps.groupby("rank", sort=True):
        pid = int(rank)
        meta(pid, f"rank {pid} ({hosts.get(pid, '?')})", sort=pid)
        nxt = slices(pid, nodes[nodes["kind"] == "compute"], 0, "compute")
        slices(pid, nodes[nodes["kind"].isin(COMM_KINDS)], nxt, "communication")
    calls = collective_calls(steps)
    meta(GROUPS_PID, "groups", sort=GROUPS_PID)
    tid = 0
    for group, g in (calls.groupby("group", sort=True) if len(calls) else []):
        named = g.assign(kind="collective", name=[f"{group} {c}" for c in g["collective"]])
        tid = slices(GROUPS_PID, named, tid, str(group))
    meta(FAULTS_PID, "faults", sort=FAULTS_PID)
    for k, w in enumerate(windows.itertuples()):
        events.append({"ph": "X", "pid": FAULTS_PID, "tid": k, "name": w.label, "cat": "fault",
                       "ts": w.start * 1e6, "dur": (w.end - w.start) * 1e6, "args": {}})
        meta(FAULTS_PID, w.label, k)
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def _plain(value: object) -> object:
    """numpy scalars as JSON's own."""
    return value.item() if hasattr(value, "item") else value
