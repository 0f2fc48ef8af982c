"""MLCommons Chakra execution traces (ET) as step graphs: a reader and a writer.

The format (schema/protobuf/et_def.proto in mlcommons/chakra, package ChakraProtoMsg): one file
per rank, `<prefix>.<rank>.et`, a stream of protobuf messages each preceded by its length as a
varint (protobuf's delimited encoding): one `GlobalMetadata`, then `Node`s; gzip-compressed
files are read too. This module decodes the wire format itself, for the fields a network replay
needs (Node 1 id, 2 name, 3 type, 4 ctrl_deps, 5 data_deps, 7 duration_micros, 10 attr;
AttributeProto 1 name and its scalar values): no generated code, no protobuf runtime in the
agents' environment, and every length is checked against a limit before anything is read into
memory, so no input can exhaust memory or hang the reader.

How nodes map onto graph.py's:
- COMP_NODE: compute of `duration_micros`; with `is_cpu_op` true it is a host-side operation,
  by default kept as a zero-length step (its dependencies still order the graph), timed as
  compute with `cpu_ops="compute"`.
- COMM_COLL_NODE: a collective (`comm_type`: ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER,
  REDUCE_SCATTER_BLOCK, ALL_TO_ALL; BARRIER is an all-reduce of one float32, as PyTorch's
  barrier is) of `comm_size` bytes rounded up to whole float32 elements, on the group `pg_name`
  names (absent: "all"). REDUCE, GATHER, SCATTER and BROADCAST have no counterpart here and are
  an error.
- COMM_SEND_NODE / COMM_RECV_NODE: a message to `comm_dst` / from `comm_src` of `comm_size`
  bytes (Chakra's generator writes `tensor_size` instead; either is read); the k-th send on a
  channel pairs with the k-th receive, and where both carry `comm_tag` the tags must agree.
- METADATA_NODE, MEM_LOAD_NODE, MEM_STORE_NODE: no network meaning; zero-length steps.
Dependencies as Chakra's feeder takes them (src/feeder/et_feeder.cpp, ETFeeder::readNode and
freeChildrenNodes: a node is issued once every node its data_deps name is done; ctrl_deps are
not read): a ctrl_dep naming a node the file does not have is dropped and counted (Chakra's
PyTorch converter writes them: its remove_dangling_nodes removes parents that only control
dependencies name); a data_dep naming one is an error, as the feeder would never issue that
node. The ctrl_deps that name a node of the file order the replay as data_deps do.
Groups: a mapping name -> ranks (ASTRA-sim's --comm-group-configuration JSON); without one,
every group a trace names holds every rank.
"""
from __future__ import annotations

import gzip
import json
import re
import struct
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, cast

from hostagent.workloads.collectives import DTYPE, MAX_WORLD, Kind
from hostagent.workloads.graph import (
    MAX_BYTES,
    MAX_DURATION,
    MAX_NODES,
    Graph,
    GraphError,
    Job,
    Node,
    NodeKind,
)

MAX_FILE_BYTES = 256 << 20  # one rank's trace, after gunzip
MAX_MESSAGE_BYTES = 4 << 20  # one node (its deps and attributes)
MAX_NAME = 200  # characters of a node's name kept
MAX_GROUPS_BYTES = 1 << 20  # the groups JSON
DEFAULT_GROUP = "all"

# NodeType and CollectiveCommType of et_def.proto
INVALID_NODE, METADATA_NODE, MEM_LOAD_NODE, MEM_STORE_NODE, COMP_NODE = 0, 1, 2, 3, 4
COMM_SEND_NODE, COMM_RECV_NODE, COMM_COLL_NODE = 5, 6, 7
COMM_TYPES: dict[int, Kind | None] = {0: "all_reduce", 1: None, 2: "all_gather", 3: None,
                                      4: None, 5: None, 6: "all_to_all", 7: "reduce_scatter",
                                      8: "reduce_scatter", 9: "all_reduce"}
COMM_NAMES = ("ALL_REDUCE", "REDUCE", "ALL_GATHER", "GATHER", "SCATTER", "BROADCAST",
              "ALL_TO_ALL", "REDUCE_SCATTER", "REDUCE_SCATTER_BLOCK", "BARRIER")
BARRIER = 9
COMM_TYPE_OF: dict[Kind, int] = {"all_reduce": 0, "all_gather": 2, "all_to_all": 6,
                                 "reduce_scatter": 7}
CpuOps = Literal["skip", "compute"]


class TraceError(GraphError):
    """A trace that cannot be replayed; the message names the file, the node and the field."""


# ---- the wire format ----
def _varint(buf: bytes, pos: int, end: int, where: str) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if pos >= end:
            raise TraceError(f"{where}: truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift >= 70:
            raise TraceError(f"{where}: corrupt varint (more than 10 bytes)")


def _signed(value: int, bits: int = 64) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _fields(buf: bytes, pos: int, end: int, where: str) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) of one message: an int for varints and fixed widths,
    a (start, end) span for length-delimited fields."""
    while pos < end:
        key, pos = _varint(buf, pos, end, where)
        number, wire = key >> 3, key & 7
        value: Any
        if number == 0:
            raise TraceError(f"{where}: corrupt message (field number 0)")
        if wire == 0:
            value, pos = _varint(buf, pos, end, where)
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            if pos + width > end:
                raise TraceError(f"{where}: field {number} truncated")
            value = int.from_bytes(buf[pos:pos + width], "little")
            pos += width
        elif wire == 2:
            size, pos = _varint(buf, pos, end, where)
            if pos + size > end:
                raise TraceError(f"{where}: field {number} claims {size} B, "
                                 f"{end - pos} B are left")
            value = (pos, pos + size)
            pos += size
        else:
            raise TraceError(f"{where}: field {number} has wire type {wire}, which "
                             f"et_def.proto does not use")
        yield number, wire, value


def _packed(buf: bytes, wire: int, value: Any, where: str) -> list[int]:
    """A repeated uint64: packed (one span) or one value per field."""
    if wire == 0:
        return [value]
    if wire != 2:
        raise TraceError(f"{where}: wire type {wire} for a list of uint64")
    out, pos = [], value[0]
    while pos < value[1]:
        item, pos = _varint(buf, pos, value[1], where)
        out.append(item)
    return out


def _text(buf: bytes, span: tuple[int, int], where: str) -> str:
    try:
        return buf[span[0]:span[1]].decode()
    except UnicodeDecodeError:
        raise TraceError(f"{where}: a string that is not UTF-8") from None


# AttributeProto's scalar values by field number: how to read them
_ATTR_SCALARS = {3: "double", 5: "float", 7: "int32", 9: "int64", 11: "uint32", 13: "uint64",
                 15: "sint32", 17: "sint64", 19: "fixed32", 21: "fixed64", 23: "sfixed32",
                 25: "sfixed64", 27: "bool", 29: "string", 31: "bytes"}


def _attr_value(buf: bytes, number: int, wire: int, value: Any, where: str) -> object:
    kind = _ATTR_SCALARS.get(number)
    if kind is None:
        return None  # a list value: nothing of the replay reads one
    expected_wire = {"double": 1, "fixed64": 1, "sfixed64": 1, "float": 5, "fixed32": 5,
                     "sfixed32": 5, "string": 2, "bytes": 2}.get(kind, 0)
    if wire != expected_wire:
        raise TraceError(f"{where}: a {kind} value with wire type {wire}")
    if kind in ("int32", "int64"):
        return _signed(value)
    if kind in ("sint32", "sint64"):
        return (value >> 1) ^ -(value & 1)
    if kind == "bool":
        return bool(value)
    if kind == "double":
        return struct.unpack("<d", value.to_bytes(8, "little"))[0]
    if kind == "float":
        return struct.unpack("<f", value.to_bytes(4, "little"))[0]
    if kind == "sfixed32":
        return _signed(value, 32)
    if kind == "sfixed64":
        return _signed(value)
    if kind == "string":
        return _text(buf, value, where)
    if kind == "bytes":
        return buf[value[0]:value[1]]
    return value  # uint32, uint64, fixed32, fixed64


def _attribute(buf: bytes, span: tuple[int, int], where: str) -> tuple[str, object]:
    name, out = "", None
    for number, wire, value in _fields(buf, span[0], span[1], where):
        if number == 1 and wire == 2:
            name = _text(buf, value, where)
        elif number != 2:
            out = _attr_value(buf, number, wire, value, f"{where}, attribute {name!r}")
    return name, out


@dataclass(frozen=True)
class TraceNode:
    """One Chakra node as read: the fields the replay uses."""

    id: int
    name: str
    type: int
    ctrl_deps: tuple[int, ...]
    data_deps: tuple[int, ...]
    duration_micros: int
    attrs: Mapping[str, object]


def _node(buf: bytes, start: int, end: int, where: str) -> TraceNode:
    nid, name, ntype, duration = 0, "", 0, 0
    ctrl: list[int] = []
    data: list[int] = []
    attrs: dict[str, object] = {}
    for number, wire, value in _fields(buf, start, end, where):
        if number == 1 and wire == 0:
            nid = value
        elif number == 2 and wire == 2:
            name = _text(buf, value, where)[:MAX_NAME]
        elif number == 3 and wire == 0:
            ntype = value
        elif number == 4:
            ctrl += _packed(buf, wire, value, f"{where}, ctrl_deps")
        elif number == 5:
            data += _packed(buf, wire, value, f"{where}, data_deps")
        elif number == 7 and wire == 0:
            duration = value
        elif number == 10 and wire == 2:
            key, attr = _attribute(buf, value, where)
            attrs[key] = attr
    return TraceNode(nid, name, ntype, tuple(ctrl), tuple(data), duration, attrs)


def decode(buf: bytes, source: str) -> tuple[str, list[TraceNode]]:
    """A whole trace file: its GlobalMetadata's version and its nodes, in file order."""
    pos, version, first = 0, "", True
    nodes: list[TraceNode] = []
    while pos < len(buf):
        where = f"{source}: message at byte {pos}"
        size, body = _varint(buf, pos, len(buf), f"{where}: its length")
        if body - pos > 5:
            raise TraceError(f"{where}: corrupt length (a varint32 of more than 5 bytes)")
        if size > MAX_MESSAGE_BYTES:
            raise TraceError(f"{where}: length {size} B is above the limit of "
                             f"{MAX_MESSAGE_BYTES} B (a corrupt length, or not a Chakra trace)")
        if body + size > len(buf):
            raise TraceError(f"{where}: truncated: its length says {size} B, "
                             f"{len(buf) - body} B are left")
        if first:
            for number, wire, value in _fields(buf, body, body + size, f"{where} (metadata)"):
                if number == 1 and wire == 2:
                    version = _text(buf, value, where)
            first = False
        else:
            if len(nodes) >= MAX_NODES:
                raise TraceError(f"{source}: more than the limit of {MAX_NODES} nodes")
            nodes.append(_node(buf, body, body + size, f"{where} (node #{len(nodes)})"))
        pos = body + size
    if first:
        raise TraceError(f"{source}: empty (no GlobalMetadata)")
    return version, nodes


def read_file(path: Path) -> bytes:
    """A trace's bytes (gunzipped if it is gzip), at most MAX_FILE_BYTES."""
    try:
        with path.open("rb") as f:
            head = f.read(2)
            f.seek(0)
            stream = gzip.GzipFile(fileobj=f) if head == b"\x1f\x8b" else f
            data = stream.read(MAX_FILE_BYTES + 1)
    except (OSError, EOFError) as exc:
        raise TraceError(f"{path}: cannot read: {exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise TraceError(f"{path}: more than the limit of {MAX_FILE_BYTES} B")
    return data


# ---- trace files of a job ----
_RANK_FILE = re.compile(r"^(?P<prefix>.*)\.(?P<rank>\d{1,6})\.et$")


def trace_files(path: Path) -> list[Path]:
    """The files of a trace in rank order: `path` is a directory holding `<prefix>.<r>.et` of
    one prefix, a prefix (`dir/name` for `dir/name.<r>.et`) or one `.et` file; ranks must run
    0..n-1 without a gap. Only regular files count (a FIFO would block the reader)."""
    if path.is_file():
        return [path]
    if path.is_dir():
        found = [p for p in path.iterdir() if _RANK_FILE.match(p.name) and p.is_file()]
        prefixes = sorted({cast(re.Match[str], _RANK_FILE.match(p.name))["prefix"]
                           for p in found})
        if len(prefixes) != 1:
            raise TraceError(f"{path}: a trace directory holds <prefix>.<rank>.et files of one "
                             f"prefix; found {prefixes or 'none'}")
    else:
        parent, stem = path.parent, path.name
        found = ([p for p in parent.iterdir()
                  if (m := _RANK_FILE.match(p.name)) and m["prefix"] == stem and p.is_file()]
                 if parent.is_dir() else [])
        if not found:
            raise TraceError(f"{path}: no such file, directory or prefix of "
                             f"{path.name}.<rank>.et files")
    ranks = {int(cast(re.Match[str], _RANK_FILE.match(p.name))["rank"]): p for p in found}
    if len(ranks) > MAX_WORLD:
        raise TraceError(f"{path}: {len(ranks)} ranks, more than the limit of {MAX_WORLD}")
    missing = sorted(set(range(max(ranks) + 1)) - set(ranks))
    if missing:
        raise TraceError(f"{path}: ranks {missing} have no file (ranks run 0..{max(ranks)})")
    return [ranks[r] for r in range(len(ranks))]


def read_groups(path: Path, world: int) -> dict[str, tuple[int, ...]]:
    """ASTRA-sim's communicator groups JSON: {"name": [rank, ...], ...}."""
    if not path.is_file():  # a FIFO or a device would block or never end
        raise TraceError(f"{path}: not a regular file")
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_GROUPS_BYTES + 1)
    except OSError as exc:
        raise TraceError(f"{path}: cannot read: {exc}") from None
    if len(raw) > MAX_GROUPS_BYTES:
        raise TraceError(f"{path}: more than the limit of {MAX_GROUPS_BYTES} B")
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise TraceError(f"{path}: not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise TraceError(f"{path}: a mapping of group name to ranks is expected")
    out = {}
    for name, ranks in data.items():
        if not isinstance(ranks, list) or not all(type(r) is int for r in ranks):
            raise TraceError(f"{path}: group {name!r}: ranks must be a list of integers")
        bad = [r for r in ranks if not 0 <= r < world]
        if bad:
            raise TraceError(f"{path}: group {name!r} names ranks {bad}, which the trace "
                             f"(ranks 0..{world - 1}) does not have")
        out[str(name)] = tuple(ranks)
    return out


def _int_attr(node: TraceNode, name: str, where: str) -> int | None:
    value = node.attrs.get(name)
    if value is None:
        return None
    if type(value) is not int:
        raise TraceError(f"{where}: field {name} is {value!r}, not an integer")
    return value


def _size(node: TraceNode, where: str, field: str) -> int:
    value = _int_attr(node, field, where)
    if value is None or not 0 <= value <= MAX_BYTES:
        raise TraceError(f"{where}: field {field} is {value}, not a size in 0..{MAX_BYTES} B")
    return max(DTYPE.itemsize, -(-value // DTYPE.itemsize) * DTYPE.itemsize)


def _where(source: str, node: TraceNode) -> str:
    return f"{source}: node {node.id}{f' ({node.name})' if node.name else ''}"


def present_deps(nodes: list[TraceNode], source: str) -> tuple[list[TraceNode], int]:
    """The nodes with the ctrl_deps that name no node of the file dropped, and how many were;
    a data_dep naming no node of the file is a TraceError (see the module doc: Chakra's feeder
    drops the one and never issues a node with the other)."""
    ids = {n.id for n in nodes}
    out, dropped = [], 0
    for n in nodes:
        for dep in n.data_deps:
            if dep not in ids:
                raise TraceError(
                    f"{_where(source, n)}: field data_deps names node {dep}, which this file "
                    f"does not have; Chakra's feeder would never issue this node (ASTRA-sim "
                    f"would stop there): convert the trace again, or remove {dep} from the "
                    f"node's data_deps")
        kept = tuple(d for d in n.ctrl_deps if d in ids)
        dropped += len(n.ctrl_deps) - len(kept)
        out.append(n if len(kept) == len(n.ctrl_deps) else replace(n, ctrl_deps=kept))
    return out, dropped


def to_graph(rank: int, nodes: list[TraceNode], source: str,
             cpu_ops: CpuOps = "skip") -> tuple[Graph, dict[tuple[int, int], list[int | None]]]:
    """One rank's trace as a graph, and the comm_tags of its sends and receives per channel
    ((src, dst) -> tags in order; None where a node has none). `nodes` as `present_deps`
    leaves them (Graph.validate refuses a dependency on a node the rank does not have)."""
    out: list[Node] = []
    tags: dict[tuple[int, int], list[int | None]] = defaultdict(list)
    for n in nodes:
        where = _where(source, n)
        if n.id >= 2**63:
            raise TraceError(f"{where}: field id {n.id} is beyond 2^63")
        common: dict[str, Any] = {"name": n.name, "data_deps": n.data_deps,
                                  "ctrl_deps": n.ctrl_deps}
        kind: NodeKind = "compute"
        if n.type == COMP_NODE:
            seconds = n.duration_micros / 1e6
            if seconds > MAX_DURATION:
                raise TraceError(f"{where}: field duration_micros {n.duration_micros} is above "
                                 f"the limit of {MAX_DURATION:g} s")
            if n.attrs.get("is_cpu_op") is True and cpu_ops == "skip":
                seconds = 0.0
            common["duration"] = seconds
        elif n.type == COMM_COLL_NODE:
            kind = "collective"
            code = _int_attr(n, "comm_type", where)
            collective = COMM_TYPES.get(code) if code is not None else None
            if collective is None:
                name = (COMM_NAMES[code] if code is not None and 0 <= code < len(COMM_NAMES)
                        else code)
                raise TraceError(f"{where}: field comm_type {name} cannot be replayed (one of "
                                 f"ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, REDUCE_SCATTER_BLOCK, "
                                 f"ALL_TO_ALL, BARRIER)")
            group = n.attrs.get("pg_name") or DEFAULT_GROUP
            if not isinstance(group, str):
                raise TraceError(f"{where}: field pg_name is {group!r}, not a string")
            size = DTYPE.itemsize if code == BARRIER else _size(n, where, "comm_size")
            common.update(collective=collective, group=group, bytes=size)
        elif n.type in (COMM_SEND_NODE, COMM_RECV_NODE):
            kind = "send" if n.type == COMM_SEND_NODE else "recv"
            field = "comm_dst" if kind == "send" else "comm_src"
            peer = _int_attr(n, field, where)
            if peer is None:
                raise TraceError(f"{where}: field {field} is missing (a {kind} needs its peer)")
            size_field = "comm_size" if "comm_size" in n.attrs else "tensor_size"
            label = n.attrs.get("pg_name")
            common.update(peer=peer, bytes=_size(n, where, size_field),
                          group=label if isinstance(label, str) and label else None)
            tags[(rank, peer) if kind == "send" else (peer, rank)].append(
                _int_attr(n, "comm_tag", where))
        elif n.type in (METADATA_NODE, MEM_LOAD_NODE, MEM_STORE_NODE):
            pass  # no network meaning: a zero-length step
        else:
            raise TraceError(f"{where}: field type {n.type} is not a node type of et_def.proto "
                             f"(1..7)")
        out.append(Node(n.id, kind, **common))
    return Graph(rank, tuple(out)), tags


def _check_tags(sent: Mapping[tuple[int, int], list[int | None]],
                received: Mapping[tuple[int, int], list[int | None]], files: list[Path]) -> None:
    for src, dst in sorted(set(sent) & set(received)):
        for k, (a, b) in enumerate(zip(sent[(src, dst)], received[(src, dst)], strict=False)):
            if a is not None and b is not None and a != b:
                raise TraceError(f"channel {src} -> {dst}, message #{k}: {files[src]} sends "
                                 f"field comm_tag {a}, {files[dst]} receives comm_tag {b}")


def read_job(path: Path, hosts: list[str] | tuple[str, ...], *, groups: Path | None = None,
             replicate: bool = False, cpu_ops: CpuOps = "skip") -> Job:
    """A Chakra trace as a validated job: trace rank r on `hosts[r]`. `replicate`: the trace is
    one rank's, run by every host (its sends and receives then make no sense and are refused
    by the checks). `meta["ctrl_deps_dropped"]`: per rank, the ctrl_deps dropped from its
    file (`present_deps`). Raises TraceError naming the file, the node and the field."""
    files = trace_files(path)
    world = len(hosts) if replicate else len(files)
    if replicate and len(files) != 1:
        raise TraceError(f"{path}: replicate runs one rank's trace on every rank, but "
                         f"{len(files)} rank files are there")
    if not replicate and hosts and len(files) != len(hosts):
        raise TraceError(f"{path}: the trace has {len(files)} ranks, the workload "
                         f"{len(hosts)}")
    read = [present_deps(decode(read_file(f), str(f))[1], str(f)) for f in files]
    parsed = [nodes for nodes, _ in read]
    dropped = [count for _, count in read]
    if replicate:
        files, parsed, dropped = files * world, parsed * world, dropped * world
    graphs: list[Graph] = []
    sent: dict[tuple[int, int], list[int | None]] = defaultdict(list)
    received: dict[tuple[int, int], list[int | None]] = defaultdict(list)
    for rank, (file, nodes) in enumerate(zip(files, parsed, strict=True)):
        graph, tags = to_graph(rank, nodes, str(file), cpu_ops)
        graphs.append(graph)
        for (src, dst), values in tags.items():
            (sent if src == rank else received)[(src, dst)] += values
    named = {cast(str, n.group) for g in graphs for n in g.nodes if n.kind == "collective"}
    table = read_groups(groups, world) if groups is not None else {}
    unknown = sorted(named - set(table) - {DEFAULT_GROUP})
    if groups is not None and unknown:
        raise TraceError(f"{groups}: no group {unknown[0]!r}, which a trace node names in its "
                         f"field pg_name")
    every = tuple(range(world))
    job_groups = {name: table.get(name, every) for name in sorted(named)}
    _check_tags(sent, received, files)
    job = Job(world, job_groups, tuple(graphs), tuple(hosts),
              {"source": str(path), "replicate": replicate, "cpu_ops": cpu_ops,
               "ctrl_deps_dropped": dropped})
    try:
        return job.validate()
    except TraceError:
        raise
    except GraphError as exc:
        raise TraceError(f"{path}: {exc}") from None


# ---- the writer ----
def _key(number: int, wire: int) -> bytes:
    return _uvarint(number << 3 | wire)


def _uvarint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _bytes_field(number: int, data: bytes) -> bytes:
    return _key(number, 2) + _uvarint(len(data)) + data


def encode_attr(name: str, value: int | bool | str) -> bytes:
    """An AttributeProto: int64_val, bool_val or string_val."""
    body = _bytes_field(1, name.encode())
    if isinstance(value, bool):
        body += _key(27, 0) + _uvarint(int(value))
    elif isinstance(value, int):
        body += _key(9, 0) + _uvarint(value)
    else:
        body += _bytes_field(29, value.encode())
    return body


def encode_node(nid: int, name: str, ntype: int, *, data_deps: tuple[int, ...] = (),
                ctrl_deps: tuple[int, ...] = (), duration_micros: int = 0,
                attrs: Mapping[str, int | bool | str] | None = None) -> bytes:
    body = (_key(1, 0) + _uvarint(nid) + _bytes_field(2, name.encode()) + _key(3, 0) +
            _uvarint(ntype))
    for number, deps in ((4, ctrl_deps), (5, data_deps)):
        if deps:
            body += _bytes_field(number, b"".join(_uvarint(d) for d in deps))
    if duration_micros:
        body += _key(7, 0) + _uvarint(duration_micros)
    for key, value in (attrs or {}).items():
        body += _bytes_field(10, encode_attr(key, value))
    return body


def delimited(message: bytes) -> bytes:
    return _uvarint(len(message)) + message


def encode_graph(graph: Graph, version: str = "0.0.4") -> bytes:
    """One rank's graph as a trace file's bytes (compute in whole microseconds)."""
    out = [delimited(_bytes_field(1, version.encode()))]
    index: dict[tuple[str, Any], int] = defaultdict(int)
    for n in graph.nodes:
        attrs: dict[str, int | bool | str] = {"is_cpu_op": False}
        if n.kind == "compute":
            out.append(delimited(encode_node(n.id, n.name, COMP_NODE, attrs=attrs,
                                             duration_micros=round(n.duration * 1e6),
                                             data_deps=n.data_deps, ctrl_deps=n.ctrl_deps)))
            continue
        attrs["comm_size"] = n.bytes
        if n.group:
            attrs["pg_name"] = n.group
        if n.kind == "collective":
            attrs["comm_type"] = COMM_TYPE_OF[cast(Kind, n.collective)]
            ntype = COMM_COLL_NODE
        else:
            peer = cast(int, n.peer)
            src, dst = (graph.rank, peer) if n.kind == "send" else (peer, graph.rank)
            attrs.update(comm_src=src, comm_dst=dst, comm_tag=index[(n.kind, peer)])
            index[(n.kind, peer)] += 1
            ntype = COMM_SEND_NODE if n.kind == "send" else COMM_RECV_NODE
        out.append(delimited(encode_node(n.id, n.name, ntype, attrs=attrs,
                                         data_deps=n.data_deps, ctrl_deps=n.ctrl_deps)))
    return b"".join(out)


def write_job(job: Job, prefix: Path) -> list[Path]:
    """`<prefix>.<rank>.et` for every rank and `<prefix>.groups.json` (ASTRA-sim's groups
    file); the files written."""
    prefix.parent.mkdir(parents=True, exist_ok=True)
    files = []
    for graph in job.graphs:
        file = prefix.parent / f"{prefix.name}.{graph.rank}.et"
        file.write_bytes(encode_graph(graph))
        files.append(file)
    groups = prefix.parent / f"{prefix.name}.groups.json"
    groups.write_text("{\n" + ",\n".join(f"  {json.dumps(k)}: {json.dumps(list(v))}"
                                          for k, v in job.groups.items()) + "\n}\n")
    return [*files, groups]
