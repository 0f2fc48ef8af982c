"""The runner's end and the server agent's end of the cluster RPC agree: every request the
runner's side builds is an op of ops.py with the fields it has, every op has one handler on the
agent, and every handler reads only its request's fields. Read from the source, so that an op
or a field renamed at one end only fails here, without root, servers or mypy."""
from __future__ import annotations

import ast
import dataclasses
import typing
from pathlib import Path

import pytest

from testbed.cluster import ops, server_agent

CLUSTER = Path(ops.__file__).parent
RUNNER_SIDE = ("client.py", "client_nft.py", "network.py")
CLASSES = {cls.__name__: cls for cls in ops.REQUESTS.values()}


def fields(kind: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(kind)}


def required(kind: type) -> set[str]:
    return {n for n, f in fields(kind).items()
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}


def built_requests() -> list[tuple[str, int, str, ast.Call]]:
    """Every `ops.Name(...)` call on the runner's side: (file, line, Name, call)."""
    out = []
    for name in RUNNER_SIDE:
        for node in ast.walk(ast.parse((CLUSTER / name).read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "ops"
                    and node.func.attr[:1].isupper()):
                out.append((name, node.lineno, node.func.attr, node))
    return out


def handlers() -> list[tuple[str, str, ast.FunctionDef]]:
    """Every method of the agent decorated `@handles(ops.Name)`: (method, Name, its def)."""
    out = []
    tree = ast.parse(Path(server_agent.__file__).read_text())
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        for dec in node.decorator_list:
            if (isinstance(dec, ast.Call) and isinstance(dec.func, ast.Name)
                    and dec.func.id == "handles" and isinstance(dec.args[0], ast.Attribute)):
                out.append((node.name, dec.args[0].attr, node))
    return out


def test_the_source_is_read():
    """The checks below mean something only if they find the calls they check."""
    names = {n for _, _, n, _ in built_requests()}
    assert {"Link", "Configure", "NftSubmit", "Spawn", "Chunk", "Plan"} <= names
    assert len(handlers()) == len(ops.REQUESTS) == 38


def test_every_request_the_runner_builds_is_an_op_with_those_fields():
    problems = []
    for file, line, name, call in built_requests():
        kind = CLASSES.get(name)
        if kind is None:
            problems.append(f"{file}:{line}: ops.{name} is not a request of ops.py")
            continue
        if any(k.arg is None for k in call.keywords):
            problems.append(f"{file}:{line}: ops.{name}(**...) cannot be checked")
            continue
        given = {k.arg for k in call.keywords if k.arg is not None}
        named = list(fields(kind))
        positional = set(named[:len(call.args)])
        unknown = given - set(named)
        missing = required(kind) - given - positional
        if len(call.args) > len(named) or unknown or missing:
            problems.append(f"{file}:{line}: ops.{name}: unknown {sorted(unknown)}, missing "
                            f"{sorted(missing)}, {len(call.args)} positional of {len(named)}")
    assert not problems, "\n".join(problems)


def test_every_op_has_exactly_one_handler_taking_its_request():
    assert set(server_agent.HANDLERS) == set(ops.REQUESTS.values())
    for kind, method in server_agent.HANDLERS.items():
        hints = typing.get_type_hints(method, vars(server_agent))
        assert hints["req"] is kind, (f"{method.__name__} handles {kind.op} but takes "
                                      f"{hints['req']}")


def test_every_handler_reads_only_its_requests_fields():
    problems = []
    for method, name, fn in handlers():
        known = set(fields(CLASSES[name])) | {"op"}
        for node in ast.walk(fn):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id == "req" and node.attr not in known):
                problems.append(f"{method}: req.{node.attr} is not a field of ops.{name}")
    assert not problems, "\n".join(problems)


def test_a_line_decodes_into_its_request_or_fails_naming_what_is_wrong():
    assert (ops.decode({"op": "link", "node": "p0l0", "ifname": "p0l0-eth1", "up": False}) ==
            ops.Link(node="p0l0", ifname="p0l0-eth1", up=False))
    message = ops.NftStart(node="h0").message()
    assert message == {"op": "nft_start", "node": "h0", "setup": ""}
    assert ops.decode(message) == ops.NftStart(node="h0")
    with pytest.raises(ops.BadRequest, match="^unknown request 'nope'$"):
        ops.decode({"op": "nope"})
    with pytest.raises(ops.BadRequest, match="^link: .*unexpected keyword argument 'port'"):
        ops.decode({"op": "link", "node": "p0l0", "port": "p0l0-eth1", "up": False})
    with pytest.raises(ops.BadRequest, match="^link: .*missing 1 required .*'up'"):
        ops.decode({"op": "link", "node": "p0l0", "ifname": "p0l0-eth1"})
