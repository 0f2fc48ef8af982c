"""Background traffic in a scenario: incast, permutation and elephant patterns, and the flows
they expand to (pure; testbed/emulation/background.py runs them with iperf3).

Flows run between the hosts' plain addresses in one plane (the fabric's ECMP carries them, as
it carries any non-MRC traffic), each as an iperf3 server on the receiver and a client on the
sender, started at its time after the workload starts and stopped by its own duration (or when
the workload ends). Every flow's iperf3 JSON report is kept in the results.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from testbed.scenario import limits
from testbed.scenario.units import RateIn, SizeIn, TimeIn

BASE_PORT = 5301


class Background(BaseModel):
    """One pattern of background flows; its times are the real fabric's with fabric.real_rate
    (run D times longer), else emulated seconds."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    pattern: Literal["incast", "permutation", "elephant"]
    at: Annotated[float, TimeIn(0, limits.MAX_TIME)] = Field(
        0.0, description="after the workload starts")
    duration: Annotated[float, TimeIn(0, limits.MAX_TIME, above=True)] = Field(
        description="whole seconds (iperf3 -t); in the real frame (fabric.real_rate), rounded "
                    "to whole emulated seconds")
    kind: Literal["tcp", "udp", "rdma"] = Field(
        "tcp", description="the flows' transport: tcp or udp (iperf3), or rdma: writes over "
                           "the run's transport from the agents, as a job of flows beside the "
                           "workload (testbed/scenario/rdma_background.py)")
    message: Annotated[int, SizeIn(4, 2**30)] | None = Field(
        None, description="rdma: bytes of one write (default 256 KiB)")
    rate: Annotated[int, RateIn(limits.MIN_RATE, limits.MAX_RATE)] | None = Field(
        None, description="per flow; UDP needs it (iperf3 would read 0 as unlimited), TCP "
                          "takes all it can")
    plane: int = Field(0, ge=0, le=limits.MAX_PLANES - 1)
    receiver: str | None = Field(None, max_length=40,
                                 description="incast: the host every sender sends to")
    senders: list[Annotated[str, Field(max_length=40)]] | None = Field(
        None, max_length=limits.MAX_HOSTS, description="incast: default every other host")
    src: str | None = Field(None, max_length=40, description="elephant: sender")
    dst: str | None = Field(None, max_length=40, description="elephant: receiver")

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: object) -> object:
        """`protocol` was this field's old name: say so instead of a bare "extra input"."""
        if isinstance(data, dict) and "protocol" in data:
            raise ValueError(f"`protocol` is now `kind`: write `kind: {data['protocol']}`")
        return data

    @model_validator(mode="after")
    def _fits_pattern(self) -> Background:
        if self.kind == "rdma":  # converted to a job before validation, once the fabric is
            raise ValueError("kind rdma runs as a job of flows once the fabric validates: "
                             "fix the fabric first")
        if self.message is not None:
            raise ValueError("message is an RDMA pattern's (kind: rdma)")
        if self.kind == "udp" and self.rate is None:
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
    kind: str
    rate: int | None
    start: float
    duration: float
    pattern: int = 0  # index of the pattern in the scenario's `background`

    @property
    def port(self) -> int:
        return BASE_PORT + self.index


def flows(hosts: list[str], patterns: list[Background], seed: int) -> list[Flow]:
    """Every flow of every pattern (a permutation is a seeded derangement of the hosts)."""
    out: list[Flow] = []
    rng = random.Random(seed)
    for k, b in enumerate(patterns):
        pairs: list[tuple[str, str]]
        if b.pattern == "incast":
            assert b.receiver is not None  # the model requires it of an incast
            pairs = [(s, b.receiver) for s in (b.senders or hosts) if s != b.receiver]
        elif b.pattern == "elephant":
            assert b.src is not None and b.dst is not None  # required of an elephant
            pairs = [(b.src, b.dst)]
        else:
            while True:
                order = hosts[:]
                rng.shuffle(order)
                if all(a != d for a, d in zip(hosts, order, strict=True)):
                    break
            pairs = list(zip(hosts, order, strict=True))
        for src, dst in pairs:
            out.append(Flow(len(out), src, dst, b.plane, b.kind, b.rate, b.at, b.duration,
                            k))
    return out


def flow_count(b: Background, hosts: list[str]) -> int:
    """How many flows a pattern expands to (as `flows` makes them), without making them."""
    if b.pattern == "incast":
        return len([s for s in (b.senders or hosts) if s != b.receiver])
    return 1 if b.pattern == "elephant" else len(hosts)


def check(patterns: list[Background], hosts: list[str], planes: int,
          real_frame: bool = False) -> None:
    """The patterns fit the fabric; in the emulated frame (no `real_frame`), each duration is
    whole seconds as iperf3 -t counts them (in the real frame, the emulated duration is rounded
    to them: testbed/fabric/frame.py)."""
    total = sum(flow_count(b, hosts) for b in patterns)
    if total > limits.MAX_BACKGROUND_FLOWS:
        raise ValueError(f"background: {total:,} flows ({2 * total:,} iperf3 processes), more "
                         f"than {limits.MAX_BACKGROUND_FLOWS}; use fewer or smaller patterns")
    for k, b in enumerate(patterns):
        named = [h for h in [b.receiver, b.src, b.dst, *(b.senders or [])] if h is not None]
        unknown = [h for h in named if h not in hosts]
        if unknown:
            raise ValueError(f"background.{k}: {unknown} are not hosts of this fabric")
        if not real_frame and b.duration != int(b.duration):  # iperf3 -t truncates 1.5 to 1
            raise ValueError(f"background.{k}: duration {b.duration:g} s: iperf3 counts whole "
                             f"seconds (it would run {int(b.duration)} s"
                             f"{', that is until stopped' if b.duration < 1 else ''}); "
                             "use a whole number of seconds")
        if b.plane >= planes:
            raise ValueError(f"background.{k}: no plane {b.plane} ({planes} planes)")
        if b.pattern == "elephant" and b.src == b.dst:
            raise ValueError(f"background.{k}: an elephant needs two different hosts")
        if b.pattern == "permutation" and len(hosts) < 2:
            raise ValueError(f"background.{k}: a permutation needs 2 hosts")
