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
from hostagent.workloads.nccl import bus_factor

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
    """One row per (transport, iteration): first start to last end over every rank."""
    keys = [k for k in ("transport", "iteration") if k in steps]
    out = steps.groupby(keys).agg(start=("start", "min"), end=("end", "max"),
                                  warmup=("warmup", "first")).reset_index()
    out["time"] = out["end"] - out["start"]
    return out


def collective_calls(steps: pd.DataFrame) -> pd.DataFrame:
    """One row per collective call of a group: its members, completion time and busbw."""
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
                     "ranks": n, "bytes": size, "time": seconds,
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
