"""What the runner tells an agent: who it is, how to reach every peer, what to run.

Plain JSON, written by the runner (testbed/run/traffic.py) into the run's folder and read by the
agent at start: the agent imports nothing of the testbed and needs no root.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class PeerConfig:
    rank: int
    host: str
    evs: list[tuple[int, int, str]]  # (EV index, plane, uSID destination address)
    plain: list[str]  # the peer's plain address in each plane (RoCEv2)
    denied: list[int]  # EV indexes MRC must never use toward this peer


@dataclass
class AgentConfig:
    rank: int
    world: int
    host: str
    transport: str  # "mrc" or "rocev2"
    plain: list[str]  # own plain address per plane (RoCEv2 QPs bind there)
    peers: list[PeerConfig]
    qps_per_peer: int
    qp: dict[str, Any]  # QPConfig fields
    mrc: dict[str, Any]  # EVPolicy fields
    workload: dict[str, Any]  # collective, size, iterations, warmup, compute_gap
    seed: int
    start_file: str  # the runner writes the common start time (time.time()) here once every
    # agent is ready; namespaces share the clock, so all start together
    out_dir: str
    timeout: float = 300.0  # seconds for the whole workload before the agent gives up
    gso: bool = False  # send runs of data packets to one destination with UDP GSO
    # {rate_bps, limit}: pace QPs to the ports (hostagent/protocol/nic.py)
    nic: dict[str, Any] | None = None
    ev_sample_period: float | None = None  # s between samples of each EV's load; None: off
    # RoCEv2: DCQCN's ratios to the base RTT (DcqcnConfig.for_path's cnp_rtts, timer_rtts);
    # empty: its defaults
    dcqcn: dict[str, float] = field(default_factory=dict)

    def dump(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, path: Path) -> AgentConfig:
        data = json.loads(Path(path).read_text())
        data["peers"] = [PeerConfig(**p) for p in data["peers"]]
        for p in data["peers"]:
            p.evs = [tuple(e) for e in p.evs]
        return cls(**data)
