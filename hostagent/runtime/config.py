"""What the runner tells an agent: who it is, how to reach every peer, what to run.

Plain JSON, written by the runner (testbed/run/traffic.py) into the run's folder and read by the
agent at start: the agent imports nothing of the testbed and needs no root. Every part is a
dataclass, the same types on both sides: the runner builds them, `dump` writes them, `load`
rebuilds them, and a field that is renamed or mistyped fails the type checker on both sides.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hostagent.protocol.dcqcn import CONSTANTS as DCQCN
from hostagent.protocol.evs import EVPolicy
from hostagent.protocol.qp import QPConfig
from hostagent.workloads.algorithms import Choice, Fabric
from hostagent.workloads.collectives import Kind

# (start, end or None for the run's end, factor): a straggler's window, in seconds after the
# common start, and what it stretches compute by
Straggler = tuple[float, float | None, float]


@dataclass
class PeerConfig:
    rank: int
    host: str
    evs: list[tuple[int, int, str]]  # (EV index, plane, uSID destination address)
    plain: list[str]  # the peer's plain address in each plane (RoCEv2)
    denied: list[int]  # EV indexes MRC must never use toward this peer
    # one-way seconds a datagram from this peer spends in the links' latency (emulated frame,
    # serialization and queues excluded): what the receive path holds it for; 0: none
    latency: float = 0.0

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PeerConfig:
        return cls(data["rank"], data["host"], [(i, p, a) for i, p, a in data["evs"]],
                   list(data["plain"]), list(data["denied"]), float(data.get("latency", 0.0)))


@dataclass
class WorkloadConfig:
    """The looped collective (`collective` of `size` bytes a rank), or, with `steps`, a
    training step: this rank's plan (hostagent/workloads/graph.py RankPlan.to_dict)."""

    collective: Kind
    size: int
    iterations: int
    warmup: int
    compute_gap: float = 0.0
    steps: dict[str, Any] | None = None
    compute_scale: float = 1.0  # what compute times are stretched by (the time dilation)
    compute_jitter: float = 0.0
    stragglers: list[Straggler] = field(default_factory=list)
    # the collective's algorithm: the run's choice for the looped collective (never auto), or
    # a step graph's setting, which with auto chooses per node by the cost model over the
    # fabric's one-way latency (s) and a rank's rate (bytes/s) below
    algorithm: Choice | None = None
    cost_latency: float = 0.0
    cost_rate: float = 0.0

    def cost_fabric(self) -> Fabric | None:
        return Fabric(self.cost_latency, self.cost_rate) if self.cost_rate > 0 else None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WorkloadConfig:
        return cls(**{**data, "stragglers": [(a, b, c) for a, b, c in
                                             data.get("stragglers", [])]})


@dataclass
class NicLimits:
    """How much a host port may have queued before its QPs wait (hostagent/protocol/nic.py)."""

    rate_bps: int
    limit: int  # bytes


@dataclass
class DcqcnSettings:
    """RoCEv2's DCQCN: its spacing and timers as ratios to the path's base RTT, and its gains
    (DcqcnConfig.for_path's arguments; byte_counter 0: DCQCN's own default)."""

    cnp_rtts: float
    timer_rtts: float
    g: float = DCQCN["g"].value
    rate_ai: float = DCQCN["rate_ai"].value
    rate_hai: float = DCQCN["rate_hai"].value
    byte_counter: int = 0


@dataclass
class AgentConfig:
    rank: int
    world: int
    host: str
    transport: str  # "mrc" or "rocev2"
    plain: list[str]  # own plain address per plane (RoCEv2 QPs bind there)
    peers: list[PeerConfig]
    qps_per_peer: int
    qp: QPConfig
    mrc: EVPolicy
    workload: WorkloadConfig
    seed: int
    start_file: str  # the runner writes the common start time (time.time()) here once every
    # agent is ready; namespaces share the clock, so all start together
    out_dir: str
    timeout: float = 300.0  # seconds for the whole workload before the agent gives up
    gso: bool = False  # send runs of data packets to one destination with UDP GSO
    nic: NicLimits | None = None  # pace QPs to the ports; None: unpaced
    ev_sample_period: float | None = None  # s between samples of each EV's load; None: off
    dcqcn: DcqcnSettings | None = None  # RoCEv2; None: DCQCN's own defaults

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    def dump(self, path: Path) -> None:
        path.write_text(self.to_json())

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AgentConfig:
        return cls(**{
            **data, "peers": [PeerConfig.from_json(p) for p in data["peers"]],
            "qp": QPConfig(**data["qp"]), "mrc": EVPolicy(**data["mrc"]),
            "workload": WorkloadConfig.from_json(data["workload"]),
            "nic": None if data.get("nic") is None else NicLimits(**data["nic"]),
            "dcqcn": None if data.get("dcqcn") is None else DcqcnSettings(**data["dcqcn"])})

    @classmethod
    def load(cls, path: Path) -> AgentConfig:
        return cls.from_json(json.loads(Path(path).read_text()))
