"""Background traffic with real iperf3 on the timeline: incast, permutation, elephants.

Flows run between the hosts' plain addresses in one plane (the fabric's ECMP carries them, as
it carries any non-MRC traffic), each as an iperf3 server on the receiver and a client on the
sender, started at its time after the workload starts and stopped by its own duration (or when
the workload ends). Every flow's iperf3 JSON report is kept in the results.
"""
from __future__ import annotations

import json
import random
import subprocess
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .cleanup import end_process
from .units import Rate

BASE_PORT = 5301


class Background(BaseModel):
    """One pattern of background flows."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    pattern: Literal["incast", "permutation", "elephant"]
    at: float = Field(0.0, ge=0, le=86_400, description="s after the workload starts")
    duration: float = Field(gt=0, le=86_400)
    protocol: Literal["tcp", "udp"] = "tcp"
    rate: Rate | None = Field(None, description="per flow; UDP needs it, TCP takes all it can")
    plane: int = Field(0, ge=0)
    receiver: str | None = Field(None, description="incast: the host every sender sends to")
    senders: list[str] | None = Field(None, description="incast: default every other host")
    src: str | None = Field(None, description="elephant: sender")
    dst: str | None = Field(None, description="elephant: receiver")

    @model_validator(mode="after")
    def _fits_pattern(self) -> Background:
        if self.protocol == "udp" and self.rate is None:
            raise ValueError("a UDP background flow needs a rate (iperf3 -b)")
        need = {"incast": ("receiver",), "elephant": ("src", "dst"), "permutation": ()}
        missing = [k for k in need[self.pattern] if getattr(self, k) is None]
        if missing:
            raise ValueError(f"{self.pattern} needs {', '.join(missing)}")
        unwanted = {"incast": ("src", "dst"), "elephant": ("receiver", "senders"),
                    "permutation": ("receiver", "senders", "src", "dst")}[self.pattern]
        extra = [k for k in unwanted if getattr(self, k) is not None]
        if extra:
            raise ValueError(f"{self.pattern} does not take {', '.join(extra)}")
        return self


@dataclass(frozen=True)
class Flow:
    index: int
    src: str
    dst: str
    plane: int
    protocol: str
    rate: int | None
    start: float
    duration: float

    @property
    def port(self) -> int:
        return BASE_PORT + self.index


def flows(hosts: list[str], patterns: list[Background], seed: int) -> list[Flow]:
    """Every flow of every pattern (a permutation is a seeded derangement of the hosts)."""
    out: list[Flow] = []
    rng = random.Random(seed)
    for b in patterns:
        if b.pattern == "incast":
            pairs = [(s, b.receiver) for s in (b.senders or hosts) if s != b.receiver]
        elif b.pattern == "elephant":
            pairs = [(b.src, b.dst)]
        else:
            while True:
                order = hosts[:]
                rng.shuffle(order)
                if all(a != d for a, d in zip(hosts, order, strict=True)):
                    break
            pairs = list(zip(hosts, order, strict=True))
        for src, dst in pairs:
            out.append(Flow(len(out), src, dst, b.plane, b.protocol, b.rate, b.at, b.duration))
    return out


def check(patterns: list[Background], hosts: list[str], planes: int) -> None:
    for k, b in enumerate(patterns):
        named = [h for h in [b.receiver, b.src, b.dst, *(b.senders or [])] if h is not None]
        unknown = [h for h in named if h not in hosts]
        if unknown:
            raise ValueError(f"background.{k}: {unknown} are not hosts of this fabric")
        if b.plane >= planes:
            raise ValueError(f"background.{k}: no plane {b.plane} ({planes} planes)")
        if b.pattern == "elephant" and b.src == b.dst:
            raise ValueError(f"background.{k}: an elephant needs two different hosts")
        if b.pattern == "permutation" and len(hosts) < 2:
            raise ValueError(f"background.{k}: a permutation needs 2 hosts")


SERVER_LEAD = 0.3  # s an iperf3 server needs to listen before its client connects


class BackgroundTraffic:
    """Starts the flows on the timeline (a thread), ends them, keeps their reports."""

    def __init__(self, network, flow_list: list[Flow], out: Path) -> None:
        self.network = network
        self.flows = flow_list
        self.out = out
        self.procs: list[subprocess.Popen] = []
        self.started: dict[int, float] = {}  # flow index -> wall-clock start of its client
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, t0: float) -> None:
        if not self.flows:
            return
        self.out.mkdir(parents=True, exist_ok=True)
        self._thread = threading.Thread(target=self._run, args=(t0,), name="background",
                                        daemon=True)
        self._thread.start()

    def _popen(self, host: str, args: list[str], report: Path) -> None:
        with open(report, "w") as fh:
            self.procs.append(subprocess.Popen(
                ["mnexec", "-a", str(self.network.pid(host)), "iperf3", *args],
                stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))

    def _run(self, t0: float) -> None:
        """Each server SERVER_LEAD ahead of its client, and every client at least that long
        after its own server was spawned: flows that start together get all their servers
        first (a client spawned before its server listens fails to connect)."""
        plan = self.network.plan
        steps = sorted([(f.start - SERVER_LEAD, 0, f) for f in self.flows]
                       + [(f.start, 1, f) for f in self.flows],
                       key=lambda step: (step[0], step[1], step[2].index))
        spawned: dict[int, float] = {}
        for when, is_client, flow in steps:
            at = t0 + when if not is_client else max(t0 + when,
                                                     spawned[flow.index] + SERVER_LEAD)
            if self._stop.wait(max(0.0, at - time.time())):
                return
            dst = str(plan.plain_address(flow.dst, flow.plane))
            if not is_client:
                self._popen(flow.dst, ["-s", "-1", "-J", "-B", dst, "-p", str(flow.port)],
                            self.out / f"flow{flow.index}-server.json")
                spawned[flow.index] = time.time()
                continue
            src = str(plan.plain_address(flow.src, flow.plane))
            args = ["-c", dst, "-B", src, "-p", str(flow.port), "-J",
                    "-t", f"{flow.duration:g}"]
            if flow.protocol == "udp":
                args += ["-u", "-b", str(flow.rate)]
            elif flow.rate is not None:
                args += ["-b", str(flow.rate)]
            self._popen(flow.src, args, self.out / f"flow{flow.index}-client.json")
            self.started[flow.index] = time.time()

    def stop(self) -> None:
        """At the end of the workload: flows still running are ended (their reports say so).
        `flows.json` lists every flow with its scheduled and actual start."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.flows:
            (self.out / "flows.json").write_text(json.dumps(
                [{**asdict(f), "started": self.started.get(f.index)} for f in self.flows],
                indent=1))
        deadline = time.time() + 2  # clients about to finish their duration may do so
        for proc in self.procs:
            try:
                proc.wait(max(0.0, deadline - time.time()))
            except subprocess.TimeoutExpired:
                end_process(proc)
