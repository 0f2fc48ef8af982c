"""The scenario file: a declarative description of one experiment, validated into typed models.

Why pydantic: every field gets a type, a default and a documented range in one place, the JSON
Schema for editors comes for free, and errors carry the field path that the user must fix.
Later parts of the testbed (workload, transports, faults) add sections to `Scenario`.
"""
from __future__ import annotations

import difflib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from hostagent.wire import HEADER_SIZE
from testbed.errors import ScenarioError
from testbed.scenario import limits
from testbed.scenario.background import Background
from testbed.scenario.background import check as check_background
from testbed.scenario.faults import Fault, Routing
from testbed.scenario.units import Rate, Size, format_rate, format_size

SAFE_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$"
PREFIX_PATTERN = r"^[a-z]{1,3}$"
DEFAULT_SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "quickstart.yaml"


class StrictModel(BaseModel):
    """Unknown keys are errors: a typo must not silently fall back to a default."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class LinkClass(StrictModel):
    """Rate and egress buffer of one class of links, applied at both ends."""

    rate: Rate = Field(100 * 10**6, description="line rate, e.g. '100Mbit'")
    buffer: Size = Field(100_000, description="egress queue limit in bytes, e.g. '100KB'")

    ecn_threshold: Size | None = Field(
        None, description="queue bytes above which a router port marks ECN-capable packets CE "
                          "(switch.ecn); default: a fifth of the buffer")
    trim_threshold: Size | None = Field(
        None, description="queue bytes above which a router port trims MRC data packets to "
                          "their header (switch.trim); default: four fifths of the buffer")

    @field_validator("rate", "buffer")
    @classmethod
    def _in_range(cls, value: int, info: ValidationInfo) -> int:
        fmt: Callable[[float], str]
        if info.field_name == "rate":
            low, high, fmt = limits.MIN_RATE, limits.MAX_RATE, format_rate
        else:
            low, high, fmt = limits.MIN_BUFFER, limits.MAX_BUFFER, format_size
        if not low <= value <= high:
            raise ValueError(f"{fmt(value)} is outside {fmt(low)}..{fmt(high)}")
        return value

    @model_validator(mode="after")
    def _thresholds_in_buffer(self) -> LinkClass:
        for name in ("ecn_threshold", "trim_threshold"):
            value = getattr(self, name)
            if value is not None and not 0 < value <= self.buffer:
                raise ValueError(f"{name} {format_size(value)} must be above 0 and at most the "
                                 f"buffer ({format_size(self.buffer)})")
        return self

    def ecn(self) -> int:
        """Queue bytes above which packets are marked: early, as DCQCN's K_min is."""
        return self.ecn_threshold if self.ecn_threshold is not None else self.buffer // 5

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
    program at its egress (testbed/bpf/fabric_queue.c). Thresholds are per link class."""

    ecn: bool = Field(True, description="mark CE on ECN-capable packets above ecn_threshold")
    trim: bool = Field(True, description="cut MRC data packets to their header above "
                                         "trim_threshold and forward the header first")

    @property
    def enabled(self) -> bool:
        return self.ecn or self.trim


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
    timeout: float = Field(2.0, gt=0, le=60, description="seconds to wait for one probe round")
    retries: int = Field(2, ge=0, le=10, description="probe rounds after the first for lost probes")


Collective = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all"]
Transport = Literal["mrc", "rocev2"]


def _per_transport(value: int) -> dict[Transport, int]:
    return {"mrc": value, "rocev2": value}


class Workload(StrictModel):
    """The collective every rank runs, as in nccl-tests: one size, several iterations."""

    collective: Collective = "all_reduce"
    size: Size = Field(1_048_576, description="bytes of the array (nccl-tests' size), e.g. '1MiB'")
    iterations: int = Field(5, ge=1, le=100_000)
    warmup: int = Field(1, ge=0, le=1000, description="iterations run first and not reported")
    compute_gap: float = Field(0.0, ge=0, le=60, description="seconds of 'compute' between "
                                                              "iterations (the network idles)")
    ranks: list[str] | Literal["all"] = Field(
        "all", description="host names taking part, in rank order, or all hosts")

    @field_validator("size")
    @classmethod
    def _size_in_range(cls, size: int) -> int:
        if not 4 <= size <= limits.MAX_COLLECTIVE_BYTES:
            raise ValueError(f"{format_size(size)} is outside 4 B.."
                             f"{format_size(limits.MAX_COLLECTIVE_BYTES)}")
        if size % 4:
            raise ValueError(f"{size} B is not a whole number of float32 elements (4 B each)")
        return size


class QPSettings(StrictModel):
    """Settings both transports share where they mean the same (a fair comparison)."""

    mss: Size = Field(1024, description="payload bytes per packet")
    init_window: Size = Field(64 * 1024, description="congestion window at start, bytes")
    max_window: Size = Field(256 * 1024, description="largest congestion window, bytes")
    base_rto: float | None = Field(
        None, gt=0, le=10, description="first retransmission timeout, s; default: twice the "
                                       "longest a full buffer takes to drain, plus 5 ms")
    target_delay: float | None = Field(
        None, gt=0, le=10, description="queueing delay congestion control aims at, s; default: "
                                       "a quarter of the longest full-buffer drain, >= 2 ms")
    linear_retries: int = Field(7, ge=0, le=64, description="timeouts growing linearly, then x2")
    retry_budget: int = Field(14, ge=1, le=64, description="attempts of a packet before the "
                                                            "QP fails")
    ack_every: int = Field(4, ge=1, le=64)
    gso: bool = Field(False, description="agents send runs of data packets to one destination "
                                         "with UDP GSO (fewer system calls, same packets)")
    qps_per_peer: dict[Transport, int] = Field(
        default_factory=lambda: _per_transport(1),
        description="QPs between two ranks (the MRC paper compares RoCEv2 with 1, 8, 16)")

    @model_validator(mode="after")
    def _consistent(self) -> QPSettings:
        if self.init_window > self.max_window:
            raise ValueError(f"init_window {self.init_window} exceeds max_window "
                             f"{self.max_window}")
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

    evs_per_plane: int | None = Field(None, ge=1, le=256,
                                      description="active EVs per plane; default: every path")
    ev_min_active: int = Field(1, ge=1, le=4096)
    spray: Literal["round_robin", "random"] = "round_robin"
    probe_interval: float = Field(0.005, gt=0, le=10, description="s between probes of a bad EV")
    congestion_holdoff: float = Field(0.001, ge=0, le=10,
                                      description="s an ECN-marked or trimmed EV is skipped")
    hot_ratio: float = Field(1.5, ge=1, le=100, description="an EV marked this many times "
                             "more often than the QP's others is a hot path")
    hot_rtts: float = Field(4.0, ge=0, le=1000, description="a hot EV, when marked, is "
                            "skipped this many smoothed RTTs")
    denied: list[DeniedPath] = Field(
        default_factory=list, description="paths MRC must never use (as a controller would "
                                          "deny them), for every pair of hosts")


class Telemetry(StrictModel):
    """Sampling of every port's counters during the workload (links.parquet)."""

    period: float | None = Field(None, ge=0.01, le=60, description="seconds between samples; "
                                 "default 0.1 up to 40 nodes, 0.25 up to 120, else 0.5")


class Scenario(StrictModel):
    """One experiment. Everything but the name has a default; the name defaults to the file's."""

    name: str = Field(pattern=SAFE_NAME_PATTERN,
                      description="letters, digits, '_', '.', '-'; used in result folder names")
    description: str = ""
    seed: int = Field(1, ge=0, le=2**32 - 1)
    fabric: Fabric = Field(default_factory=Fabric)
    switch: Switch = Field(default_factory=Switch)
    naming: Naming = Field(default_factory=Naming)
    verify: Verify = Field(default_factory=Verify)
    transport: list[Transport] = Field(["mrc", "rocev2"], min_length=1,
                                       description="run the workload once per transport")
    workload: Workload = Field(default_factory=Workload)
    qp: QPSettings = Field(default_factory=QPSettings)
    mrc: MrcSettings = Field(default_factory=MrcSettings)
    telemetry: Telemetry = Field(default_factory=Telemetry)
    faults: list[Fault] = Field(default_factory=list,
                                description="what breaks and when, s after the workload starts")
    routing: Routing = Field(default_factory=Routing)
    background: list[Background] = Field(
        default_factory=list, description="iperf3 traffic beside the workload: incast, "
                                          "permutation, elephant")

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
        if self.background:
            check_background(self.background,
                             [self.naming.host_name(i) for i in range(self.fabric.host_count)],
                             self.fabric.planes)
        if self.switch.ecn and self.switch.trim:
            for name in ("host_link", "fabric_link"):
                cls = getattr(self.fabric, name)
                if cls.ecn() >= cls.trim():
                    raise ValueError(
                        f"fabric.{name}: ecn_threshold {format_size(cls.ecn())} must be below "
                        f"trim_threshold {format_size(cls.trim())}: a queue signals congestion "
                        f"(ECN) before it cuts packets")
        if len(set(self.transport)) != len(self.transport):
            raise ValueError(f"transport: {self.transport} names a transport twice")
        overhead = 40 + 8 + HEADER_SIZE  # IPv6, UDP, the transport's header
        if self.qp.mss + overhead > self.fabric.mtu:
            raise ValueError(f"qp.mss {self.qp.mss} + {overhead} bytes of headers (IPv6, UDP, "
                             f"transport) exceed fabric.mtu {self.fabric.mtu}; lower qp.mss "
                             f"to {self.fabric.mtu - overhead} or raise the MTU")
        return self

    def ideal_busbw(self, transport: str) -> tuple[float, int]:
        """GB/s a rank can inject, and over how many planes: every plane for MRC (one QP
        sprays them all), one plane per QP for RoCEv2 (a QP is bound to one NIC port)."""
        planes = self.fabric.planes
        if transport == "rocev2":
            planes = min(planes, self.qp.qps_per_peer.get("rocev2", 1))
        return planes * self.fabric.host_link.rate / 8e9, planes

    def drain_time(self) -> float:
        """Seconds the slowest port takes to send a full buffer: the worst queueing per hop."""
        return max(c.buffer * 8 / c.rate for c in (self.fabric.host_link, self.fabric.fabric_link))

    def base_rto(self) -> float:
        """A timeout must outlast a queue, or a delayed packet counts as lost (and its healthy
        EV as bad): the emulated fabric's queues are milliseconds deep, unlike a switch's."""
        return self.qp.base_rto if self.qp.base_rto is not None else \
            2 * self.drain_time() + 0.005

    def target_delay(self) -> float:
        return self.qp.target_delay if self.qp.target_delay is not None else \
            max(0.002, self.drain_time() / 4)

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

class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML keeps the last of two equal keys; a repeated key is almost always a mistake."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode,
                       deep: bool = False) -> dict[Any, Any]:
    seen: dict[Any, Any] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen[key] = True
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse(text: str, source: str, default_name: str | None = None) -> Scenario:
    """Validate scenario text; raise `ScenarioError` listing every problem with its field path."""
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ScenarioError(f"{source}:{where}: not valid YAML: {problem}",
                            "fix the YAML syntax at that place") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: the top level must be a mapping of keys, "
                            f"got {type(data).__name__}")
    if "name" not in data and default_name is not None:
        data["name"] = default_name
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(format_errors(exc, source)) from None


def load(path: str | Path | None) -> tuple[Scenario, str]:
    """The scenario at `path` (the embedded quickstart when None) and its text as run."""
    file = Path(path) if path is not None else DEFAULT_SCENARIO
    try:
        text = file.read_text()
    except FileNotFoundError:
        raise ScenarioError(f"{file}: no such scenario file",
                            "give the path of a YAML file, e.g. scenarios/quickstart.yaml"
                            ) from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"{file}: cannot read it ({exc.__class__.__name__})") from None
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
                lines.append(f"  {path}: {err['input']!r} is not allowed: {msg}")
            continue
        if err["type"] == "missing":
            lines.append(f"  {path}: required, missing")
            continue
        if err["type"] == "string_pattern_mismatch":
            pattern = err.get("ctx", {}).get("pattern", "")
            msg = f"must match {pattern} ({_pattern_words(pattern)})"
        lines.append(f"  {path}: {err['input']!r} is not allowed: {msg}")
    return "\n".join(lines)


def _pattern_words(pattern: str) -> str:
    return {
        SAFE_NAME_PATTERN: "a letter or digit, then up to 39 letters, digits, '_', '.' or '-'",
        PREFIX_PATTERN: "1 to 3 lowercase letters",
    }.get(pattern, "see `mrc-testbed schema`")


def _allowed_keys(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """Field names of the sub-model at `loc`, for "did you mean" on unknown keys."""
    parts = list(loc)
    while parts:
        field = model.model_fields.get(str(parts.pop(0)))
        annotation = getattr(field, "annotation", None)
        args: tuple[Any, ...] = getattr(annotation, "__args__", ())
        if getattr(annotation, "__origin__", None) is dict and parts and args:  # dict[k, Model]
            annotation = args[-1]
            parts.pop(0)
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        model = annotation
    return list(model.model_fields)


def json_schema() -> dict[str, Any]:
    schema = Scenario.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "mrc-testbed scenario"
    return schema


def describe(s: Scenario) -> str:
    f = s.fabric
    return (f"{s.name}: {f.planes} planes x ({f.leaves_per_plane} leaves + "
            f"{f.spines_per_plane} spines), {f.host_count} hosts, {f.node_count} nodes, "
            f"{f.link_count} links, host links {format_rate(f.host_link.rate)}, "
            f"fabric links {format_rate(f.fabric_link.rate)}, MTU {f.mtu}")
