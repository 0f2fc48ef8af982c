"""The requests the runner sends a server agent, and their replies: one type per op, shared by
both ends of the ssh session.

The wire is JSON lines, one request at a time: `{"op": NAME, FIELD: value, ...}` in,
`{"ok": true, "result": REPLY}` or `{"ok": false, "error": "..."}` out. A request is a frozen
dataclass named after its op (`Link` is `link`); its reply is the TypedDict it is generic in, so
`session.request(ops.Link(...))` is typed at the call site. The runner builds requests with
their constructors, the agent decodes each line back into the same class (`decode`: an
unknown op or field fails there, naming it) and dispatches on the class. Values cross as JSON:
a tuple arrives as a list, which the agent only unpacks.

Why a hand-written RPC and not a remote-execution library over ssh: execnet says of itself
that it is in maintenance-only mode and not for new projects; rpyc proxies objects (each
attribute a round trip, the boundary invisible at the call site) and over ssh needs a listening
TCP port per server plus plumbum. The agent needs what neither gives for free: its life tied
to the session's stdin (a lost runner cleans its server), stdout owned by the protocol
(everything else printed goes to its log), waits a signal can interrupt, one request sent to
every server before any reply is read (`ask_all`), and the repository with its venv on the
server anyway (pyroute2, eBPF objects, the C extension), so shipping code buys nothing. About
a hundred lines of JSON lines do all that; this module gives them the types.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypedDict, TypeVar

R = TypeVar("R")

# [EV index, source host, destination address]
Probe = tuple[int, str, str]
# [EV index, receiving host, destination address seen, arrival ifindex] (None: no pktinfo)
Arrival = tuple[int, str, str | None, int | None]
# [job, started, finished, error]: times in the server's clock, None when not applied
NftOutcome = tuple[int, float | None, float | None, str | None]


class BadRequest(ValueError):
    """A line that names no known op, or fields its op does not have."""


REQUESTS: dict[str, type[Request[Any]]] = {}


@dataclass(frozen=True)
class Request(Generic[R]):
    """One op's request; subclasses set `op` and are registered under it."""

    op: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("op")
        if name:
            if name in REQUESTS:
                raise TypeError(f"two requests named {name!r}")
            REQUESTS[name] = cls

    def message(self) -> dict[str, Any]:
        """The request as it goes on the wire."""
        return {"op": self.op, **{f.name: getattr(self, f.name)
                                  for f in dataclasses.fields(self)}}


def decode(message: dict[str, Any]) -> Request[Any]:
    """A request line, parsed, back into its class."""
    name = message.pop("op", None)
    kind = REQUESTS.get(name) if isinstance(name, str) else None
    if kind is None:
        raise BadRequest(f"unknown request {name!r}")
    try:
        return kind(**message)
    except TypeError as exc:
        raise BadRequest(f"{name}: {exc}") from None


class Empty(TypedDict):
    """The reply of a request that only acts."""


# ---- the session ----
class HelloReply(TypedDict):
    pid: int
    host: str
    python: str
    netns: int | None
    work: str  # the agent's work folder: what it spawns writes there
    cores: int
    boot_id: str


@dataclass(frozen=True)
class Hello(Request[HelloReply]):
    """Who the agent is; also its first line, unasked."""

    op = "hello"


@dataclass(frozen=True)
class Preflight(Request[list[str]]):
    """What the server lacks to hold nodes, tunnels and the workload (empty: nothing)."""

    op = "preflight"


class ClockReply(TypedDict):
    t2: int  # ns, the request's arrival in the server's clock
    t3: int  # ns, the reply's departure


@dataclass(frozen=True)
class Clock(Request[ClockReply]):
    op = "clock"


@dataclass(frozen=True)
class Plan(Request[Empty]):
    """The scenario as the runner validated it (the plan is rebuilt from it)."""

    op = "plan"
    run: str
    scenario: dict[str, Any]
    server: str


class LogReply(TypedDict):
    text: str


@dataclass(frozen=True)
class Log(Request[LogReply]):
    op = "log"


class CleanupReply(TypedDict):
    killed: int


@dataclass(frozen=True)
class Cleanup(Request[CleanupReply]):
    op = "cleanup"


# ---- the build ----
@dataclass(frozen=True)
class Nodes(Request[dict[str, int]]):
    """Nodes whose shells started on the server, by pid; the reply: each one's netns inode."""

    op = "nodes"
    pids: dict[str, int]


class LinksReply(TypedDict):
    veths: int
    tunnels: int


@dataclass(frozen=True)
class Links(Request[LinksReply]):
    op = "links"


@dataclass(frozen=True)
class Configure(Request[dict[str, dict[str, int]]]):
    """Every node of the server configured; the reply: node -> interface name -> ifindex."""

    op = "configure"
    fifo: dict[str, int]  # "node/ifname" -> FIFO bytes behind the port's shaper


class UnderlayReply(TypedDict):
    ifname: str
    mtu: int
    counters: Sequence[int]  # /proc/net/dev order
    rtt_ms: dict[str, float | None]  # peer -> RTT, None when the packet did not cross


@dataclass(frozen=True)
class Underlay(Request[UnderlayReply]):
    """The device holding `address`; with `peers`, a DF ping of `size` bytes to each."""

    op = "underlay"
    address: str
    size: int = 0
    peers: dict[str, str] = dataclasses.field(default_factory=dict)


# ---- verification ----
@dataclass(frozen=True)
class EndSids(Request[dict[str, dict[str, int]]]):
    """Packets through each End SID: router -> SID -> packets."""

    op = "end_sids"


@dataclass(frozen=True)
class ProbeOpen(Request[Empty]):
    op = "probe_open"
    nonce: int


class ProbeSendReply(TypedDict):
    sent: int


@dataclass(frozen=True)
class ProbeSend(Request[ProbeSendReply]):
    op = "probe_send"
    probes: list[Probe]
    window: int  # probes sent back to back
    pause: float  # s between windows


class ProbeCollectReply(TypedDict):
    arrivals: list[Arrival]


@dataclass(frozen=True)
class ProbeCollect(Request[ProbeCollectReply]):
    op = "probe_collect"


@dataclass(frozen=True)
class ProbeClose(Request[Empty]):
    op = "probe_close"


# ---- telemetry and the fidelity monitor ----
class SampleReply(TypedDict):
    time_ns: int
    nodes: dict[str, dict[str, list[Any]]]  # node -> ifname -> PortSample


@dataclass(frozen=True)
class Sample(Request[SampleReply]):
    op = "sample"
    queues: bool


@dataclass(frozen=True)
class MonitorStart(Request[Empty]):
    op = "monitor_start"


class MonitorStopReply(TypedDict):
    ports: list[dict[str, Any]]  # histogram rows
    unavailable: str | None
    cpu_rows: list[dict[str, Any]]
    cores: int
    nodes: list[str]


@dataclass(frozen=True)
class MonitorStop(Request[MonitorStopReply]):
    op = "monitor_stop"


# ---- faults and path probes, about one node ----
@dataclass(frozen=True)
class Link(Request[Empty]):
    """A port administratively up or down."""

    op = "link"
    node: str
    ifname: str
    up: bool


@dataclass(frozen=True)
class QueueRate(Request[Empty]):
    op = "queue_rate"
    node: str
    ifname: str
    rate: int  # bit/s


@dataclass(frozen=True)
class PortRate(Request[Empty]):
    op = "port_rate"
    node: str
    ifname: str
    rate: int  # bit/s


@dataclass(frozen=True)
class PortDelay(Request[Empty]):
    """The FIFO behind a port's shaper replaced by a netem delay, or put back (None)."""

    op = "port_delay"
    node: str
    ifname: str
    limit: int  # bytes of the FIFO
    delay: float | None  # s


@dataclass(frozen=True)
class Routes(Request[Empty]):
    """Plain routes withdrawn (`delete`) and replaced: [prefix, [[gateway, ifname], ...]]."""

    op = "routes"
    node: str
    delete: list[str]
    replace: list[tuple[str, list[tuple[str, str]]]]


class RxPacketsReply(TypedDict):
    packets: int


@dataclass(frozen=True)
class RxPackets(Request[RxPacketsReply]):
    op = "rx_packets"
    node: str
    ifname: str


@dataclass(frozen=True)
class SendUdp(Request[Empty]):
    op = "send_udp"
    node: str
    src: str
    sport: int
    dst: str
    dport: int
    count: int


# ---- nftables workers (client_nft.py) ----
@dataclass(frozen=True)
class NftStart(Request[Empty]):
    """The node's worker started if it is not, `setup` applied; waits until it is ready."""

    op = "nft_start"
    node: str
    setup: str = ""


@dataclass(frozen=True)
class NftSubmit(Request[Empty]):
    op = "nft_submit"
    node: str
    job: int
    script: str
    at: float | None  # s, the server's clock; None: at once


class NftDoneReply(TypedDict):
    done: list[NftOutcome]


@dataclass(frozen=True)
class NftDone(Request[NftDoneReply]):
    op = "nft_done"


@dataclass(frozen=True)
class NftStop(Request[Empty]):
    op = "nft_stop"
    node: str


@dataclass(frozen=True)
class NftClose(Request[Empty]):
    op = "nft_close"
    node: str


# ---- processes and files (server_jobs.py) ----
@dataclass(frozen=True)
class Write(Request[Empty]):
    op = "write"
    files: dict[str, str]  # path -> text


class FilesReply(TypedDict):
    files: dict[str, str | None]


@dataclass(frozen=True)
class Read(Request[FilesReply]):
    op = "read"
    paths: list[str]


class SpawnReply(TypedDict):
    pid: int


@dataclass(frozen=True)
class Spawn(Request[SpawnReply]):
    op = "spawn"
    node: str
    key: str  # the process's name in the run
    argv: list[str]
    stdout: str
    cwd: str | None = None


class ProcsReply(TypedDict):
    status: dict[str, int | None]  # key -> exit status, None while it runs


@dataclass(frozen=True)
class Procs(Request[ProcsReply]):
    op = "procs"


@dataclass(frozen=True)
class Signal(Request[Empty]):
    op = "signal"
    keys: list[str]
    signal: int


class ListingReply(TypedDict):
    files: list[tuple[str, int]]  # [path, size]


@dataclass(frozen=True)
class Listing(Request[ListingReply]):
    op = "listing"
    path: str


class ChunkReply(TypedDict):
    data: str  # base64
    size: int


@dataclass(frozen=True)
class Chunk(Request[ChunkReply]):
    op = "chunk"
    path: str
    offset: int


@dataclass(frozen=True)
class Gathered(Request[Empty]):
    """The runner copied these back (noted in the agent's log)."""

    op = "gathered"
    files: int
    bytes: int
    what: str
