"""`background` patterns of `kind: rdma` as jobs (pure, on the scenario's data before it is
validated).

RDMA-style writes run in the agents, over the run's transport (MRC or RoCEv2 QPs), and an
agent serves the hosts of one job: so each such pattern becomes a job of flows on hosts of its
own (`background-<k>`, workload.flows), and the workload a job named `workload` beside them,
on its ranks (when `all`: every host no RDMA pattern uses). The run is then a run of jobs
(docs/manual/jobs.md): each job's tables in jobs/<name>/, and the workload alone as its control.

A pattern's flows together carry what their receiver's ports (every plane) take in its
`duration` at line rate, shared equally among them in `message`-byte writes: uncongested, they
last about `duration`. They run for those bytes, as `ib_write_bw -n` runs for its iterations:
under contention they take longer.
"""
from __future__ import annotations

import math
from typing import Any

from testbed.scenario.units import parse_size, parse_time

DEFAULT_MESSAGE = 256 * 1024
RDMA_FIELDS = {"pattern", "at", "duration", "kind", "receiver", "senders", "src", "dst",
               "message"}


class RdmaBackgroundError(ValueError):
    """A pattern that cannot run as RDMA flows; the message starts with its field path."""


def as_jobs(data: dict[str, Any], auto: list[str], hosts: list[str],
            line_rate: float) -> dict[str, Any]:
    """`data` with its RDMA background patterns as jobs (unchanged without any): `auto`, the
    link classes whose rate is still to be chosen; `hosts`, the fabric's in order;
    `line_rate`, what a host's ports (every plane) take, bit/s in the frame of the patterns'
    durations (the real rate with fabric.real_rate). Raises RdmaBackgroundError."""
    patterns = data.get("background")
    if not isinstance(patterns, list):
        return data
    rdma = [(k, b) for k, b in enumerate(patterns) if isinstance(b, dict)
            and b.get("kind") == "rdma"]
    if not rdma:
        return data
    first = f"background.{rdma[0][0]}"
    if "jobs" in data:
        raise RdmaBackgroundError(f"{first}: kind rdma beside jobs: give its flows as a job of "
                                  f"their own (workload.flows, docs/manual/background.md)")
    if "host_link" in auto:
        raise RdmaBackgroundError(f"{first}: an RDMA flow carries what a host port sends in its "
                                  f"duration, and fabric.host_link.rate is auto: give the rate")
    workload = dict(data.get("workload") or {})
    ranks = workload.pop("ranks", "all")
    jobs = []
    used: list[str] = []
    for k, b in rdma:
        where = f"background.{k}"
        extra = sorted(set(b) - RDMA_FIELDS)
        if extra:
            raise RdmaBackgroundError(
                f"{where}: an RDMA pattern does not take {', '.join(extra)} (its flows run over "
                f"the transport's planes, at what their QPs' congestion control gives them)")
        mine = _pattern_hosts(where, b, used)
        used += mine
        message = int(_number(b.get("message", DEFAULT_MESSAGE), parse_size))
        duration = _number(b.get("duration"), parse_time)
        flows = len(mine) - 1 if b["pattern"] == "incast" else 1
        messages = max(1, math.ceil(duration * line_rate / 8 / flows / message))
        jobs.append({"name": f"background-{k}", "hosts": mine, "start": b.get("at", 0),
                     "workload": {"iterations": 1, "warmup": 0, "flows": {
                         "pattern": "incast" if b["pattern"] == "incast" else "pairs",
                         "message": message, "messages": messages}}})
    if ranks == "all":
        ranks = [h for h in hosts if h not in used]
    clash = sorted(set(ranks) & set(used)) if isinstance(ranks, list) else []
    if clash:
        raise RdmaBackgroundError(f"{first}: {clash} are ranks of the workload; an agent serves "
                                  f"one job's hosts, so RDMA flows run on hosts of their own")
    out = {k: v for k, v in data.items() if k not in ("workload", "background")}
    rest = [b for b in patterns if not (isinstance(b, dict) and b.get("kind") == "rdma")]
    if rest:
        out["background"] = rest
    out["jobs"] = [{"name": "workload", "hosts": ranks, "workload": workload}, *jobs]
    return out


def _pattern_hosts(where: str, b: dict[str, Any], used: list[str]) -> list[str]:
    """The job's hosts, in rank order: an incast's receiver first, then its senders; an
    elephant's sender then receiver (`pairs` of 2)."""
    pattern = b.get("pattern")
    if pattern == "incast":
        senders = b.get("senders")
        if b.get("receiver") is None or senders is None:
            raise RdmaBackgroundError(f"{where}: an RDMA incast names its receiver and its "
                                      f"senders (hosts of their own, apart from the workload)")
        hosts = [b["receiver"], *[s for s in senders if s != b["receiver"]]]
    elif pattern == "elephant":
        if b.get("src") is None or b.get("dst") is None:
            raise RdmaBackgroundError(f"{where}: an elephant needs src and dst")
        hosts = [b["src"], b["dst"]]
    else:
        raise RdmaBackgroundError(f"{where}: an RDMA {pattern} would run on the workload's "
                                  f"hosts; give incast or elephant patterns on hosts of their "
                                  f"own, or kind tcp")
    twice = sorted({h for h in hosts if h in used})
    if twice:
        raise RdmaBackgroundError(f"{where}: {twice} already send or receive another RDMA "
                                  f"pattern's flows")
    return hosts


def _number(value: object, parse: Any) -> float:
    """A number as a scenario writes it ('1MiB', '100Gbit', '2ms', or bare)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        return float(parse(value))
    raise RdmaBackgroundError(f"background: {value!r} is not a number")
