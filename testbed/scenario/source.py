"""Reading a scenario file and its YAML within fixed bounds, before any Python object is built.

Why: the testbed runs as root, unattended, and a scenario may come from anywhere. A 334-byte
YAML alias bomb expands to billions of nodes, a named pipe blocks `open` for ever, `/dev/zero`
never ends, 3,000 nested brackets overflow the parser's recursion, and a 5,000-digit integer
trips Python's int limit: each used to end in an out-of-memory, a hang or a traceback. Here the
file is opened without blocking and must be a regular file of bounded size; the YAML's events
are counted and its nesting measured by the streaming parser (which does not recurse); the
composed node graph is measured as it would be expanded (aliases counted at every use), and
only then are Python objects constructed. Every limit is in `limits.py`.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from testbed.errors import ScenarioError
from testbed.scenario import limits

_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"
_MERGE_TAG = "tag:yaml.org,2002:merge"


def read(path: Path, what: str = "scenario") -> str:
    """The text of a scenario (or drill) file: a regular file of at most MAX_SCENARIO_BYTES,
    UTF-8."""
    try:
        # O_NONBLOCK: opening a named pipe must not wait for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such {what} file",
                            "give the path of a YAML file, e.g. scenarios/quickstart.yaml"
                            ) from None
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read it ({exc.strerror or type(exc).__name__})"
                            ) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = ("a directory" if stat.S_ISDIR(st.st_mode) else
                    "a named pipe" if stat.S_ISFIFO(st.st_mode) else
                    "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else
                    "a socket")
            raise ScenarioError(f"{path}: not a regular file ({kind})",
                                "give the path of a YAML file")
        too_big = ScenarioError(
            f"{path}: larger than {limits.MAX_SCENARIO_BYTES:,} bytes, the limit of a "
            f"{what} file", "a scenario describes an experiment in a few kilobytes; "
                              "check that this is the file you meant")
        if st.st_size > limits.MAX_SCENARIO_BYTES:
            raise too_big
        chunks, size = [], 0
        while size <= limits.MAX_SCENARIO_BYTES:  # a file may grow while we read it
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limits.MAX_SCENARIO_BYTES:
            raise too_big
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read it ({exc.strerror or type(exc).__name__})"
                            ) from None
    finally:
        os.close(fd)
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"{path}: not UTF-8 text (byte {exc.start})",
                            f"a {what} is a YAML text file") from None


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML keeps the last of two equal keys; a repeated key is almost always a mistake."""


def _construct_mapping(loader: _UniqueKeyLoader, node: MappingNode,
                       deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _where(node: Node | yaml.Event) -> str:
    mark = node.start_mark
    return f" line {mark.line + 1}, column {mark.column + 1}:" if mark is not None else ""


def _syntax_error(exc: yaml.YAMLError, source: str) -> ScenarioError:
    mark = getattr(exc, "problem_mark", None)
    where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or str(exc)
    return ScenarioError(f"{source}:{where}: not valid YAML: {problem}",
                         "fix the YAML syntax at that place")


def _check_events(text: str, source: str) -> None:
    """Nesting depth and event count, from the streaming parser (iterative: no recursion)."""
    depth = 0
    for events, event in enumerate(yaml.parse(text, Loader=yaml.SafeLoader), 1):
        if events > 2 * limits.MAX_YAML_NODES:
            raise ScenarioError(f"{source}: more than {limits.MAX_YAML_NODES:,} YAML nodes, "
                                f"the limit of a scenario file")
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > limits.MAX_YAML_DEPTH:
                raise ScenarioError(f"{source}:{_where(event)} nested more than "
                                    f"{limits.MAX_YAML_DEPTH} deep (a scenario needs about 5)")
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1


def _check_nodes(root: Node, source: str) -> None:
    """The node graph as it would expand (an alias counts its whole target at every use),
    computed once per distinct node; plus what the constructor would choke on."""
    expanded: dict[int, int] = {}
    stack: list[tuple[Node, bool]] = [(root, False)]
    on_path: set[int] = set()
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            on_path.discard(key)
            kids = _children(node)
            expanded[key] = 1 + sum(expanded[id(k)] for k in kids)
            if expanded[key] > limits.MAX_YAML_NODES:
                raise ScenarioError(
                    f"{source}: expands to more than {limits.MAX_YAML_NODES:,} YAML nodes "
                    f"(aliases counted at every use), the limit of a scenario file",
                    "write the values out; a scenario needs no alias that repeats so much")
            continue
        if key in expanded:
            continue
        if key in on_path:
            raise ScenarioError(f"{source}:{_where(node)} an alias refers to itself")
        _check_one(node, source)
        on_path.add(key)
        stack.append((node, True))
        stack.extend((k, False) for k in _children(node) if id(k) not in expanded)


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _check_one(node: Node, source: str) -> None:
    if (isinstance(node, ScalarNode) and node.tag in (_INT_TAG, _FLOAT_TAG)
            and len(node.value) > limits.MAX_NUMBER_CHARS):
        raise ScenarioError(f"{source}:{_where(node)} a number of {len(node.value):,} "
                            f"characters (at most {limits.MAX_NUMBER_CHARS})")
    if isinstance(node, MappingNode):
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                raise ScenarioError(f"{source}:{_where(key_node)} YAML merge keys (<<) are not "
                                    f"supported: a merged key could hide a repeated one",
                                    "write the keys out in full")
            if not isinstance(key_node, ScalarNode):
                kind = "list" if isinstance(key_node, SequenceNode) else "mapping"
                raise ScenarioError(f"{source}:{_where(key_node)} a mapping key must be a plain "
                                    f"name, not a {kind}")


def load_yaml(text: str, source: str) -> Any:
    """The document in `text` as Python objects, once every bound holds."""
    try:
        _check_events(text, source)
        loader = _UniqueKeyLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _check_nodes(node, source)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise _syntax_error(exc, source) from None
