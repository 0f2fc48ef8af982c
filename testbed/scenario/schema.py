"""The scenario file: a declarative description of one experiment, validated into typed models.

Why pydantic: every field gets a type, a default and a documented range in one place, the JSON
Schema for editors comes for free, and errors carry the field path that the user must fix.
Later parts of the testbed (workload, transports, faults) add sections to `Scenario`.
"""
from __future__ import annotations

import difflib
import reprlib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from hostagent.protocol.constants import (
    ACK_TIMEOUT_EXP,
    CONGESTION_MEMORY_RTTS,
    HOT_RATIO,
    HOT_RTTS,
    MPR,
    PROBE_SUCCESSES,
)
from hostagent.protocol.dcqcn import CONSTANTS as DCQCN
from hostagent.protocol.qp import (
    MAX_EXP_CNT,
    MAX_LINEAR_CNT,
    MAX_MPR,
    MAX_RETRY_INTERVAL,
    MAX_TIMEOUT_EXP,
    timeout_seconds,
    timeout_unit,
)
from hostagent.protocol.rocev2 import MAX_RETRY_CNT, NCCL_IB_RETRY_CNT, NCCL_IB_TIMEOUT
from hostagent.protocol.wire import HEADER_SIZE
from hostagent.workloads import algorithms
from hostagent.workloads.algorithms import Choice
from testbed.errors import ScenarioError
from testbed.scenario import limits
from testbed.scenario import source as source_
from testbed.scenario.background import Background
from testbed.scenario.background import check as check_background
from testbed.scenario.chakra import Chakra
from testbed.scenario.chakra import check as check_chakra
from testbed.scenario.cluster import Cluster
from testbed.scenario.cluster import check as check_cluster
from testbed.scenario.faults import Fault, Routing
from testbed.scenario.flows import Flows
from testbed.scenario.flows import check as check_flows
from testbed.scenario.jobs import Placement
from testbed.scenario.jobs import allocate as allocate_jobs
from testbed.scenario.jobs import check as check_jobs
from testbed.scenario.rdma_background import RdmaBackgroundError
from testbed.scenario.rdma_background import as_jobs as rdma_as_jobs
from testbed.scenario.real_times import bare_numbers
from testbed.scenario.red import DCQCN_PROFILE, RedProfile
from testbed.scenario.training import Training
from testbed.scenario.training import check as check_training
from testbed.scenario.units import RateIn, SizeIn, TimeIn, format_rate, format_size

SAFE_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$"
PREFIX_PATTERN = r"^[a-z]{1,3}$"
DEFAULT_SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "quickstart.yaml"


class StrictModel(BaseModel):
    """Unknown keys are errors: a typo must not silently fall back to a default."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


LinkRate = Annotated[int, RateIn(limits.MIN_RATE, limits.MAX_RATE)]


class LinkClass(StrictModel):
    """Rate and egress buffer of one class of links, applied at both ends."""

    rate: LinkRate = Field(100 * 10**6, description="line rate, e.g. '100Mbit'")
    buffer: Annotated[int, SizeIn(limits.MIN_BUFFER, limits.MAX_BUFFER)] = Field(
        100_000, description="egress queue limit in bytes, e.g. '100KB'")

    ecn_kmin: Annotated[int, SizeIn(0, limits.MAX_BUFFER)] | None = Field(
        None, description="RED's K_min: bytes queued ahead of a packet at or below which a "
                          "router port never marks it CE (switch.ecn); default: 5KB, the DCQCN "
                          "paper's (Zhu et al., SIGCOMM 2015)")
    ecn_kmax: Annotated[int, SizeIn(1, limits.MAX_BUFFER)] | None = Field(
        None, description="RED's K_max: bytes queued ahead above which every ECN-capable packet "
                          "is marked; may exceed the buffer (then the probability never reaches "
                          "P_max); default: 200KB, the DCQCN paper's")
    ecn_pmax: float | None = Field(
        None, gt=0, le=1, description="RED's P_max: the marking probability just below K_max, "
                                      "rising linearly from 0 at K_min; default: 0.01, the "
                                      "DCQCN paper's")
    ecn_threshold: Annotated[int, SizeIn(1, limits.MAX_BUFFER)] | None = Field(
        None, description="a step instead of RED's profile: mark every ECN-capable packet with "
                          "more than this many bytes queued ahead (ecn_kmin = ecn_kmax); not "
                          "with ecn_kmin, ecn_kmax or ecn_pmax")
    trim_threshold: Annotated[int, SizeIn(1, limits.MAX_BUFFER)] | None = Field(
        None, description="queue bytes above which a router port trims MRC data packets to "
                          "their header (switch.trim); default: four fifths of the buffer")

    @model_validator(mode="after")
    def _thresholds_in_buffer(self) -> LinkClass:
        for name in ("ecn_threshold", "ecn_kmin", "trim_threshold"):
            value = getattr(self, name)
            if value is not None and value > self.buffer:
                raise ValueError(f"{name} {format_size(value)} must be at most the buffer "
                                 f"({format_size(self.buffer)})")
        red = [n for n in ("ecn_kmin", "ecn_kmax", "ecn_pmax") if getattr(self, n) is not None]
        if self.ecn_threshold is not None and red:
            raise ValueError(f"ecn_threshold (a step) with {', '.join(red)} (RED's profile): "
                             f"keep one; a step is ecn_kmin = ecn_kmax")
        ecn = self.ecn()
        if ecn.kmin > ecn.kmax:
            raise ValueError(f"ecn_kmin {format_size(ecn.kmin)} must be at most ecn_kmax "
                             f"{format_size(ecn.kmax)}")
        return self

    def ecn(self) -> RedProfile:
        """Where router ports mark: RED's profile, the DCQCN paper's where not set, or a step."""
        if self.ecn_threshold is not None:
            return RedProfile(self.ecn_threshold, self.ecn_threshold, 1.0)
        return RedProfile(DCQCN_PROFILE.kmin if self.ecn_kmin is None else self.ecn_kmin,
                          DCQCN_PROFILE.kmax if self.ecn_kmax is None else self.ecn_kmax,
                          DCQCN_PROFILE.pmax if self.ecn_pmax is None else self.ecn_pmax)

    def trim(self) -> int:
        """Queue bytes above which MRC data is trimmed: below the buffer, so that trimming
        (decided on the eBPF program's virtual queue) happens before the real FIFO would drop."""
        return self.trim_threshold if self.trim_threshold is not None else self.buffer * 4 // 5


class Fabric(StrictModel):
    """A two-tier multi-plane Clos: every host has one port per plane; planes never meet."""

    planes: int = Field(2, ge=1, le=limits.MAX_PLANES)
    leaves_per_plane: int = Field(2, ge=1, le=limits.MAX_LEAVES_PER_PLANE)
    spines_per_plane: int = Field(2, ge=1, le=limits.MAX_SPINES_PER_PLANE)
    hosts_per_leaf: int = Field(2, ge=1, le=limits.MAX_HOSTS)
    hosts: int | None = Field(
        None, ge=2, le=limits.MAX_HOSTS,
        description="number of hosts; default fills every leaf (leaves_per_plane x hosts_per_leaf)")
    host_link: LinkClass = Field(default_factory=LinkClass)
    fabric_link: LinkClass = Field(default_factory=LinkClass)
    mtu: int = Field(1500, ge=limits.MIN_MTU, le=limits.MAX_MTU)
    real_rate: Annotated[int, RateIn(limits.MIN_RATE, limits.MAX_REAL_RATE)] | None = Field(
        None, description="the line rate of the real fabric this one stands for, e.g. "
                          "'400Gbit'. Its ratio to the host link's emulated rate is the time "
                          "dilation D: every time the scenario states in the real frame "
                          "(latencies, faults, background flows, compute) runs D times longer, "
                          "and results also show times divided by D")
    hop_latency: Annotated[float, TimeIn(0, limits.MAX_LATENCY, unit=True)] = Field(
        0.0, description="one-way latency of every link (a switch plus its cable), e.g. "
                         "'1us': of the real fabric with real_rate (run D times longer), else "
                         "emulated; the agents hold each datagram for its path's latency")
    nic_latency: Annotated[float, TimeIn(0, limits.MAX_LATENCY, unit=True)] = Field(
        0.0, description="one-way latency of each host's NIC, each way (the sender's and the "
                         "receiver's both count), in the same frame as hop_latency")
    latency_by: Literal["agents", "netem"] = Field(
        "agents", description="what delays packets by hop_latency and nic_latency. agents: "
        "each receiving agent holds a datagram for its path's one-way latency (works on every "
        "kernel; kernel TCP flows get no latency). netem: every link delays what it carries, "
        "after the sender's port has queued and sent it (needs sch_netem; the run is refused "
        "where the kernel lacks it)")

    @property
    def host_count(self) -> int:
        return self.hosts if self.hosts is not None else self.leaves_per_plane * self.hosts_per_leaf

    @property
    def node_count(self) -> int:
        return self.host_count + self.planes * (self.leaves_per_plane + self.spines_per_plane)

    @property
    def link_count(self) -> int:
        return self.planes * (self.host_count + self.leaves_per_plane * self.spines_per_plane)

    @model_validator(mode="after")
    def _consistent(self) -> Fabric:
        capacity = self.leaves_per_plane * self.hosts_per_leaf
        if self.host_count < 2:
            raise ValueError(
                f"{self.host_count} host: a fabric needs at least 2 hosts "
                f"(leaves_per_plane x hosts_per_leaf, or hosts)")
        if self.host_count > capacity:
            need = -(-self.host_count // self.hosts_per_leaf)
            raise ValueError(
                f"hosts={self.host_count} do not fit on {self.leaves_per_plane} leaves of "
                f"{self.hosts_per_leaf} hosts; set leaves_per_plane: {need} or lower hosts")
        if self.leaves_per_plane == 1:
            raise ValueError(
                "leaves_per_plane: 1 leaves every spine unused (all hosts meet at their one "
                "leaf, no path crosses a spine); use 2 or more leaves")
        used = -(-self.host_count // self.hosts_per_leaf)
        if used < self.leaves_per_plane:
            raise ValueError(
                f"hosts={self.host_count} at {self.hosts_per_leaf} per leaf fill only {used} of "
                f"{self.leaves_per_plane} leaves; set leaves_per_plane: {used} "
                f"or hosts: {capacity}")
        if self.node_count > limits.MAX_NODES:
            raise ValueError(
                f"{self.node_count} nodes (hosts + planes x (leaves + spines)) exceed this "
                f"testbed's limit of {limits.MAX_NODES}; use fewer planes, leaves or hosts")
        if self.link_count > limits.MAX_LINKS:
            raise ValueError(
                f"{self.link_count} links (planes x (hosts + leaves x spines)) exceed this "
                f"testbed's limit of {limits.MAX_LINKS}; use fewer planes, leaves or spines")
        return self


class Switch(StrictModel):
    """What every router port does as its queue fills, beyond dropping at the buffer: an eBPF
    program at its egress (testbed/kernel/bpf/fabric_queue.c). Thresholds are per link class.
    Lossless mode (docs/manual/lossless.md) keeps queueing past the buffer instead of dropping."""

    ecn: bool = Field(True, description="mark ECN-capable packets CE with RED's profile "
                                        "(each link class's ecn_kmin, ecn_kmax, ecn_pmax)")
    trim: bool = Field(True, description="cut MRC data packets to their header above "
                                         "trim_threshold and forward the header first; off "
                                         "by default in lossless mode, and an error with it")
    lossless: bool = Field(
        False, description="no router port drops data for lack of buffer: its queue grows past "
        "the buffer (up to an equal share of a 1 GiB budget over all router ports; beyond it a "
        "packet is dropped and counted as lossless_overflow), so congestion shows as queueing "
        "delay instead of loss. ECN still marks; trimming is off. This is not PFC: no pause "
        "frames, no paused upstream ports, no head-of-line blocking, congestion spreading, "
        "pause storms or deadlocks. Faults that drop (loss, blackhole, link down) still drop")

    @model_validator(mode="after")
    def _lossless_without_trimming(self) -> Switch:
        if self.lossless and self.trim and "trim" in self.model_fields_set:
            raise ValueError("lossless: true with trim: true: trimming stands in for a "
                             "congestion drop, and a lossless fabric has none; remove trim")
        return self

    @property
    def trimming(self) -> bool:
        """Whether router ports trim: as set, and never in lossless mode."""
        return self.trim and not self.lossless

    @property
    def enabled(self) -> bool:
        """Whether router ports run the eBPF program (lossless mode needs it: it is what
        queues past the buffer and counts an overflow)."""
        return self.ecn or self.trimming or self.lossless


class Naming(StrictModel):
    """Prefixes of node names: host `h3`, leaf `p1l0` (plane 1, leaf 0), spine `p1s2`.

    Letters only, so the digits delimit indices and no name can be read two ways; names reach
    interface names and Mininet's shell commands, hence the narrow character set.
    """

    host: str = Field("h", pattern=PREFIX_PATTERN)
    plane: str = Field("p", pattern=PREFIX_PATTERN)
    leaf: str = Field("l", pattern=PREFIX_PATTERN)
    spine: str = Field("s", pattern=PREFIX_PATTERN)

    @model_validator(mode="after")
    def _distinct(self) -> Naming:
        values = [self.host, self.plane, self.leaf, self.spine]
        if len(set(values)) != len(values):
            raise ValueError(f"host, plane, leaf and spine prefixes must differ, got {values}")
        return self

    def host_name(self, index: int) -> str:
        return f"{self.host}{index}"

    def leaf_name(self, plane: int, index: int) -> str:
        return f"{self.plane}{plane}{self.leaf}{index}"

    def spine_name(self, plane: int, index: int) -> str:
        return f"{self.plane}{plane}{self.spine}{index}"


class Verify(StrictModel):
    """How the fabric is proven before traffic: probes over every EV, or a covering sample."""

    probes: Literal["auto", "all", "sample"] = Field(
        "auto", description="auto: every EV up to max_all EVs, else a sample covering every link")
    max_all: int = Field(100_000, ge=1, le=10_000_000)
    timeout: Annotated[float, TimeIn(0, 60, above=True)] = Field(
        2.0, description="how long to wait for one probe round")
    retries: int = Field(2, ge=0, le=10, description="probe rounds after the first for lost probes")


SPARE_FROM_PATHS = 4  # planes with this many paths or more keep one spare EV by default
Collective = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all"]
STEP_ALGORITHMS = (*algorithms.AVAILABLE["all_reduce"], "auto")  # a step graph's all-reduces
Transport = Literal["mrc", "rocev2"]
# What each transport's agent implements whatever the scenario (hostagent/protocol/rocev2.py,
# mrc.py): its name, loss recovery and congestion control, as a run's label names them.
MECHANISMS: dict[str, tuple[str, str, str]] = {
    "rocev2": ("RoCEv2", "Go-Back-N", "DCQCN"),
    "mrc": ("MRC", "SACK", "NSCC"),
}


class Workload(StrictModel):
    """The collective every rank runs, as in nccl-tests: one size, several iterations."""

    collective: Collective = "all_reduce"
    size: Annotated[int, SizeIn(4, limits.MAX_COLLECTIVE_BYTES)] = Field(
        1_048_576, description="bytes of the array (nccl-tests' size), e.g. '1MiB'")
    iterations: int = Field(5, ge=1, le=100_000)
    warmup: int = Field(1, ge=0, le=1000, description="iterations run first and not reported")
    compute_gap: Annotated[float, TimeIn(0, 60)] = Field(
        0.0, description="'compute' between iterations (the network idles); the real "
                         "fabric's with fabric.real_rate (run D times longer)")
    ranks: Annotated[list[Annotated[str, Field(max_length=40)]],
                     Field(max_length=limits.MAX_HOSTS)] | Literal["all"] = Field(
        "all", description="host names taking part, in rank order, or all hosts")
    training: Training | None = Field(
        None, description="a parallel training step per iteration instead of the collective")
    chakra: Chakra | None = Field(
        None, description="a Chakra execution trace per iteration instead of the collective")
    flows: Flows | None = Field(
        None, description="RDMA-style write flows (an incast, pairs) per iteration instead of "
                          "the collective")
    compute_jitter: float = Field(
        0.0, ge=0, le=0.5, description="a step's compute nodes each take their time times a "
                                       "factor uniform in 1 +- this, seeded per rank")
    algorithm: Choice | None = Field(
        None, description="the collective's algorithm (hostagent/workloads/algorithms.py): "
        "all-reduce ring or tree (NCCL's double binary tree), all-to-all direct or pairwise, "
        "auto (the cheapest by the cost model, from the fabric's latency and rate, per size); "
        "default: ring, and direct for all-to-all. A training step or Chakra trace applies it "
        "to each collective that has it (ring, tree or auto there)")

    @property
    def steps(self) -> bool:
        """A step graph runs (built-in training, a Chakra trace, flows), not the collective."""
        return any(x is not None for x in (self.training, self.chakra, self.flows))

    @model_validator(mode="after")
    def _one_step_source(self) -> Workload:
        given = [k for k in ("training", "chakra", "flows") if getattr(self, k) is not None]
        if len(given) > 1:
            count = {2: "two", 3: "three"}[len(given)]
            raise ValueError(f"{' and '.join(given)} are {count} step sources; give one")
        if self.flows is not None and self.algorithm is not None:
            raise ValueError("algorithm: flows run no collective; remove it")
        return self

    @model_validator(mode="after")
    def _algorithm_exists(self) -> Workload:
        if self.algorithm is None:
            return self
        if self.steps:
            if self.algorithm not in STEP_ALGORITHMS:
                raise ValueError(f"algorithm {self.algorithm!r}: a step graph takes "
                                 f"{', '.join(STEP_ALGORITHMS)} (all-reduce's; its other "
                                 "collectives run their default)")
            return self
        try:
            algorithms.check(self.collective, self.algorithm)
        except algorithms.AlgorithmError as exc:
            raise ValueError(f"algorithm: {exc}") from None
        return self

    @field_validator("size")
    @classmethod
    def _size_in_range(cls, size: int) -> int:
        if size % 4:
            raise ValueError(f"{size} B is not a whole number of float32 elements (4 B each)")
        return size


class Job(StrictModel):
    """One of several jobs sharing the fabric and its fault timeline: its ranks (named, or
    placed by a rule: testbed/scenario/jobs.py), its workload, when it starts and, optionally,
    the transport it always runs."""

    name: str = Field(pattern=SAFE_NAME_PATTERN,
                      description="letters, digits, '_', '.', '-'; its results' folder name")
    hosts: Annotated[list[Annotated[str, Field(max_length=40)]],
                     Field(max_length=limits.MAX_HOSTS)] | None = Field(
        None, description="its hosts in rank order; or give placement")
    placement: Placement | None = Field(
        None, description="how many hosts, by which rule, from those no earlier job holds")
    workload: Workload = Field(default_factory=Workload)
    start: Annotated[float, TimeIn(0, limits.MAX_TIME)] = Field(
        0.0, description="after the run's common start (faults count from it too); the real "
                         "fabric's with fabric.real_rate")
    transport: Transport | None = Field(
        None, description="this job's transport in every run (an MRC job beside a RoCEv2 "
                          "one); default: the run's, as `transport:` lists them")

    @model_validator(mode="after")
    def _ranks_are_hosts(self) -> Job:
        if self.workload.ranks != "all":
            raise ValueError("workload.ranks: a job's ranks are its hosts (hosts or "
                             "placement); remove workload.ranks")
        return self


class RetrySettings(StrictModel):
    """The spec's retry schedule (OCP MRC mrc.h, `retry`): after the ACK timeout, `linear_cnt`
    retries at that fixed interval, then `exp_cnt` retries with the interval doubling; only
    consecutive timeouts of one packet count, and progress resets them. An RC QP (RoCEv2)
    retries `retry_cnt` times at its fixed interval instead, where set."""

    linear_cnt: int = Field(7, ge=0, le=MAX_LINEAR_CNT,
                            description="retries at the fixed timeout interval (spec: <= 7)")
    exp_cnt: int = Field(5, ge=0, le=MAX_EXP_CNT,
                         description="then retries with the interval doubling (spec: <= 25; "
                                     "25 = retry forever)")
    retry_cnt: int | None = Field(
        None, ge=0, le=MAX_RETRY_CNT, description="RoCEv2: retries at the fixed timeout interval "
        "(an RC QP's retry_cnt, <= 7), where MRC runs linear_cnt and exp_cnt; default: with "
        "fabric.real_rate, NCCL's 7 (NCCL_IB_RETRY_CNT), else linear_cnt and exp_cnt as MRC")


class QPSettings(StrictModel):
    """Settings both transports share where they mean the same (a fair comparison). The names
    are the agent's (hostagent/protocol/qp.py QPConfig): nothing is renamed on the way."""

    mss: Annotated[int, SizeIn(limits.MIN_MSS, limits.MAX_MTU)] = Field(
        1024, description="payload bytes per packet (and within fabric.mtu with the headers)")
    init_cwnd: Annotated[int, SizeIn(limits.MIN_MSS, limits.MAX_WINDOW)] | None = Field(
        None, description="congestion window at start, bytes (MRC); at least one mss; default: "
        "64KiB, or with fabric.real_rate max_cwnd (NSCC starts at its cap)")
    max_cwnd: Annotated[int, SizeIn(limits.MIN_MSS, limits.MAX_WINDOW)] | None = Field(
        None, description="largest congestion window, bytes (both: RoCEv2's cap on bytes in "
        "flight); default: 256KiB, or with fabric.real_rate 1.5 x the BDP of the ports a QP "
        "sends on (NSCC's cap in UEC's uet-htsim; testbed/fabric/windows.py)")
    timeout: Annotated[float, TimeIn(0, MAX_RETRY_INTERVAL, above=True)] | None = Field(
        None, description="ACK timeout of both transports, in the scenario's frame (the real "
        "fabric's with fabric.real_rate); default: with real_rate, each transport's "
        "specification (MRC 1.024 us x 2^8 = 262 us, the OCP MRC API's example; RoCEv2 "
        "4.096 us x 2^20 = 4.29 s, NCCL's NCCL_IB_TIMEOUT), else twice the longest a full "
        "buffer takes to drain, plus 5 ms (the emulated fabric's queues are ms deep)")
    timeout_exp: int | None = Field(
        None, ge=0, le=MAX_TIMEOUT_EXP, description="the ACK timeout as each transport's "
        "specification writes it (instead of `timeout`): MRC 1.024 us x 2^timeout_exp, "
        "RoCEv2 4.096 us x 2^timeout_exp")
    compress_above_rtts: float | None = Field(
        None, gt=0, le=limits.MAX_COMPRESS_RTTS, description="with fabric.real_rate: every "
        "transport timer (ACK timeout, MRC's probe interval, probe timeout and congestion "
        "holdoff) longer than this many base RTTs (a round trip across a spine, queues "
        "empty) runs at this many instead, so that timers of seconds stay feasible at a "
        "large dilation; each one compressed is reported as a departure from similarity")
    retry: RetrySettings = Field(default_factory=RetrySettings)
    target_delay: Annotated[float, TimeIn(0, 10, above=True)] | None = Field(
        None, description="queueing delay congestion control aims at; default: a quarter of "
                          "the longest full-buffer drain, >= 2 ms")
    ack_every: int = Field(4, ge=1, le=64)
    gso: bool = Field(False, description="agents send runs of data packets to one destination "
                                         "with UDP GSO (fewer system calls, same packets)")
    qps_per_peer: dict[Transport, Annotated[int, Field(ge=1, le=limits.MAX_QPS_PER_PEER)]] = Field(
        default_factory=dict,
        description="QPs between two ranks; default: MRC 1, RoCEv2 one per plane (a NIC runs "
                    "at least one QP per port); the MRC paper compares RoCEv2 with 1, 8, 16")

    @model_validator(mode="after")
    def _consistent(self) -> QPSettings:
        if self.init_cwnd is not None and self.init_cwnd < self.mss:
            raise ValueError(f"init_cwnd {self.init_cwnd} is less than one packet "
                             f"(mss {self.mss}): nothing could be sent")
        if (self.init_cwnd is not None and self.max_cwnd is not None
                and self.init_cwnd > self.max_cwnd):
            raise ValueError(f"init_cwnd {self.init_cwnd} exceeds max_cwnd {self.max_cwnd}")
        if self.timeout is not None and self.timeout_exp is not None:
            raise ValueError("timeout and timeout_exp both set: give the ACK timeout once")
        for transport, n in self.qps_per_peer.items():
            if not 1 <= n <= limits.MAX_QPS_PER_PEER:
                raise ValueError(f"qps_per_peer.{transport}: {n} is outside "
                                 f"1..{limits.MAX_QPS_PER_PEER}")
        return self


class DeniedPath(StrictModel):
    """A plane's spine (or, without `spine`, every path of a plane) that EVs must avoid."""

    plane: int = Field(ge=0, le=limits.MAX_PLANES - 1)
    spine: int | None = Field(None, ge=0, le=limits.MAX_SPINES_PER_PLANE - 1)


class MrcSettings(StrictModel):
    """MRC's own knobs: how many EVs a QP sprays on, and how it treats bad and busy ones."""

    evs_per_plane: int | None = Field(
        None, ge=1, le=256, description="active EVs per plane (the rest are spares that replace "
        "a condemned one); default: every path but one where a plane has 4 or more paths")
    evs_per_path: int = Field(
        1, ge=1, le=64, description="EVs a QP keeps for each path toward a peer: a NIC's EVs "
        "are hash inputs, many more than a pair's paths (the MRC paper's NICs keep 100-256), "
        "so several share a path and condemning one leaves the path in use; with more than "
        "one, every EV is active unless evs_per_plane says otherwise")
    ev_min_active: int = Field(1, ge=1, le=4096, description="no EV is marked ASSUMED_BAD "
                               "while only this many are GOOD (the spec's floor)")
    spray: Literal["round_robin", "random"] = "round_robin"
    probe_interval: Annotated[float, TimeIn(0, 10, above=True)] | None = Field(
        None, description="between probes of a bad EV that does not answer; an answer sends "
        "the next at once; in the scenario's frame; default: with fabric.real_rate a quarter "
        "of the probe timeout, else 5 ms")
    probe_timeout: Annotated[float, TimeIn(0, 10, above=True)] | None = Field(
        None, description="how long a probe waits for its reply at least (above it, its "
        "path's srtt + 4 rttvar); in the scenario's frame; default: with fabric.real_rate "
        "2 ms (the OCP MRC API's example), else 4 probe intervals")
    probe_successes: int = Field(
        PROBE_SUCCESSES, ge=1, le=256,
        description="answered probes in a row before a bad EV is GOOD again")
    congestion_memory_rtts: float = Field(
        CONGESTION_MEMORY_RTTS, ge=0, le=1000, description="a loss on an EV marked or trimmed "
        "this many RTTs before is congestion, not failure")
    congestion_holdoff: Annotated[float, TimeIn(0, 10)] | None = Field(
        None, description="how long an ECN-marked or trimmed EV is skipped, in the scenario's "
        "frame; default: with fabric.real_rate one base RTT, else 1 ms")
    hot_ratio: float = Field(HOT_RATIO, ge=1, le=100, description="an EV marked this many times "
                             "more often than the QP's others is a hot path")
    hot_rtts: float = Field(HOT_RTTS, ge=0, le=1000, description="a hot EV, when marked, is "
                            "skipped this many smoothed RTTs")
    untrimmed_loss: Literal["judge", "condemn"] = Field(
        "judge", description="what a lost packet that was not trimmed does to its EV: judge, "
        "condemn it only when the EV's losses stand out from the QP's other EVs' (random loss "
        "on every path is no path's fault); condemn, condemn it unless congestion explains the "
        "loss, as the MRC paper describes its NICs (a stated variant, not the default)")
    mpr: int = Field(MPR, ge=1, le=MAX_MPR, description="PSNs a QP may have outstanding past "
                     "its cumulative ACK, in units of 128 (mrc.h's MPR; default 8, the OCP MRC "
                     "API's example)")
    denied: list[DeniedPath] = Field(
        default_factory=list, max_length=limits.MAX_PLANES * limits.MAX_SPINES_PER_PLANE,
        description="paths MRC must never use (as a controller would "
                                          "deny them), for every pair of hosts")


DcqcnRatio = Annotated[float, Field(ge=limits.MIN_DCQCN_RTTS, le=limits.MAX_DCQCN_RTTS)]


class DcqcnSettings(StrictModel):
    """RoCEv2's DCQCN (hostagent/protocol/dcqcn.py): its CNP spacing and timers as ratios to
    the path's base RTT, since the paper's microsecond values suit a 10 us fabric RTT and the
    emulated RTTs are milliseconds. MRC runs ignore them."""

    cnp_rtts: DcqcnRatio = Field(
        DCQCN["cnp_rtts"].value, description="base RTTs between two CNPs of a QP at most (the "
        "notification point's spacing); default: the paper's 50 us over a 10 us RTT")
    timer_rtts: DcqcnRatio = Field(
        DCQCN["timer_rtts"].value, description="base RTTs of the alpha-decay and "
        "rate-increase timers; default: the paper's 55 us over a 10 us RTT")


class Telemetry(StrictModel):
    """Sampling of every port's counters during the workload (links.parquet)."""

    period: Annotated[float, TimeIn(0.01, 60)] | None = Field(
        None, description="between samples; default 0.1 s, longer where a sweep over every port "
                          "costs more than 5% of a core (measured at the start)")


class Agents(StrictModel):
    """How the host agents run: a process per host, or a few processes each serving many hosts
    (each host still with its own sockets in its own namespace, QPs, log and outputs)."""

    mode: Literal["pooled", "per_host"] = Field(
        "pooled", description="pooled: one process per core serves the hosts; per_host: one "
                              "process per host (to see each in ps, or with --cli)")
    processes: int | None = Field(None, ge=1, le=256, description="pooled: how many processes; "
                                  "default one per core")


class Scenario(StrictModel):
    """One experiment. Everything but the name has a default; the name defaults to the file's."""

    # `rate: auto` link classes ("host_link", "fabric_link"): validated at AUTO_PLACEHOLDER
    # until `with_rate` gives them the rate this machine carries (testbed/fabric/budget.py);
    # `_data` is the document as written, to validate again with that rate.
    _auto_links: frozenset[str] = PrivateAttr(default=frozenset())
    _data: dict[str, Any] = PrivateAttr(default_factory=dict)

    name: str = Field(pattern=SAFE_NAME_PATTERN,
                      description="letters, digits, '_', '.', '-'; used in result folder names")
    description: str = Field("", max_length=limits.MAX_DESCRIPTION_CHARS)
    seed: int = Field(1, ge=0, le=2**32 - 1)
    fabric: Fabric = Field(default_factory=Fabric)
    switch: Switch = Field(default_factory=Switch)
    naming: Naming = Field(default_factory=Naming)
    verify: Verify = Field(default_factory=Verify)
    transport: list[Transport] = Field(["mrc", "rocev2"], min_length=1, max_length=2,
                                       description="run the workload once per transport")
    workload: Workload = Field(default_factory=Workload)
    qp: QPSettings = Field(default_factory=QPSettings)
    mrc: MrcSettings = Field(default_factory=MrcSettings)
    dcqcn: DcqcnSettings = Field(default_factory=DcqcnSettings)
    telemetry: Telemetry = Field(default_factory=Telemetry)
    faults: list[Fault] = Field(default_factory=list, max_length=limits.MAX_FAULTS,
                                description="what breaks and when, s after the workload starts")
    routing: Routing = Field(default_factory=Routing)
    agents: Agents = Field(default_factory=Agents)
    background: list[Background] = Field(
        default_factory=list, max_length=limits.MAX_BACKGROUND_PATTERNS,
        description="iperf3 traffic beside the workload: incast, permutation, elephant")
    jobs: list[Job] = Field(
        default_factory=list, max_length=limits.MAX_JOBS,
        description="several jobs sharing the fabric, each with its hosts and workload "
                    "(instead of `workload`, the one-job form)")
    cluster: Cluster | None = Field(
        None, description="spread the fabric over several servers (VXLAN links between them); "
                          "absent: everything on this machine")
    max_wall_time: Annotated[float, TimeIn(1, limits.MAX_WALL_TIME)] = Field(
        limits.DEFAULT_MAX_WALL_TIME, description="the longest the run's estimated wall time "
        "(`validate` prints it: the workload and the faults, times the dilation) may be; a "
        "scenario estimated longer is refused. Raise it for a run meant to be long, e.g. '2h'")

    @model_validator(mode="after")
    def _ranks_exist(self) -> Scenario:
        ranks = self.workload.ranks
        if ranks != "all":
            hosts = {self.naming.host_name(i) for i in range(self.fabric.host_count)}
            unknown = [r for r in ranks if r not in hosts]
            if unknown:
                raise ValueError(f"workload.ranks: {unknown} are not hosts of this fabric "
                                 f"(hosts are {self.naming.host_name(0)}.."
                                 f"{self.naming.host_name(self.fabric.host_count - 1)})")
            if len(set(ranks)) != len(ranks) or len(ranks) < 2:
                raise ValueError("workload.ranks: at least 2 distinct hosts")
        for k, d in enumerate(self.mrc.denied):
            if d.plane >= self.fabric.planes or (d.spine is not None
                                                 and d.spine >= self.fabric.spines_per_plane):
                raise ValueError(f"mrc.denied.{k}: plane {d.plane} spine {d.spine} is not in "
                                 f"this fabric ({self.fabric.planes} planes of "
                                 f"{self.fabric.spines_per_plane} spines)")
        open_paths = {(p, sp) for p in range(self.fabric.planes)
                      for sp in range(self.fabric.spines_per_plane)
                      if not any(d.plane == p and d.spine in (None, sp) for d in self.mrc.denied)}
        if not open_paths:
            raise ValueError("mrc.denied: every path is denied; MRC would have nothing to use")
        if self.workload.training is not None:
            check_training(self.workload.training, len(self.rank_hosts()))
        if self.workload.chakra is not None:
            check_chakra(self.workload.chakra, self.rank_hosts())
        if self.workload.flows is not None:
            check_flows(self.workload.flows, len(self.rank_hosts()))
        if self.jobs:
            self._check_jobs()
        if self.background:
            check_background(self.background,
                             [self.naming.host_name(i) for i in range(self.fabric.host_count)],
                             self.fabric.planes, real_frame=self.fabric.real_rate is not None)
        if self.switch.lossless:
            for name in ("host_link", "fabric_link"):
                if getattr(self.fabric, name).trim_threshold is not None:
                    raise ValueError(
                        f"fabric.{name}.trim_threshold with switch.lossless: a lossless fabric "
                        f"does not trim; remove the threshold or set lossless: false")
        if self.switch.ecn and self.switch.trimming:
            for name in ("host_link", "fabric_link"):
                cls = getattr(self.fabric, name)
                if cls.ecn().kmin >= cls.trim():
                    key = "ecn_threshold" if cls.ecn_threshold is not None else "ecn_kmin"
                    raise ValueError(
                        f"fabric.{name}: {key} {format_size(cls.ecn().kmin)} must be below "
                        f"trim_threshold {format_size(cls.trim())}: a queue signals congestion "
                        f"(ECN) before it cuts packets")
        if self.cluster is not None:
            check_cluster(self.cluster, self.fabric.leaves_per_plane, self.fabric.link_count)
        if len(set(self.transport)) != len(self.transport):
            raise ValueError(f"transport: {self.transport} names a transport twice")
        overhead = 40 + 8 + HEADER_SIZE  # IPv6, UDP, the transport's header
        if self.qp.mss + overhead > self.fabric.mtu:
            raise ValueError(f"qp.mss {self.qp.mss} + {overhead} bytes of headers (IPv6, UDP, "
                             f"transport) exceed fabric.mtu {self.fabric.mtu}; lower qp.mss "
                             f"to {self.fabric.mtu - overhead} or raise the MTU")
        return self

    def _check_jobs(self) -> None:
        """Jobs replace the one workload; each fits its hosts; a straggler slows a job's rank."""
        if "workload" in self.model_fields_set:
            raise ValueError("workload and jobs: with jobs, each job states its workload "
                             "(jobs.N.workload); move the workload into a job")
        order = [self.naming.host_name(i) for i in range(self.fabric.host_count)]
        check_jobs([(j.name, j.hosts, j.placement) for j in self.jobs], order)
        owned = set()
        for k, (job, hosts) in enumerate(zip(self.jobs, self.job_hosts(), strict=True)):
            owned |= set(hosts)
            try:
                if job.workload.training is not None:
                    check_training(job.workload.training, len(hosts))
                if job.workload.chakra is not None:
                    check_chakra(job.workload.chakra, hosts)
                if job.workload.flows is not None:
                    check_flows(job.workload.flows, len(hosts))
            except ValueError as exc:
                raise ValueError(f"jobs.{k} ({job.name}).{exc}") from None
        for k, fault in enumerate(self.faults):
            if fault.kind == "straggler" and fault.target.host not in owned:
                raise ValueError(f"faults.{k}: straggler on {fault.target.host}, which is a "
                                 f"host of no job (a straggler slows a rank's compute)")

    def job_hosts(self) -> list[list[str]]:
        """Each job's hosts in rank order (testbed/scenario/jobs.py's placement rules)."""
        order = [self.naming.host_name(i) for i in range(self.fabric.host_count)]
        return allocate_jobs([(j.name, j.hosts, j.placement) for j in self.jobs], order,
                             self.fabric.hosts_per_leaf)

    def auto_links(self) -> tuple[str, ...]:
        """The link classes written `rate: auto`, whose rate is still to be chosen (empty once
        `with_rate` chose it, and for scenarios with fixed rates)."""
        return tuple(sorted(self._auto_links))

    def with_rate(self, rate: int, source: str = "scenario") -> Scenario:
        """This scenario with every `rate: auto` link class at `rate` (bit/s), validated again
        at that rate: a check that depends on the rate (the default ACK timeout's bound) is
        made with the rate that will run."""
        if not self._auto_links:
            return self
        data = _copy(self._data)
        for name in self._auto_links:
            data["fabric"][name]["rate"] = rate
        try:
            resolved = Scenario.model_validate(data)
        except ValidationError as exc:
            raise ScenarioError(format_errors(exc, f"{source} (at rate: auto = "
                                                   f"{format_rate(rate)})")) from None
        resolved._data = data
        return resolved

    def qps_per_peer(self, transport: Transport) -> int:
        """QPs between two ranks: as set, else 1 for MRC (one QP sprays every plane) and one
        per plane for RoCEv2 (a NIC with P ports runs at least one QP per port)."""
        default = self.fabric.planes if transport == "rocev2" else 1
        return self.qp.qps_per_peer.get(transport, default)

    @model_validator(mode="after")
    def _derived_bounds(self) -> Scenario:
        """Numbers the run derives from several fields, bounded like the fields themselves."""
        f = self.fabric
        for k, fault in enumerate(self.faults):
            if fault.kind == "degrade" and fault.rate is not None:
                cls, name = ((f.fabric_link, "fabric_link") if fault.target.shape == "link"
                             else (f.host_link, "host_link"))
                if fault.rate >= cls.rate:
                    raise ValueError(
                        f"faults.{k}: degrade to {format_rate(fault.rate)} is not below the "
                        f"link's rate ({format_rate(cls.rate)}, fabric.{name}.rate); a "
                        f"degrade lowers a link's rate")
        if self.qp.compress_above_rtts is not None and f.real_rate is None:
            raise ValueError("qp.compress_above_rtts without fabric.real_rate: timers are "
                             "compressed only in the real frame (without it they are "
                             "emulated seconds, as written); set a shorter qp.timeout instead")
        actions = sum(fault.actions() for fault in self.faults)
        if actions > limits.MAX_FAULT_ACTIONS:
            raise ValueError(f"faults: {actions:,} changes to apply (each fault and its undo, "
                             f"every flap cycle), more than {limits.MAX_FAULT_ACTIONS:,}")
        for name, given in (("timeout", self.qp.timeout), ("target_delay",
                                                           self.qp.target_delay)):
            derived = getattr(self, name)()
            if (given is None and self.qp.timeout_exp is None and f.real_rate is None
                    and derived > limits.MAX_DERIVED_TIMER):
                raise ValueError(
                    f"qp.{name}: its default, from the longest full-buffer drain "
                    f"({self.drain_time():.3g} s: a buffer over its link's rate), is "
                    f"{derived:.3g} s, beyond {limits.MAX_DERIVED_TIMER:g} s; set qp.{name}, "
                    f"or use smaller buffers or faster links")
        return self

    def variant(self, transport: str) -> str:
        """The baseline a run of `transport` measured, e.g. "RoCEv2, lossless, Go-Back-N,
        DCQCN" or "MRC, lossy, SACK, NSCC, trimming": the fabric's drop model, then what the
        fabric does to this transport's packets (only MRC data is ever trimmed)."""
        name, recovery, cc = MECHANISMS[transport]
        parts = [name, "lossless" if self.switch.lossless else "lossy", recovery, cc]
        if transport == "mrc" and self.switch.trimming:
            parts.append("trimming")
        if not self.switch.ecn:
            parts.append("no ECN")
        return ", ".join(parts)

    def ideal_busbw(self, transport: str) -> tuple[float, int]:
        """GB/s a rank can inject, and over how many planes: every plane for MRC (one QP
        sprays them all), one plane per QP for RoCEv2 (a QP is bound to one NIC port)."""
        planes = self.fabric.planes
        if transport == "rocev2":
            planes = min(planes, self.qps_per_peer("rocev2"))
        return planes * self.fabric.host_link.rate / 8e9, planes

    def active_evs_per_plane(self) -> int | None:
        """MRC's active EVs per plane: as set, else every EV where a path has several, else
        every path but one where a plane has 4 or more paths (that one is a spare, as
        production keeps EV sets larger than the active set), else every path (None).
        Fewer than 4 paths: a spare would idle a third or more of a plane's spines."""
        if self.mrc.evs_per_plane is not None:
            return self.mrc.evs_per_plane
        if self.mrc.evs_per_path > 1:  # a path's other EVs stand in for a condemned one
            return None
        spines = self.fabric.spines_per_plane
        return spines - 1 if spines >= SPARE_FROM_PATHS else None

    def router_ports(self) -> int:
        """Ports of leaves and spines: a host link has one, a leaf-spine link two."""
        f = self.fabric
        return f.planes * (f.host_count + 2 * f.leaves_per_plane * f.spines_per_plane)

    def queue_limit(self, cls: LinkClass) -> int:
        """Bytes a router port on a link of class `cls` queues before it drops: its buffer; in
        lossless mode an equal share of LOSSLESS_MEMORY over every router port, never below the
        buffer (the smallest fabric, 6 router ports, gives 179 MB: the eBPF program's and the
        FIFO's 32-bit limits hold it), past which a packet is a counted overflow."""
        if not self.switch.lossless:
            return cls.buffer
        return max(cls.buffer, limits.LOSSLESS_MEMORY // self.router_ports())

    def drain_time(self) -> float:
        """Seconds the slowest port takes to send a full buffer: the worst queueing per hop."""
        return max(c.buffer * 8 / c.rate for c in (self.fabric.host_link, self.fabric.fabric_link))

    def timeout(self, transport: Transport = "mrc") -> float:
        """A transport's ACK timeout as the scenario states it, s in its frame (the real
        fabric's with fabric.real_rate: testbed/fabric/timers.py runs it D times longer).
        Without real_rate, the default must outlast a queue, or a delayed packet counts as
        lost (and its healthy EV as bad): the emulated fabric's queues are milliseconds deep,
        unlike a switch's. With it, every queue scales with D, and the default is each
        transport's specification."""
        if self.qp.timeout is not None:
            return self.qp.timeout
        unit = timeout_unit(transport)
        if self.qp.timeout_exp is not None:
            return timeout_seconds(self.qp.timeout_exp, unit)
        if self.fabric.real_rate is not None:
            return timeout_seconds(NCCL_IB_TIMEOUT if transport == "rocev2"
                                   else ACK_TIMEOUT_EXP, unit)
        return 2 * self.drain_time() + 0.005

    def retry_schedule(self, transport: Transport) -> tuple[int, int]:
        """(linear_cnt, exp_cnt) a transport's QPs run: RoCEv2's retry_cnt (NCCL's 7 by
        default with fabric.real_rate) is that many retries at a fixed interval, none doubling."""
        r = self.qp.retry
        if transport == "rocev2":
            if r.retry_cnt is not None:
                return r.retry_cnt, 0
            if self.fabric.real_rate is not None:
                return NCCL_IB_RETRY_CNT, 0
        return r.linear_cnt, r.exp_cnt

    def target_delay(self) -> float:
        return (self.qp.target_delay if self.qp.target_delay is not None else
                max(0.002, self.drain_time() / 4))

    def rank_hosts(self) -> list[str]:
        if self.workload.ranks == "all":
            return [self.naming.host_name(i) for i in range(self.fabric.host_count)]
        return list(self.workload.ranks)

    @model_validator(mode="after")
    def _interface_names_fit(self) -> Scenario:
        f, n = self.fabric, self.naming
        longest = [
            f"{n.host_name(f.host_count - 1)}-eth{f.planes - 1}",
            f"{n.leaf_name(f.planes - 1, f.leaves_per_plane - 1)}-eth"
            f"{f.hosts_per_leaf + f.spines_per_plane - 1}",
            f"{n.spine_name(f.planes - 1, f.spines_per_plane - 1)}-eth{f.leaves_per_plane - 1}",
        ]
        for ifname in longest:
            if len(ifname) > limits.IFNAMSIZ:
                raise ValueError(
                    f"interface name {ifname!r} is longer than Linux's {limits.IFNAMSIZ} "
                    f"characters; shorten the naming prefixes")
        return self


# ---- loading --------------------------------------------------------------------------------

def parse(text: str, source: str, default_name: str | None = None) -> Scenario:
    """Validate scenario text; raise `ScenarioError` listing every problem with its field path."""
    data = source_.load_yaml(text, source)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: the top level must be a mapping of keys, "
                            f"got {type(data).__name__}")
    if "name" not in data and default_name is not None:
        data["name"] = default_name
    data = _copy(data)
    auto = _take_auto_rates(data)
    data = _rdma_as_jobs(data, auto, source)
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(format_errors(exc, source)) from None
    _check_real_times_name_their_unit(data, source)
    _check_auto_degrades(scenario, auto, source)
    scenario._auto_links, scenario._data = frozenset(auto), data
    return scenario


AUTO_PLACEHOLDER = limits.AUTO_RATE_LADDER[-1]  # what an `auto` rate is validated at


def _copy(data: Any) -> Any:
    """A deep copy of plain YAML data (dicts, lists, scalars)."""
    if isinstance(data, dict):
        return {k: _copy(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_copy(v) for v in data]
    return data


def _take_auto_rates(data: dict[str, Any]) -> list[str]:
    """The link classes written `rate: auto`, each set to AUTO_PLACEHOLDER in `data` (which is
    the caller's copy) so that the rest of the file is validated as usual."""
    fabric = data.get("fabric")
    auto = []
    for name in ("host_link", "fabric_link"):
        cls = fabric.get(name) if isinstance(fabric, dict) else None
        if not isinstance(cls, dict):
            continue
        rate = cls.get("rate")
        if isinstance(rate, str) and rate.strip().lower() == limits.AUTO_RATE:
            cls["rate"] = AUTO_PLACEHOLDER
            auto.append(name)
    return auto


def _rdma_as_jobs(data: dict[str, Any], auto: list[str], source: str) -> dict[str, Any]:
    """RDMA background patterns as jobs beside the workload (testbed/scenario/
    rdma_background.py), once the fabric they run on validates (else its own errors say
    what to fix first, and the patterns stay as written)."""
    try:
        fabric = Fabric.model_validate(data.get("fabric") or {})
        naming = Naming.model_validate(data.get("naming") or {})
    except ValidationError:
        return data
    hosts = [naming.host_name(i) for i in range(fabric.host_count)]
    if any(isinstance(b, dict) and b.get("kind") == "rdma" for b in data.get("background") or []):
        _check_real_times_name_their_unit(data, source)  # its times, before they become jobs'
    try:
        return rdma_as_jobs(data, auto, hosts,
                            fabric.planes * (fabric.real_rate or fabric.host_link.rate))
    except RdmaBackgroundError as exc:
        raise ScenarioError(f"{source}: invalid scenario (1 problem):\n  {exc}") from None


def _check_real_times_name_their_unit(data: dict[str, Any], source: str) -> None:
    """With fabric.real_rate, the file's real-frame times (testbed/scenario/real_times.py) name
    their unit. Checked on the text as written, not in the model: a scenario dumped and
    validated again (the cluster mode sends it to its servers) holds bare seconds."""
    fabric = data.get("fabric")
    bare = bare_numbers(data) if isinstance(fabric, dict) and fabric.get("real_rate") else []
    if bare:
        raise ScenarioError(
            f"{source}: invalid scenario (1 problem):\n  with fabric.real_rate, times are the "
            f"real fabric's and run D times longer, so each names its unit (e.g. '1us', '2ms'; "
            f"a bare number written for the emulated frame would silently run D times "
            f"longer): {', '.join(bare)}")


def _check_auto_degrades(scenario: Scenario, auto: list[str], source: str) -> None:
    """A `degrade` to an absolute rate cannot be checked against a rate not yet chosen."""
    for k, fault in enumerate(scenario.faults):
        if fault.kind != "degrade" or fault.rate is None:
            continue
        name = "fabric_link" if fault.target.shape == "link" else "host_link"
        if name in auto:
            raise ScenarioError(
                f"{source}: faults.{k}: a degrade to {format_rate(fault.rate)} on a link whose "
                f"rate is auto (fabric.{name}.rate) may not be below the rate chosen; give it "
                f"as a fraction (e.g. fraction: 0.25)")


def load(path: str | Path | None) -> tuple[Scenario, str]:
    """The scenario at `path` (the embedded quickstart when None) and its text as run."""
    file = Path(path) if path is not None else DEFAULT_SCENARIO
    text = source_.read(file)
    return parse(text, str(file), default_name=file.stem), text


def format_errors(exc: ValidationError, source: str, model: type[BaseModel] | None = None,
                  what: str = "scenario") -> str:
    """One line per problem: field path, the bad value, what is allowed (keys of `model`,
    default the scenario's)."""
    problems = exc.errors(include_url=False)
    lines = [f"{source}: invalid {what} ({len(problems)} problem"
             f"{'s' if len(problems) > 1 else ''}):"]
    for err in problems:
        loc = [str(part) for part in err["loc"]]
        path = ".".join(loc) or "(top level)"
        if err["type"] == "extra_forbidden":
            allowed = _allowed_keys(model or Scenario, err["loc"][:-1])
            close = difflib.get_close_matches(loc[-1], allowed, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            lines.append(f"  {path}: unknown key{hint} allowed here: {', '.join(allowed)}")
            continue
        msg = err["msg"]
        if err["type"] in ("value_error", "assertion_error"):
            msg = msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
            if not loc:
                lines.append(f"  {msg}")
            elif isinstance(err["input"], (dict, list)):
                lines.append(f"  {path}: {msg}")
            else:
                lines.append(f"  {path}: {_short(err['input'])} is not allowed: {msg}")
            continue
        if err["type"] == "missing":
            lines.append(f"  {path}: required, missing")
            continue
        if err["type"] == "string_pattern_mismatch":
            pattern = err.get("ctx", {}).get("pattern", "")
            msg = f"must match {pattern} ({_pattern_words(pattern)})"
        lines.append(f"  {path}: {_short(err['input'])} is not allowed: {msg}")
    return "\n".join(lines)


_REPR = reprlib.Repr()
_REPR.maxstring, _REPR.maxother, _REPR.maxlist, _REPR.maxdict, _REPR.maxlevel = 60, 60, 6, 4, 2


def _short(value: object) -> str:
    """A bad value as the user wrote it, cut short: an error must never echo a whole input
    (an alias-expanded list printed 312 MB before the node limit existed)."""
    return _REPR.repr(value)


def _pattern_words(pattern: str) -> str:
    return {
        SAFE_NAME_PATTERN: "a letter or digit, then up to 39 letters, digits, '_', '.' or '-'",
        PREFIX_PATTERN: "1 to 3 lowercase letters",
    }.get(pattern, "see `mrc-testbed schema`")


def _allowed_keys(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """Field names of the sub-model at `loc`, for "did you mean" on unknown keys."""
    parts = [p for p in loc if not isinstance(p, int)]  # list positions: the item's model
    while parts:
        field = model.model_fields.get(str(parts.pop(0)))
        annotation = getattr(field, "annotation", None)
        if getattr(annotation, "__origin__", None) is dict and parts:  # dict[key, Model]
            parts.pop(0)
        found = _model_in(annotation)
        if found is None:
            return []
        model = found
    return list(model.model_fields)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds, through `X | None`, `list[X]` and `dict[K, X]`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def json_schema() -> dict[str, Any]:
    schema = Scenario.model_json_schema()
    rate = schema["$defs"]["LinkClass"]["properties"]["rate"]
    rate["anyOf"].append({"type": "string", "enum": [limits.AUTO_RATE],
                          "description": "the highest rate this machine's measured packet "
                                         "budget carries (mrc-testbed calibrate)"})
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "mrc-testbed scenario"
    return schema


def describe(s: Scenario) -> str:
    f = s.fabric
    auto = s.auto_links()

    def rate(name: str) -> str:
        return limits.AUTO_RATE if name in auto else format_rate(getattr(f, name).rate)
    return (f"{s.name}: {f.planes} planes x ({f.leaves_per_plane} leaves + "
            f"{f.spines_per_plane} spines), {f.host_count} hosts, {f.node_count} nodes, "
            f"{f.link_count} links, host links {rate('host_link')}, "
            f"fabric links {rate('fabric_link')}, MTU {f.mtu}"
            + (f", on {len(s.cluster.server_names())} "
               f"{'emulated ' if s.cluster.emulated else ''}servers ({s.cluster.placement} "
               f"placement)" if s.cluster is not None else ""))
