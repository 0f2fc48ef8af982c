"""The collected tables' schemas: every column of every parquet table a run writes, its kind
and its meaning.

One declaration serves both sides: the testbed checks each table against it before writing it
(runcontract/table_io.py), `analysis` checks each table it reads, the manual's results page
and `mrc-testbed schema --tables` are made from it. An agent's field renamed or added without
being declared here fails the run's collection naming the table and the column, instead of a
notebook finding a column gone. Pure data: no pandas, so the CLI can import it cheaply.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

Kind = Literal["int", "float", "bool", "str", "time", "list", "json"]
KIND_MEANINGS: Final[dict[str, str]] = {
    "int": "an integer (a nullable one may be stored as a float: NaN for null)",
    "float": "a number", "bool": "true or false", "str": "a string",
    "time": "float seconds on the wall clock (time.time(), shared by a run's hosts)",
    "list": "a list of values", "json": "a JSON document in a string"}


@dataclass(frozen=True)
class Column:
    """One column. `only` names the runs that write it ("mrc", "rocev2": that transport's;
    "cluster": a run over several machines); others leave it out. `since` is the meta.json
    schema version from which runs write it: a folder from before may lack it, so a reader
    must not need it."""

    name: str
    kind: Kind
    meaning: str
    nullable: bool = False
    only: str | None = None
    since: int = 1


@dataclass(frozen=True)
class Table:
    """One parquet table of a results folder: `required` ones every report needs."""

    name: str
    meaning: str
    columns: tuple[Column, ...]
    required: bool = False

    @property
    def file(self) -> str:
        return f"{self.name}.parquet"

    def column(self, name: str) -> Column | None:
        return next((c for c in self.columns if c.name == name), None)

    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def written(self, context: frozenset[str]) -> tuple[Column, ...]:
        """The columns a run of `context` (its transport, "cluster") writes."""
        return tuple(c for c in self.columns if c.only is None or c.only in context)


def _c(name: str, kind: Kind, meaning: str, **how: Any) -> Column:
    return Column(name, kind, meaning, **how)


# The columns collect adds to every agent's rows: which agent wrote them.
_AGENT = (_c("host", "str", "the host the agent ran on"),
          _c("rank", "int", "its rank"),
          _c("transport", "str", "the transport it ran (mrc, rocev2)"),
          _c("job", "str", "its job, in a run of several (scenario `jobs:`); null: the one "
                           "workload", nullable=True, since=5))
_QP = (_c("peer", "int", "the peer's rank"),
       _c("qpn", "int", "the QP's number"))
# What every QP counts (hostagent/protocol/qp.py QPCounters), for both transports.
_QP_COUNTERS = (
    _c("data_sent", "int", "data packets sent, retransmissions included"),
    _c("retransmits", "int", "data packets sent again"),
    _c("acks_sent", "int", "ACKs its receiver sent"),
    _c("nacks_sent", "int", "NACKs its receiver sent"),
    _c("trims_received", "int", "trimmed packets its receiver got (MRC)"),
    _c("corrupt", "int", "packets dropped for a bad checksum"),
    _c("duplicates", "int", "data packets received twice"),
    _c("out_of_order", "int", "data packets received out of order"),
    _c("dropped_out_of_order", "int", "out-of-order packets dropped (Go-Back-N)"),
    _c("timeouts", "int", "timer expiries: one per path per timer pass"),
    _c("packet_timeouts", "int", "packets that timed out"),
    _c("cnps_sent", "int", "CNPs its receiver sent for CE-marked arrivals (RoCEv2)"),
    _c("placed_bytes", "int", "payload bytes its receiver placed"),
    _c("access_errors", "int", "writes outside the registered region"),
    _c("probes_sent", "int", "path probes sent (MRC)"),
    _c("probe_replies", "int", "probe replies its receiver sent (MRC)"),
    _c("tail_probes", "int", "tail-loss probes sent (MRC)"),
    _c("rack_losses", "int", "losses found by RACK before the ACK timeout (MRC)"),
    _c("stalls", "int", "timeout bursts taken for a host stall (MRC)"),
    _c("spurious_timeouts", "int", "timeouts whose earlier copy was acknowledged after"),
    _c("rearmed", "int", "timers restarted when due (the timeout rose, or the path delivered)"),
)

# What each MRC EV counts (hostagent/protocol/evs.py EV); RoCEv2 has no EVs.
_MRC_EV = (*(_c(name, "int", meaning, only="mrc") for name, meaning in (
    ("losses", "losses that condemned it (or would have, but for the floor)"),
    ("trims", "its packets trimmed in the fabric"),
    ("ecn", "its packets that came back ECN-marked"),
    ("condemned", "times it went GOOD -> ASSUMED_BAD"),
    ("congestion_losses", "losses explained by congestion (held off instead)"),
    ("hot_swaps", "times swapped out for a spare as a hot path"),
    ("random_losses", "gap losses no worse than the other EVs'"),
    ("floor_holds", "losses that did not condemn it because of ev_min_active"),
    ("timeouts", "timeouts of packets sent on it"),
    ("stall_timeouts", "of those, timeouts that were part of a host stall"),
    ("probes_sent", "probes sent on it"),
    ("probes_answered", "probes answered"))),
    _c("probe_rtts", "list", "the answered probes' RTTs (s, the first few)", only="mrc"))

_TABLES = (
    Table("iterations", "one row per rank and collective call (or training step); rows "
          "without times are iterations an agent did not complete", (
              *_AGENT,
              _c("kind", "str", "the collective (all_reduce, ...), or step"),
              _c("iteration", "int", "its number, warm-up first, from 0"),
              _c("warmup", "bool", "a warm-up iteration (not timed)"),
              _c("start", "time", "just before the call (null: not completed)", nullable=True),
              _c("end", "time", "just after it returned (null: not completed)", nullable=True),
              _c("bytes", "int", "the size of the whole array (nccl-tests' size)"),
              _c("verified", "bool", "the result was checked and right"),
              _c("error", "str", "what was wrong, or `not completed: ...`", nullable=True)),
          required=True),
    Table("messages", "one row per write a rank posted", (
        *_AGENT,
        _c("iteration", "int", "the iteration it belongs to"),
        _c("warmup", "bool", "of a warm-up iteration"),
        _c("peer", "int", "the rank written to"),
        _c("size", "int", "payload bytes"),
        _c("start", "time", "when the write was posted"),
        _c("end", "time", "when its last byte was acknowledged"),
        _c("retransmits", "int", "its packets sent again"),
        _c("trims", "int", "its packets trimmed in the fabric"),
        _c("evs_used", "list", "the EV indexes its packets went on (RoCEv2: [0])")),
          required=True),
    Table("qps", "one row per QP: how it ended and its counters", (
        *_AGENT, *_QP,
        _c("failed", "str", "why it gave up (null: it did not)", nullable=True),
        _c("failed_at", "time", "when it gave up", nullable=True, since=2),
        _c("failed_timeouts", "int", "consecutive timeouts when it gave up", nullable=True,
           since=2),
        _c("retry_budget_s", "float", "s from a packet's send to giving up", nullable=True,
           since=2),
        _c("cwnd", "float", "the congestion window at the end (bytes)"),
        _c("cc_decreases", "int", "the congestion control's cuts"),
        _c("cnps", "int", "CNPs received (DCQCN; null for MRC)", nullable=True),
        _c("plane", "int", "the plane it sent on (RoCEv2; null for MRC)", nullable=True),
        _c("sport", "int", "its UDP source port (RoCEv2; null for MRC)", nullable=True),
        *_QP_COUNTERS,
        _c("spine", "int", "the spine the fabric's hash gave it (null: same leaf, or it sent "
           "nothing)", nullable=True, only="rocev2")),
          required=True),
    Table("paths", "one row per path at the end: each EV of each MRC QP, each RoCEv2 QP", (
        *_AGENT, *_QP,
        _c("ev", "int", "the EV's index (RoCEv2: 0)"),
        _c("plane", "int", "the plane it crosses"),
        _c("spine", "int", "the spine it crosses (null: same leaf)", nullable=True),
        _c("sport", "int", "the QP's UDP source port", only="rocev2"),
        _c("state", "str", "its final state (GOOD, ASSUMED_BAD, DENIED)"),
        _c("sent", "int", "packets sent on it"),
        *_MRC_EV)),
    Table("ev_states", "one row per EV state change (MRC; empty for RoCEv2)", (
        *_AGENT, *_QP,
        _c("ev", "int", "the EV's index"),
        _c("time", "time", "when it changed"),
        _c("old", "str", "the state before"),
        _c("new", "str", "the state after"),
        _c("reason", "str", "why (the event that moved it)"))),
    Table("ev_load", "MRC, where sampled: each EV's load and delay over time", (
        *_AGENT,
        _c("time", "time", "when sampled"),
        *_QP,
        _c("ev", "int", "the EV's index"),
        _c("plane", "int", "the plane it crosses"),
        _c("sent", "int", "packets sent on it so far"),
        _c("srtt", "float", "its smoothed RTT (s; null: no sample yet)", nullable=True),
        _c("inflight", "int", "its packets in flight"),
        _c("active", "bool", "in the active set"),
        _c("spine", "int", "the spine it crosses (null: same leaf)", nullable=True))),
    Table("links", "every port's counters over time (the telemetry sampler)", (
        _c("time", "time", "when the node's counters were read"),
        _c("node", "str", "the node"),
        _c("ifname", "str", "the port"),
        _c("link", "str", "the link it belongs to"),
        _c("kind", "str", "host or fabric"),
        _c("plane", "int", "the link's plane"),
        _c("rx_bytes", "int", "cumulative, from /proc/<pid>/net/dev"),
        _c("rx_packets", "int", "cumulative"),
        _c("rx_errors", "int", "cumulative"),
        _c("rx_drop", "int", "cumulative"),
        _c("tx_bytes", "int", "cumulative"),
        _c("tx_packets", "int", "cumulative"),
        _c("tx_errors", "int", "cumulative"),
        _c("tx_drop", "int", "cumulative"),
        _c("queue_backlog", "int", "bytes in the data queue (null: not read this sample)",
           nullable=True),
        _c("queue_drops", "int", "the data queue's drops, cumulative (null: not read)",
           nullable=True),
        _c("ecn_marked", "int", "the eBPF queue's CE marks (null: no program here)",
           nullable=True),
        _c("trimmed", "int", "the eBPF queue's trims", nullable=True),
        _c("bpf_dropped", "int", "the eBPF queue's drops", nullable=True),
        _c("lossless_overflow", "int", "drops past the lossless limit", nullable=True),
        _c("vq_bytes", "int", "the eBPF virtual queue's bytes", nullable=True))),
    Table("events", "one row per fault action: when scheduled and applied", (
        _c("event", "int", "the index of the scenario's fault"),
        _c("kind", "str", "the fault's kind"),
        _c("target", "str", "what it targets"),
        _c("condition", "str", "down, blackhole, loss, degrade, delay, routed"),
        _c("on", "bool", "turned on (or off)"),
        _c("links", "list", "the links it changes"),
        _c("scheduled", "time", "when it was due"),
        _c("applied", "time", "when its last node was done (null: not applied)",
           nullable=True),
        _c("lag", "float", "applied minus scheduled (s)", nullable=True),
        _c("spread", "float", "s from its first node's change to its last", nullable=True),
        _c("holder", "int", "the fault whose condition it turns on or off"),
        _c("params", "json", "the fault's parameters"),
        _c("note", "str", "why it was not applied, or what failed", nullable=True))),
    Table("link_gaps", "the fidelity monitor: one row per port and histogram bucket of "
          "backlogged dequeues by how late they came (the port's totals on each row)", (
              _c("node", "str", "the node"),
              _c("ifname", "str", "the port"),
              _c("link", "str", "the link it belongs to"),
              _c("kind", "str", "host or fabric"),
              _c("plane", "int", "the link's plane"),
              _c("rate_bps", "int", "the port's rate (bit/s)"),
              _c("dequeues", "int", "dequeues measured"),
              _c("backlogged", "int", "backlogged dequeues measured"),
              _c("gap_ns", "int", "their gaps, summed"),
              _c("late_ns", "int", "their lateness, summed"),
              _c("bucket", "int", "the bucket"),
              _c("edge_pct", "float", "its upper edge (% of a full packet's time; inf)"),
              _c("gaps", "int", "backlogged dequeues in it"))),
    Table("cpu", "the machine's CPU, one row per sampling interval", (
        _c("time", "time", "the interval's end"),
        _c("interval_s", "float", "its length (s)"),
        _c("busy", "float", "machine-wide busy share"),
        _c("softirq", "float", "its softirq part (where the fabric forwards)"),
        _c("steal", "float", "its steal part (a hypervisor running other guests)"),
        _c("psi_some", "float", "share some task waited for a CPU (null: no PSI)",
           nullable=True),
        _c("process", "float", "share of all cores the sampling process used"),
        _c("server", "str", "the machine (its first server)", only="cluster"))),
    Table("steps", "a training step: one row per node of each rank in each iteration", (
        *_AGENT,
        _c("iteration", "int", "the iteration"),
        _c("warmup", "bool", "a warm-up iteration"),
        _c("node", "int", "the node's id in the graph"),
        _c("name", "str", "the node's name"),
        _c("kind", "str", "compute, collective, send or recv"),
        _c("collective", "str", "the collective (null: not one)", nullable=True),
        _c("group", "str", "the communicator's group", nullable=True),
        _c("peer", "int", "the peer of a send or recv", nullable=True),
        _c("bytes", "int", "its bytes"),
        _c("start", "time", "its start (a recv: when posted; a send: when it began waiting)"),
        _c("end", "time", "its end"),
        _c("verified", "bool", "its result was checked and right"),
        _c("error", "str", "what was wrong", nullable=True))),
)

TABLES: Final = {t.name: t for t in _TABLES}
MARKER: Final = "<!-- TABLE_COLUMNS -->"  # where the results page gets `markdown()`
REQUIRED_TABLES: Final = tuple(t.name for t in _TABLES if t.required)
OPTIONAL_TABLES: Final = tuple(t.name for t in _TABLES if not t.required)

ITERATION_COLUMNS: Final = TABLES["iterations"].names()
STEP_COLUMNS: Final = TABLES["steps"].names()
EVENT_COLUMNS: Final = TABLES["events"].names()
LINK_GAP_COLUMNS: Final = TABLES["link_gaps"].names()
CPU_COLUMNS: Final = tuple(c.name for c in TABLES["cpu"].columns if c.only is None)


def description() -> dict[str, Any]:
    """Every table and column as plain data (`mrc-testbed schema --tables`,
    schemas/tables.json), for notebooks and tools in other languages."""
    return {"title": "mrc-testbed results tables (parquet)",
            "kinds": KIND_MEANINGS,
            "tables": {t.name: {"file": t.file, "required": t.required, "meaning": t.meaning,
                                "columns": [{"name": c.name, "kind": c.kind,
                                             "nullable": c.nullable, "only": c.only,
                                             "since": c.since, "meaning": c.meaning}
                                            for c in t.columns]}
                       for t in _TABLES}}


def markdown() -> str:
    """The tables' columns as Markdown, for the manual's results page."""
    out = []
    for t in _TABLES:
        out += [f"### `{t.file}`", "", t.meaning[0].upper() + t.meaning[1:] + ".", "",
                "| column | kind | meaning |", "|---|---|---|"]
        for c in t.columns:
            notes = [note for note in (
                "or null" if c.nullable else "",
                f"{c.only} runs only" if c.only else "",
                f"meta.json v{c.since} on" if c.since > 1 else "") if note]
            kind = c.kind + (f" ({', '.join(notes)})" if notes else "")
            out.append(f"| `{c.name}` | {kind} | {c.meaning.replace('|', '/')} |")
        out.append("")
    return "\n".join(out)
